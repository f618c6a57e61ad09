/* Tensors on two devices through the C ABI: kiln_tensor_to_device / kiln_tensor_device, and an
 * op across devices refused with KILN_ERR_INVALID_ARGUMENT. Two adapters without a GPU: Mesa's
 * llvmpipe through Vulkan and through OpenGL (KILN_BACKENDS=vulkan,gl, set before Kiln's first
 * call). */
#define _POSIX_C_SOURCE 200809L
#include "kiln_test.h"

int main(void) {
    setenv("KILN_BACKENDS", "vulkan,gl", 1);
    size_t n = 0;
    OK(kiln_device_count(&n));
    if (n < 2) {
        fprintf(stderr, "FAIL: two adapters expected (llvmpipe through Vulkan and GL), found %zu\n", n);
        return 1;
    }
    const float x[4] = {1.5f, -2.0f, INFINITY, -0.0f};
    const size_t shape[1] = {4};
    KilnTensor *a = NULL, *b = NULL, *sum = NULL, *moved = NULL, *same = NULL;
    OK(kiln_tensor_from_host(KILN_F32, shape, 1, x, sizeof x, &a)); /* the chosen device: 0 */
    size_t da = 9, db = 9;
    OK(kiln_tensor_device(a, &da));
    OK(kiln_tensor_to_device(a, 1 - da, &b));
    OK(kiln_tensor_device(b, &db));
    if (db != 1 - da) KT_FAIL("moved to device %zu, wanted %zu", db, 1 - da);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "device", kiln_add(a, b, &sum));
    if (sum != NULL) KT_FAIL("an op across devices set *out");
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "out of range", kiln_tensor_to_device(a, n, &moved));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "x", kiln_tensor_to_device(NULL, 0, &moved));
    OK(kiln_tensor_to_device(b, da, &moved));
    OK(kiln_add(a, moved, &sum));
    float got[4];
    OK(kiln_tensor_to_host(sum, got, sizeof got));
    for (int i = 0; i < 4; i++)
        if (memcmp(&got[i], &(float){x[i] + x[i]}, sizeof(float)) != 0) KT_FAIL("element %d: %g", i, got[i]);
    OK(kiln_tensor_to_device(a, da, &same)); /* its own device: a new handle, same values */
    OK(kiln_tensor_to_host(same, got, sizeof got));
    if (memcmp(got, x, sizeof x) != 0) KT_FAIL("to its own device changed the values");
    kiln_tensor_free(a);
    kiln_tensor_free(b);
    kiln_tensor_free(sum);
    kiln_tensor_free(moved);
    kiln_tensor_free(same);
    if (kt_failures) return 1;
    printf("test_two_devices: ok\n");
    return 0;
}
