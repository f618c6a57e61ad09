/* kiln_kernel_dispatch takes its tensor array in every form C code writes one (issue 34):
 * `KilnTensor *bind[]` (what kiln_tensor_from_host hands out), `const KilnTensor *bind[]`,
 * arrays of const pointers, a malloc'ed `KilnTensor **`, and NULL for no tensors. Built with
 * -Wall -Wextra -Werror -pedantic -Werror=incompatible-pointer-types (make c-test), so a form
 * that needs a cast fails the build; each dispatch's result is checked against the host. */
#include "kiln_test.h"

static const char *AXPY = /* y[i] = a * x[i] + y[i] */
    "struct P { a: f32, n: u32 }\n"
    "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
    "@group(0) @binding(2) var<uniform> p: P;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
    "    if (id.x < p.n) { y[id.x] = p.a * x[id.x] + y[id.x]; }\n"
    "}\n";

static const char *NOTHING = "@compute @workgroup_size(1) fn main() {}\n";

enum { N = 100 };
static float x[N], y[N];

/* The host's y after one more axpy with `a`. */
static void host_axpy(float a) {
    for (int i = 0; i < N; i++) y[i] = a * x[i] + y[i];
}

int main(void) {
    for (int i = 0; i < N; i++) { x[i] = (float)(i % 7) - 3.0f; y[i] = 0.5f * (float)i; }
    size_t shape[1] = {N};
    KilnTensor *tx = kt_f32(x, shape, 1), *ty = kt_f32(y, shape, 1);
    KilnKernel *k = NULL;
    OK(kiln_kernel_compile(AXPY, "main", &k));
    struct { float a; uint32_t n; } p = {2.0f, N};
    unsigned groups = (N + 63) / 64;

    KilnTensor *plain[2] = {tx, ty}; /* the natural form: what kiln_tensor_from_host gave */
    OK(kiln_kernel_dispatch(k, plain, 2, &p, sizeof p, groups, 1, 1));
    host_axpy(p.a);

    const KilnTensor *consts[2] = {tx, ty};
    p.a = -1.5f;
    OK(kiln_kernel_dispatch(k, consts, 2, &p, sizeof p, groups, 1, 1));
    host_axpy(p.a);

    KilnTensor *const fixed[2] = {tx, ty};
    p.a = 0.25f;
    OK(kiln_kernel_dispatch(k, fixed, 2, &p, sizeof p, groups, 1, 1));
    host_axpy(p.a);

    const KilnTensor *const both[2] = {tx, ty};
    p.a = 3.0f;
    OK(kiln_kernel_dispatch(k, both, 2, &p, sizeof p, groups, 1, 1));
    host_axpy(p.a);

    KilnTensor **heap = malloc(2 * sizeof *heap);
    CHECK(heap != NULL);
    heap[0] = tx;
    heap[1] = ty;
    p.a = -0.5f;
    OK(kiln_kernel_dispatch(k, heap, 2, &p, sizeof p, groups, 1, 1));
    host_axpy(p.a);
    free(heap);

    /* The function itself, without the macro: the declared type, as C++ and FFI callers see it. */
    p.a = 1.0f;
    OK((kiln_kernel_dispatch)(k, both, 2, &p, sizeof p, groups, 1, 1));
    host_axpy(p.a);

    kt_expect_f32(ty, y, N, 1e-5f, 1e-6f, "y after six dispatches through six array forms");
    kt_expect_f32(tx, x, N, 0, 0, "x (read-only binding) unchanged");

    /* NULL for a kernel without bindings; NULL with a count is still refused. */
    KilnKernel *none = NULL;
    OK(kiln_kernel_compile(NOTHING, "main", &none));
    OK(kiln_kernel_dispatch(none, NULL, 0, NULL, 0, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "tensors is NULL", kiln_kernel_dispatch(k, NULL, 2, &p, sizeof p, 1, 1, 1));

    OK(kiln_kernel_free(none));
    OK(kiln_kernel_free(k));
    OK(kiln_tensor_free(tx));
    OK(kiln_tensor_free(ty));
    if (kt_failures) {
        fprintf(stderr, "test_dispatch_types: %d failures\n", kt_failures);
        return 1;
    }
    printf("test_dispatch_types: all array forms dispatch\n");
    return 0;
}
