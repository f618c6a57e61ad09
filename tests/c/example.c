/* The C example from the issue: include only kiln.h, link -lkiln. Uploads two matrices,
 * multiplies them, runs a custom WGSL kernel, reads the results back, and shows the status
 * and message for a NULL argument and for invalid WGSL. Exits non-zero on any surprise. */
#include <kiln.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, KilnStatus s) {
    char msg[512];
    kiln_last_error_message(msg, sizeof msg);
    fprintf(stderr, "example: %s failed: %s (%s)\n", what, kiln_status_name(s), msg);
    return 1;
}

#define TRY(call) do { KilnStatus s_ = (call); if (s_ != KILN_OK) return fail(#call, s_); } while (0)

static const char *DOUBLE_PLUS = /* y[i] = 2 * x[i] + p.offset */
    "struct P { offset: f32, n: u32 }\n"
    "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
    "@group(0) @binding(2) var<uniform> p: P;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
    "    if (id.x < p.n) { y[id.x] = 2.0 * x[id.x] + p.offset; }\n"
    "}\n";

int main(void) {
    printf("kiln %s, ABI %u (header %d)\n", kiln_version(), kiln_abi_version(), KILN_ABI_VERSION);
    enum { M = 3, K = 4, N = 2 };
    float a[M * K], b[K * N], c[M * N], want[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 5) - 1.5f;
    for (int i = 0; i < K * N; i++) b[i] = 0.25f * (float)i - 1.0f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)a[i * K + k] * b[k * N + j];
            want[i * N + j] = (float)acc;
        }

    size_t sa[2] = {M, K}, sb[2] = {K, N};
    KilnTensor *ta = NULL, *tb = NULL, *tc = NULL;
    TRY(kiln_tensor_from_host(KILN_F32, sa, 2, a, sizeof a, &ta));
    TRY(kiln_tensor_from_host(KILN_F32, sb, 2, b, sizeof b, &tb));
    TRY(kiln_matmul(ta, tb, &tc));
    size_t shape[8] = {0}, ndim = 0;
    TRY(kiln_tensor_ndim(tc, &ndim));
    TRY(kiln_tensor_shape(tc, shape, 8));
    if (ndim != 2 || shape[0] != M || shape[1] != N) { fprintf(stderr, "example: bad matmul shape\n"); return 1; }
    TRY(kiln_tensor_to_host(tc, c, sizeof c));
    for (int i = 0; i < M * N; i++)
        if (fabsf(c[i] - want[i]) > 1e-4f) { fprintf(stderr, "example: matmul[%d] = %g, want %g\n", i, c[i], want[i]); return 1; }
    printf("matmul %dx%d * %dx%d: ok (c[0] = %g)\n", M, K, K, N, c[0]);

    /* Custom kernel: y = 2 * x + 0.5 over the matmul result. */
    KilnKernel *k = NULL;
    TRY(kiln_kernel_compile(DOUBLE_PLUS, "main", &k));
    KilnTensor *ty = NULL;
    size_t sy[1] = {M * N};
    TRY(kiln_tensor_empty(KILN_F32, sy, 1, &ty));
    struct { float offset; uint32_t n; } params = {0.5f, M * N};
    const KilnTensor *bound[2] = {tc, ty};
    TRY(kiln_kernel_dispatch(k, bound, 2, &params, sizeof params, 1, 1, 1));
    float y[M * N];
    TRY(kiln_tensor_to_host(ty, y, sizeof y));
    for (int i = 0; i < M * N; i++)
        if (fabsf(y[i] - (2 * want[i] + 0.5f)) > 1e-4f) { fprintf(stderr, "example: kernel[%d] = %g\n", i, y[i]); return 1; }
    printf("custom kernel: ok (y[0] = %g)\n", y[0]);

    /* A NULL argument: a status and a message, never a crash. */
    char msg[512];
    KilnTensor *bad = NULL;
    KilnStatus s = kiln_add(ta, NULL, &bad);
    kiln_last_error_message(msg, sizeof msg);
    printf("kiln_add(a, NULL): %s: %s\n", kiln_status_name(s), msg);
    if (s != KILN_ERR_NULL_POINTER || bad != NULL || strstr(msg, "b is NULL") == NULL) return 1;

    /* Invalid WGSL: KILN_ERR_SHADER with line:column. */
    KilnKernel *bk = NULL;
    s = kiln_kernel_compile("@compute @workgroup_size(1)\nfn main() {\n  let x: f32 = ;\n}\n", "main", &bk);
    kiln_last_error_message(msg, sizeof msg);
    printf("invalid WGSL: %s: %s\n", kiln_status_name(s), msg);
    if (s != KILN_ERR_SHADER || bk != NULL || strstr(msg, "3:") == NULL) return 1;

    kiln_kernel_free(k);
    kiln_tensor_free(ty);
    kiln_tensor_free(tc);
    kiln_tensor_free(tb);
    kiln_tensor_free(ta);
    printf("example: ok\n");
    return 0;
}
