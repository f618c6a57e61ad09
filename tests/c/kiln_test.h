/* Small helpers shared by the C tests. */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include <kiln.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int kt_failures = 0;

#define KT_FAIL(...) do { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n"); kt_failures++; } while (0)

static inline const char *kt_msg(void) {
    static _Thread_local char buf[1024];
    kiln_last_error_message(buf, sizeof buf);
    return buf;
}

/* A call that must succeed; on failure reports and aborts the test program. */
static inline void kt_ok(KilnStatus s, const char *what, const char *file, int line) {
    if (s != KILN_OK) {
        fprintf(stderr, "FAIL %s:%d: %s -> %s: %s\n", file, line, what, kiln_status_name(s), kt_msg());
        exit(1);
    }
}
#define OK_EXPR(call) kt_ok((call), #call, __FILE__, __LINE__)
#define OK(call) do { KilnStatus s_ = (call); if (s_ != KILN_OK) { \
    fprintf(stderr, "FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, kiln_status_name(s_), kt_msg()); \
    exit(1); } } while (0)

/* A call that must fail with `want` and leave a message that contains `needle`. */
#define EXPECT_ERR(want, needle, call) do { KilnStatus s_ = (call); \
    if (s_ != (want)) KT_FAIL("%s -> %s, want %s (%s)", #call, kiln_status_name(s_), kiln_status_name(want), kt_msg()); \
    else if (strstr(kt_msg(), (needle)) == NULL) KT_FAIL("%s: message %s lacks %s", #call, kt_msg(), needle); } while (0)

#define CHECK(cond) do { if (!(cond)) KT_FAIL("%s", #cond); } while (0)

/* Deterministic pseudo-random floats in [-1, 1). */
static uint64_t kt_state = 0x9E3779B97F4A7C15ull;
static inline float kt_rand(void) {
    kt_state = kt_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((kt_state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}
static inline void kt_fill(float *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = kt_rand(); }

static inline KilnTensor *kt_f32(const float *data, const size_t *shape, size_t ndim) {
    size_t n = 1;
    for (size_t i = 0; i < ndim; i++) n *= shape[i];
    KilnTensor *t = NULL;
    OK(kiln_tensor_from_host(KILN_F32, shape, ndim, data, n * sizeof(float), &t));
    return t;
}

static inline KilnTensor *kt_i32(const int32_t *data, const size_t *shape, size_t ndim) {
    size_t n = 1;
    for (size_t i = 0; i < ndim; i++) n *= shape[i];
    KilnTensor *t = NULL;
    OK(kiln_tensor_from_host(KILN_I32, shape, ndim, data, n * sizeof(int32_t), &t));
    return t;
}

static inline size_t kt_numel(const KilnTensor *t) { size_t n = 0; OK(kiln_tensor_numel(t, &n)); return n; }

/* Reads back a tensor into a new malloc'ed array (4 bytes an element; 1 for KILN_BOOL). */
static inline void *kt_read(const KilnTensor *t, size_t *n_out) {
    size_t nb = 0;
    OK(kiln_tensor_nbytes(t, &nb));
    void *buf = malloc(nb ? nb : 1);
    OK(kiln_tensor_to_host(t, buf, nb));
    if (n_out) *n_out = kt_numel(t);
    return buf;
}

static inline void kt_expect_shape(const KilnTensor *t, const size_t *shape, size_t ndim, const char *what) {
    size_t got[8] = {0}, nd = 99;
    OK(kiln_tensor_ndim(t, &nd));
    OK(kiln_tensor_shape(t, got, 8));
    int same = nd == ndim;
    for (size_t i = 0; same && i < ndim; i++) same = got[i] == shape[i];
    if (!same) KT_FAIL("%s: shape rank %zu [%zu, %zu, ...], want rank %zu [%zu, ...]", what, nd, got[0], got[1], ndim,
                       ndim ? shape[0] : 0);
}

/* Compares a float tensor with `want` (n values) within atol + rtol * |want|; frees nothing. */
static inline void kt_expect_f32(const KilnTensor *t, const float *want, size_t n, float atol, float rtol, const char *what) {
    size_t got_n = 0;
    float *got = (float *)kt_read(t, &got_n);
    if (got_n != n) KT_FAIL("%s: %zu elements, want %zu", what, got_n, n);
    else
        for (size_t i = 0; i < n; i++) {
            float d = fabsf(got[i] - want[i]);
            if (!(d <= atol + rtol * fabsf(want[i])) && !(isinf(want[i]) && got[i] == want[i])) {
                KT_FAIL("%s[%zu] = %.7g, want %.7g", what, i, got[i], want[i]);
                break;
            }
        }
    free(got);
}

static inline void kt_expect_u32(const KilnTensor *t, const uint32_t *want, size_t n, const char *what) {
    KilnDType dt = 99;
    OK(kiln_tensor_dtype(t, &dt));
    if (dt != KILN_U32 && dt != KILN_I32) { KT_FAIL("%s: dtype %u is not a 32-bit integer", what, (unsigned)dt); return; }
    size_t got_n = 0;
    uint32_t *got = (uint32_t *)kt_read(t, &got_n);
    if (got_n != n) KT_FAIL("%s: %zu elements, want %zu", what, got_n, n);
    else
        for (size_t i = 0; i < n; i++)
            if (got[i] != want[i]) { KT_FAIL("%s[%zu] = %u, want %u", what, i, got[i], want[i]); break; }
    free(got);
}

/* A KILN_BOOL tensor holding `want` (0 or 1 each): one byte an element on the host. */
static inline void kt_expect_bool(const KilnTensor *t, const uint32_t *want, size_t n, const char *what) {
    KilnDType dt = 99;
    OK(kiln_tensor_dtype(t, &dt));
    if (dt != KILN_BOOL) { KT_FAIL("%s: dtype %u is not KILN_BOOL", what, (unsigned)dt); return; }
    size_t got_n = 0, nb = 0, size = 0;
    OK(kiln_tensor_nbytes(t, &nb));
    OK(kiln_dtype_size(KILN_BOOL, &size));
    uint8_t *got = (uint8_t *)kt_read(t, &got_n);
    if (got_n != n || nb != n || size != 1) KT_FAIL("%s: %zu elements in %zu bytes, want %zu", what, got_n, nb, n);
    else
        for (size_t i = 0; i < n; i++)
            if (got[i] != want[i]) { KT_FAIL("%s[%zu] = %u, want %u", what, i, got[i], want[i]); break; }
    free(got);
}

#endif
