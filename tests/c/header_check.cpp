// Compile check: kiln.h as C++17 (-Wall -Wextra -Werror -pedantic). Not run.
#include "kiln.h"

#include <cstdint>
#include <type_traits>

static_assert(KILN_OK == 0 && KILN_ERR_PANIC == 12, "stable status values");
static_assert(KILN_F32 == 0 && KILN_U32 == 3 && KILN_BOOL == 4, "stable dtype values");
static_assert(std::is_same<std::underlying_type<KilnStatus>::type, uint32_t>::value, "KilnStatus is 32-bit");
static_assert(std::is_same<std::underlying_type<KilnDType>::type, uint32_t>::value, "KilnDType is 32-bit");

int kiln_header_check_cpp();
int kiln_header_check_cpp() {
    KilnTensor *t = nullptr;
    const size_t shape[2] = {2, 2};
    const float data[4] = {1, 2, 3, 4};
    KilnStatus s = kiln_tensor_from_host(KILN_F32, shape, 2, data, sizeof data, &t);
    KilnTensor *out = nullptr;
    if (s == KILN_OK) s = kiln_matmul(t, t, &out);
    // C++ converts both array forms to the declared `const KilnTensor *const *` by itself.
    KilnTensor *plain[1] = {t};
    const KilnTensor *consts[1] = {t};
    const KilnKernel *k = nullptr;
    (void)kiln_kernel_dispatch(k, plain, 1, nullptr, 0, 1, 1, 1);
    (void)kiln_kernel_dispatch(k, consts, 1, nullptr, 0, 1, 1, 1);
    kiln_tensor_free(out);
    kiln_tensor_free(t);
    char buf[64];
    (void)kiln_last_error_message(buf, sizeof buf);
    return static_cast<int>(s);
}
