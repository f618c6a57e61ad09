/* Must NOT compile (make c-compile-check): kiln_kernel_dispatch's _Generic takes tensor arrays
 * and NULL only, so passing one tensor where the array goes is still a compile error in C. */
#include "kiln.h"

KilnStatus kiln_dispatch_type_error(const KilnKernel *k, KilnTensor *t);
KilnStatus kiln_dispatch_type_error(const KilnKernel *k, KilnTensor *t) {
    return kiln_kernel_dispatch(k, t, 1, NULL, 0, 1, 1, 1);
}
