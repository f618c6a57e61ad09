// ggml's own reference (de)quantizers, compiled from llama.cpp's ggml/src/ggml-quants.c, run over
// awkward rows: writes rows.f32 (the input), and per format FMT.q (quantize_row_FMT_ref's bytes)
// and FMT.f32 (dequantize_row_FMT of those bytes). make.sh builds and runs it; Kiln's tests
// (core/tests/quant_k.rs) read the files, so CI needs no C build.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"
#include "ggml-common.h"

// What ggml-quants.c calls outside itself (only on paths these formats never take).
void ggml_abort(const char * file, int line, const char * fmt, ...) { fprintf(stderr, "abort %s:%d %s\n", file, line, fmt); abort(); }

#define ROWS 18
#define COLS 512

static uint64_t s = 0x9E3779B97F4A7C15ull;
static float uni(void) {  // [0, 1), xorshift64*
    s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
    return (float)((s * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}
static float gauss(void) {
    float u = uni() + 1e-7f, v = uni();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static void fill(float * r, int row) {
    for (int i = 0; i < COLS; i++) {
        float g = gauss();
        switch (row) {
            case 0: r[i] = 0.0f; break;                                   // zeros
            case 1: r[i] = (i % 3) ? -0.0f : 0.0f; break;                  // ±0
            case 2: r[i] = 1.5f; break;                                    // constant
            case 3: r[i] = -3.25f; break;                                  // constant < 0
            case 4: r[i] = g; break;                                       // random
            case 5: r[i] = fabsf(g) + 0.25f; break;                        // all > 0 (min > 0)
            case 6: r[i] = -fabsf(g) - 0.25f; break;                       // all < 0
            case 7: r[i] = g * 1e30f; break;                               // f16 scales overflow
            case 8: r[i] = g * 6e4f; break;                                // near f16's max
            case 9: r[i] = g * 1e-40f; break;                              // subnormal
            case 10: r[i] = g * 1e-6f; break;                              // subnormal f16 scales
            case 11: r[i] = (i % 97 == 5) ? 300.0f : g * 0.01f; break;     // spikes
            case 12: r[i] = (i == 77) ? NAN : g; break;                    // NaN
            case 13: r[i] = (i == 300) ? INFINITY : (i == 301 ? -INFINITY : g); break;  // ±inf
            case 14: r[i] = g * ldexpf(1.0f, (i / 16) % 9 - 4); break;     // scales vary per sub-block
            case 15: r[i] = (float)((int)(g * 4.0f)) * 0.125f; break;      // grid values (ties)
            case 16: r[i] = (i % 5) ? g : 0.0f; break;                     // sparse zeros
            default: r[i] = g * 0.02f + ((i / 32) % 2 ? 0.01f : -0.01f); break;  // weight-like
        }
    }
}

static void put(const char * name, const void * p, size_t n) {
    FILE * f = fopen(name, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(name); exit(1); }
    fclose(f);
}

typedef void (*qfn)(const float *, void *, int64_t);
typedef void (*dfn)(const void *, float *, int64_t);

static void run(const char * fmt, size_t block_bytes, int block_len, qfn q, dfn d, const float * x) {
    size_t row_bytes = COLS / block_len * block_bytes;
    uint8_t * qb = calloc(ROWS, row_bytes);
    float * y = calloc(ROWS * COLS, sizeof(float));
    for (int r = 0; r < ROWS; r++) {
        q(x + r * COLS, qb + r * row_bytes, COLS);
        d(qb + r * row_bytes, y + r * COLS, COLS);
    }
    char name[64];
    snprintf(name, sizeof name, "%s.q", fmt);
    put(name, qb, ROWS * row_bytes);
    snprintf(name, sizeof name, "%s.f32", fmt);
    put(name, y, ROWS * COLS * sizeof(float));
    free(qb);
    free(y);
}

int main(void) {
    static float x[ROWS * COLS];
    for (int r = 0; r < ROWS; r++) fill(x + r * COLS, r);
    put("rows.f32", x, sizeof x);
    run("q2_k", sizeof(block_q2_K), QK_K, (qfn)quantize_row_q2_K_ref, (dfn)dequantize_row_q2_K, x);
    run("q3_k", sizeof(block_q3_K), QK_K, (qfn)quantize_row_q3_K_ref, (dfn)dequantize_row_q3_K, x);
    run("q4_k", sizeof(block_q4_K), QK_K, (qfn)quantize_row_q4_K_ref, (dfn)dequantize_row_q4_K, x);
    run("q5_k", sizeof(block_q5_K), QK_K, (qfn)quantize_row_q5_K_ref, (dfn)dequantize_row_q5_K, x);
    run("q6_k", sizeof(block_q6_K), QK_K, (qfn)quantize_row_q6_K_ref, (dfn)dequantize_row_q6_K, x);
    run("q5_0", sizeof(block_q5_0), QK5_0, (qfn)quantize_row_q5_0_ref, (dfn)dequantize_row_q5_0, x);
    run("q5_1", sizeof(block_q5_1), QK5_1, (qfn)quantize_row_q5_1_ref, (dfn)dequantize_row_q5_1, x);
    return 0;
}
