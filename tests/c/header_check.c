/* Compile check: kiln.h as strict C11 (-Wall -Wextra -Werror -pedantic). Not run. */
#include "kiln.h"

#if KILN_ABI_VERSION < 1 || !defined(KILN_VERSION_MAJOR) || !defined(KILN_VERSION_MINOR) || !defined(KILN_VERSION_PATCH)
#error "version macros missing"
#endif

_Static_assert(KILN_OK == 0 && KILN_ERR_PANIC == 12 && KILN_ERR_INTERNAL == 13, "stable status values");
_Static_assert(KILN_F32 == 0 && KILN_F16 == 1 && KILN_I32 == 2 && KILN_U32 == 3 && KILN_BOOL == 4, "stable dtype values");
_Static_assert(sizeof(KilnStatus) == 4 && sizeof(KilnDType) == 4, "32-bit enums");

int kiln_header_check_c(void);
int kiln_header_check_c(void) {
    KilnTensor *t = NULL;
    KilnKernel *k = NULL;
    KilnMemoryStats m;
    KilnPipelineStats p;
    KilnDeviceInfo d;
    size_t shape[2] = {2, 2};
    float data[4] = {1, 2, 3, 4};
    KilnStatus s = kiln_tensor_from_host(KILN_F32, shape, 2, data, sizeof data, &t);
    (void)m; (void)p; (void)d; (void)k;
    /* A tensor array in each form C code writes one, without a cast (kiln.h's _Generic). */
    KilnTensor *plain[1] = {t};
    const KilnTensor *consts[1] = {t};
    KilnStatus g = kiln_kernel_dispatch(k, plain, 1, NULL, 0, 1, 1, 1);
    g += kiln_kernel_dispatch(k, consts, 1, NULL, 0, 1, 1, 1);
    g += kiln_kernel_dispatch(k, NULL, 0, NULL, 0, 1, 1, 1);
    (void)g;
    KilnStatus f = kiln_tensor_free(t); /* frees return a status (a bad handle is an error) */
    KilnStatus r = kiln_reset_devices();
    return (int)s + (int)f + (int)r;
}
