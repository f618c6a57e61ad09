/*
 * A deliberately broken C binding, for `make conformance-break-check`: preloaded
 * (LD_PRELOAD) in front of libkiln, it replaces kiln_sub with one that passes its two
 * arguments to the real kiln_sub swapped. The conformance suite must fail and name the op
 * (`sub`) and the language (C).
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "kiln.h"

KilnStatus kiln_sub(const KilnTensor *a, const KilnTensor *b, KilnTensor **out) {
    KilnStatus (*real)(const KilnTensor *, const KilnTensor *, KilnTensor **);
    *(void **)&real = dlsym(RTLD_NEXT, "kiln_sub");
    return real(b, a, out); /* the bug: a and b swapped */
}
