/* Kiln's hostile-input regression suite for C (issue 19): one test per finding that C can
 * reach, each re-running the original repro. Every test asserts the clear error status (and
 * a word of its message), then that the process is alive, that a tensor made at start-up and
 * never touched by the test still reads back its own values, and that a new op works.
 *
 *   test_hostile            run every test in order, in one process
 *   test_hostile NAME ...   run only the named tests (names as printed)
 *
 * Exit status 0 = pass. Built and run by `make c-test`, also under valgrind. */
#define _POSIX_C_SOURCE 200809L
#include "kiln_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

/* ---- the survivor: a tensor no test touches, checked after every test ----------------- */

enum { SURV_N = 37 };
static KilnTensor *survivor;
static float survivor_v[SURV_N];

static void make_survivor(void) {
    for (int i = 0; i < SURV_N; i++) survivor_v[i] = (float)i * 0.5f - 3.0f;
    size_t s[1] = {SURV_N};
    survivor = kt_f32(survivor_v, s, 1);
}

/* The process is alive (we are here), the survivor is intact, and a new op gives the right
 * values: survivor * 2 + 1. */
static void check_alive(const char *after) {
    char what[128];
    snprintf(what, sizeof what, "survivor after %s", after);
    kt_expect_f32(survivor, survivor_v, SURV_N, 0, 0, what);
    KilnTensor *m = NULL, *a = NULL;
    OK(kiln_mul_scalar(survivor, 2.0, &m));
    OK(kiln_add_scalar(m, 1.0, &a));
    float want[SURV_N];
    for (int i = 0; i < SURV_N; i++) want[i] = survivor_v[i] * 2 + 1;
    snprintf(what, sizeof what, "a new op after %s", after);
    kt_expect_f32(a, want, SURV_N, 0, 0, what);
    OK(kiln_tensor_free(a));
    OK(kiln_tensor_free(m));
}

static KilnTensor *f32_of(const float *v, size_t n) {
    size_t s[1] = {n};
    return kt_f32(v, s, 1);
}

static const char *INC = /* a[i] += 1 for i < arrayLength(&a) */
    "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
    "    if (id.x < arrayLength(&a)) { a[id.x] = a[id.x] + 1.0; }\n"
    "}\n";

/* ---- item 5: handles that cannot be confused ---------------------------------------------- */

static void test_double_free(void) {
    float v[3] = {1, 2, 3};
    KilnTensor *t = f32_of(v, 3);
    OK(kiln_tensor_free(t));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_tensor_free(t));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_tensor_free", kiln_tensor_free(t));
    KilnKernel *k = NULL;
    OK(kiln_kernel_compile(INC, "main", &k));
    OK(kiln_kernel_free(k));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_kernel_free(k));
    /* NULL stays a no-op, as documented */
    CHECK(kiln_tensor_free(NULL) == KILN_OK);
    CHECK(kiln_kernel_free(NULL) == KILN_OK);
}

static void test_use_after_free(void) {
    float v[4] = {1, 2, 3, 4}, buf[4] = {-9, -9, -9, -9};
    KilnTensor *t = f32_of(v, 4), *o = (KilnTensor *)survivor;
    OK(kiln_tensor_free(t));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "t (0x", kiln_tensor_to_host(t, buf, sizeof buf));
    CHECK(buf[0] == -9 && buf[3] == -9); /* nothing was written */
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_add(survivor, t, &o));
    CHECK(o == NULL);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_exp(t, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_fill(t, 1.0));
    size_t nd = 99;
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_tensor_ndim(t, &nd));
    CHECK(nd == 99);
    const KilnTensor *list[2] = {survivor, t};
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "tensors[1]", kiln_concat(list, 2, 0, &o));
    /* an optional argument is checked as well */
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "weight", kiln_rms_norm(survivor, t, 1e-5f, &o));
}

/* A stale pointer must not read whatever tensor was created after it was freed. */
static void test_stale_pointer(void) {
    for (int round = 0; round < 20; round++) {
        float a[8], b[8], got[8];
        for (int i = 0; i < 8; i++) { a[i] = (float)(round * 100 + i); b[i] = -a[i] - 1; }
        KilnTensor *ta = f32_of(a, 8);
        OK(kiln_tensor_free(ta));
        KilnTensor *tb = f32_of(b, 8); /* often reuses ta's memory in a malloc'ed design */
        memset(got, 0, sizeof got);
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_tensor_to_host(ta, got, sizeof got));
        CHECK(got[0] == 0 && got[7] == 0);
        CHECK(ta != tb);
        kt_expect_f32(tb, b, 8, 0, 0, "the newer tensor");
        OK(kiln_tensor_free(tb));
    }
}

static void test_foreign_pointers(void) {
    float v[2] = {5, 6};
    KilnTensor *o = NULL;
    int on_stack = 42;
    unsigned char *junk = malloc(256);
    for (int i = 0; i < 256; i++) junk[i] = (unsigned char)(i * 37 + 11);
    KilnTensor *good = f32_of(v, 2);
    uintptr_t g = (uintptr_t)good;
    KilnTensor *bogus[] = {
        (KilnTensor *)(void *)&on_stack,           /* a stack variable */
        (KilnTensor *)(void *)junk,                /* heap memory with random bytes */
        (KilnTensor *)(uintptr_t)0xdeadbeefull,    /* random, unmapped memory */
        (KilnTensor *)(uintptr_t)1,                /* small integer */
        (KilnTensor *)(uintptr_t)UINTPTR_MAX,      /* all ones */
        (KilnTensor *)(g + 8), (KilnTensor *)(g - 8), (KilnTensor *)(g + 1), /* handle arithmetic */
        (KilnTensor *)(uintptr_t)&kiln_version,    /* a function */
    };
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        float buf[2] = {0, 0};
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "not a tensor handle", kiln_tensor_to_host(bogus[i], buf, sizeof buf));
        CHECK(buf[0] == 0 && buf[1] == 0);
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "not a tensor handle", kiln_neg(bogus[i], &o));
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "not a tensor handle", kiln_tensor_free(bogus[i]));
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "not a kernel handle",
                   kiln_kernel_free((KilnKernel *)(void *)bogus[i]));
    }
    CHECK(on_stack == 42);
    for (int i = 0; i < 256; i++)
        if (junk[i] != (unsigned char)(i * 37 + 11)) { KT_FAIL("junk[%d] was changed", i); break; }
    free(junk);
    /* a kernel passed as a tensor, a tensor as a kernel */
    KilnKernel *k = NULL;
    OK(kiln_kernel_compile(INC, "main", &k));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a tensor handle: it has the form of a KilnKernel",
               kiln_tensor_free((KilnTensor *)(void *)k));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a kernel handle: it has the form of a KilnTensor",
               kiln_kernel_free((KilnKernel *)(void *)good));
    const KilnTensor *as_tensor[1] = {(const KilnTensor *)(const void *)k};
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "tensors[0]", kiln_kernel_dispatch(k, as_tensor, 1, NULL, 0, 1, 1, 1));
    const KilnTensor *bind[1] = {good};
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kernel", kiln_kernel_dispatch((const KilnKernel *)(const void *)good, bind, 1, NULL, 0, 1, 1, 1));
    /* both still work after all that */
    OK(kiln_kernel_dispatch(k, bind, 1, NULL, 0, 1, 1, 1));
    float want[2] = {6, 7};
    kt_expect_f32(good, want, 2, 0, 0, "the good tensor after foreign pointers");
    OK(kiln_kernel_free(k));
    OK(kiln_tensor_free(good));
}

static void test_freed_kernel_dispatch(void) {
    float v[3] = {1, 2, 3};
    KilnTensor *t = f32_of(v, 3);
    KilnKernel *k = NULL;
    OK(kiln_kernel_compile(INC, "main", &k));
    const KilnTensor *bind[1] = {t};
    OK(kiln_kernel_dispatch(k, bind, 1, NULL, 0, 1, 1, 1));
    OK(kiln_kernel_free(k));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_kernel_dispatch(k, bind, 1, NULL, 0, 1, 1, 1));
    /* a new kernel compiled after the free does not answer to the old handle */
    KilnKernel *k2 = NULL;
    OK(kiln_kernel_compile(INC, "main", &k2));
    CHECK(k2 != k);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_kernel_dispatch(k, bind, 1, NULL, 0, 1, 1, 1));
    float want[3] = {2, 3, 4}; /* one dispatch ran, not two or three */
    kt_expect_f32(t, want, 3, 0, 0, "tensor after a freed kernel's dispatch");
    OK(kiln_kernel_free(k2));
    OK(kiln_tensor_free(t));
}

/* Freeing a tensor while other threads read it: every read either succeeds with the right
 * values (it held the tensor for its call) or fails with INVALID_ARGUMENT after the free;
 * nothing crashes, nothing reads other data. Then several threads free one handle at once:
 * exactly one succeeds. */
enum { READERS = 4, RN = 64 };
static KilnTensor *shared_t;
static float shared_v[RN];
static atomic_int reads_ok[READERS];
static atomic_int start_free_race;

typedef struct { int id; int wrong; int invalid; int other; } Reader;

static void *reader(void *arg) {
    Reader *r = (Reader *)arg;
    for (int it = 0; it < 100000; it++) {
        float got[RN];
        KilnTensor *d = NULL;
        KilnStatus s = (it & 1) ? kiln_tensor_to_host(shared_t, got, sizeof got) : kiln_mul_scalar(shared_t, 2.0, &d);
        if (s == KILN_OK && d) {
            s = kiln_tensor_to_host(d, got, sizeof got);
            kiln_tensor_free(d);
            for (int i = 0; i < RN; i++) got[i] /= 2;
            if (s != KILN_OK) { r->other++; fprintf(stderr, "reader %d: readback of a result: %s\n", r->id, kt_msg()); break; }
        }
        if (s == KILN_OK) {
            if (memcmp(got, shared_v, sizeof got) != 0) { r->wrong++; break; }
            atomic_fetch_add(&reads_ok[r->id], 1);
        } else if (s == KILN_ERR_INVALID_ARGUMENT && strstr(kt_msg(), "already freed")) {
            r->invalid++;
            break;
        } else {
            r->other++;
            fprintf(stderr, "reader %d: %s: %s\n", r->id, kiln_status_name(s), kt_msg());
            break;
        }
    }
    return NULL;
}

typedef struct { KilnTensor *t; KilnStatus s; } Freer;

static void *freer(void *arg) {
    Freer *f = (Freer *)arg;
    while (!atomic_load(&start_free_race)) { /* spin until every thread is ready */ }
    f->s = kiln_tensor_free(f->t);
    return NULL;
}

static void test_free_during_read(void) {
    for (int i = 0; i < RN; i++) shared_v[i] = (float)(i * 3 - 50);
    shared_t = f32_of(shared_v, RN);
    pthread_t th[READERS];
    Reader rs[READERS];
    for (int i = 0; i < READERS; i++) {
        rs[i] = (Reader){i, 0, 0, 0};
        atomic_store(&reads_ok[i], 0);
        if (pthread_create(&th[i], NULL, reader, &rs[i]) != 0) { KT_FAIL("pthread_create"); exit(1); }
    }
    /* free while every reader is known to be reading */
    for (int i = 0; i < READERS; i++)
        while (atomic_load(&reads_ok[i]) < 3) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    OK(kiln_tensor_free(shared_t));
    int total = 0;
    for (int i = 0; i < READERS; i++) {
        pthread_join(th[i], NULL);
        total += atomic_load(&reads_ok[i]);
        if (rs[i].wrong) KT_FAIL("reader %d read wrong data", i);
        if (rs[i].other) KT_FAIL("reader %d got an unexpected error", i);
        if (rs[i].invalid != 1) KT_FAIL("reader %d never saw the free (INVALID_ARGUMENT)", i);
    }
    CHECK(total >= 3 * READERS);

    /* racing frees of one handle: exactly one wins */
    for (int round = 0; round < 5; round++) {
        KilnTensor *t = f32_of(shared_v, RN);
        Freer fs[READERS];
        atomic_store(&start_free_race, 0);
        for (int i = 0; i < READERS; i++) {
            fs[i] = (Freer){t, KILN_ERR_INTERNAL};
            if (pthread_create(&th[i], NULL, freer, &fs[i]) != 0) { KT_FAIL("pthread_create"); exit(1); }
        }
        atomic_store(&start_free_race, 1);
        int ok = 0, invalid = 0;
        for (int i = 0; i < READERS; i++) {
            pthread_join(th[i], NULL);
            ok += fs[i].s == KILN_OK;
            invalid += fs[i].s == KILN_ERR_INVALID_ARGUMENT;
        }
        if (ok != 1 || invalid != READERS - 1) KT_FAIL("racing frees: %d OK and %d INVALID_ARGUMENT, want 1 and %d", ok, invalid, READERS - 1);
    }
}

/* Freeing a kernel while other threads dispatch it: each dispatch that returned OK ran
 * exactly once (a thread's own tensor counts them), the ones after the free are refused. */
enum { DISPATCHERS = 3 };
static KilnKernel *shared_k;
static atomic_int dispatched[DISPATCHERS];

typedef struct { int id; int invalid; int other; float value; } Dispatcher;

static void *dispatcher(void *arg) {
    Dispatcher *d = (Dispatcher *)arg;
    float zero[2] = {0, 0};
    KilnTensor *t = f32_of(zero, 2);
    const KilnTensor *bind[1] = {t};
    for (int it = 0; it < 100000; it++) {
        KilnStatus s = kiln_kernel_dispatch(shared_k, bind, 1, NULL, 0, 1, 1, 1);
        if (s == KILN_OK) {
            atomic_fetch_add(&dispatched[d->id], 1);
        } else if (s == KILN_ERR_INVALID_ARGUMENT && strstr(kt_msg(), "already freed")) {
            d->invalid++;
            break;
        } else {
            d->other++;
            fprintf(stderr, "dispatcher %d: %s: %s\n", d->id, kiln_status_name(s), kt_msg());
            break;
        }
    }
    float got[2] = {-1, -1};
    if (kiln_tensor_to_host(t, got, sizeof got) != KILN_OK) d->other++;
    d->value = got[0];
    if (got[1] != got[0]) d->other++;
    kiln_tensor_free(t);
    return NULL;
}

static void test_free_kernel_during_dispatch(void) {
    OK(kiln_kernel_compile(INC, "main", &shared_k));
    pthread_t th[DISPATCHERS];
    Dispatcher ds[DISPATCHERS];
    for (int i = 0; i < DISPATCHERS; i++) {
        ds[i] = (Dispatcher){i, 0, 0, -1};
        atomic_store(&dispatched[i], 0);
        if (pthread_create(&th[i], NULL, dispatcher, &ds[i]) != 0) { KT_FAIL("pthread_create"); exit(1); }
    }
    for (int i = 0; i < DISPATCHERS; i++)
        while (atomic_load(&dispatched[i]) < 2) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    OK(kiln_kernel_free(shared_k));
    for (int i = 0; i < DISPATCHERS; i++) {
        pthread_join(th[i], NULL);
        int n = atomic_load(&dispatched[i]);
        if (ds[i].other) KT_FAIL("dispatcher %d: an unexpected error", i);
        if (ds[i].invalid != 1) KT_FAIL("dispatcher %d never saw the free (INVALID_ARGUMENT)", i);
        if (ds[i].value != (float)n) KT_FAIL("dispatcher %d: %d dispatches returned OK but its tensor counts %g", i, n, ds[i].value);
    }
}

/* kiln_reset_devices: old tensors answer DEVICE_LOST (and can still be freed), new work runs
 * on a fresh device. The survivor is re-made afterwards. */
static void test_reset_devices(void) {
    float v[3] = {1, 2, 3}, buf[3];
    KilnTensor *old = f32_of(v, 3);
    OK(kiln_reset_devices());
    EXPECT_ERR(KILN_ERR_DEVICE_LOST, "kiln_tensor_to_host: ", kiln_tensor_to_host(old, buf, sizeof buf));
    OK(kiln_tensor_free(old));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already freed", kiln_tensor_free(old));
    OK(kiln_tensor_free(survivor));
    make_survivor();
    KilnTensor *fresh = f32_of(v, 3);
    kt_expect_f32(fresh, v, 3, 0, 0, "a tensor on the fresh device");
    OK(kiln_tensor_free(fresh));
    OK(kiln_reset_devices()); /* twice in a row is fine */
    OK(kiln_tensor_free(survivor));
    make_survivor();
}

/* ---- item 11: scalars for integer tensors ------------------------------------------------ */

static void test_integer_scalars(void) {
    int32_t iv[4] = {-3, 0, 7, 2147483647};
    size_t s4[1] = {4};
    KilnTensor *ti = kt_i32(iv, s4, 1), *o = NULL;
    const double bad[] = {NAN, 1.5, 1e30, 1099511627776.0 /* 2^40 */, -2147483649.0, 2147483648.0, INFINITY, -0.5};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = (KilnTensor *)survivor;
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a i32 value", kiln_add_scalar(ti, bad[i], &o));
        CHECK(o == NULL);
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a i32 value", kiln_mul_scalar(ti, bad[i], &o));
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a i32 value", kiln_binary_scalar("sub", ti, bad[i], true, &o));
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a i32 value", kiln_lt_scalar(ti, bad[i], &o));
        EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a i32 value", kiln_fill(ti, bad[i]));
    }
    kt_expect_u32(ti, (const uint32_t *)(const void *)iv, 4, "the i32 tensor after rejected scalars");
    /* whole in-range values still work: -3 + 5, 0 + 5, 7 + 5; and the extremes are accepted */
    int32_t small[3] = {-3, 0, 7}, want[3] = {2, 5, 12};
    size_t s3[1] = {3};
    KilnTensor *ts = kt_i32(small, s3, 1);
    OK(kiln_add_scalar(ts, 5.0, &o));
    kt_expect_u32(o, (const uint32_t *)(const void *)want, 3, "i32 + 5");
    OK(kiln_tensor_free(o));
    OK(kiln_maximum_scalar(ts, -2147483648.0, &o));
    kt_expect_u32(o, (const uint32_t *)(const void *)small, 3, "maximum(i32, INT32_MIN)");
    OK(kiln_tensor_free(o));
    /* u32: negative, fractional, 2^32 */
    size_t s2[1] = {2};
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a u32 value", kiln_full(s2, 1, KILN_U32, -5.0, &o));
    CHECK(o == NULL);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a u32 value", kiln_full(s2, 1, KILN_U32, 4294967296.0, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a u32 value", kiln_full(s2, 1, KILN_U32, 0.25, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a i32 value", kiln_full(s2, 1, KILN_I32, NAN, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a i32 value", kiln_arange(0, 3, 0.5, KILN_I32, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a u32 value", kiln_arange(-1, 3, 1, KILN_U32, &o));
    OK(kiln_full(s2, 1, KILN_U32, 4294967295.0, &o));
    uint32_t umax[2] = {4294967295u, 4294967295u};
    kt_expect_u32(o, umax, 2, "full(u32, 2^32 - 1)");
    KilnTensor *o2 = (KilnTensor *)survivor;
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a u32 value", kiln_add_scalar(o, -1.0, &o2));
    CHECK(o2 == NULL);
    kt_expect_u32(o, umax, 2, "the u32 tensor after a rejected scalar");
    OK(kiln_tensor_free(o));
    /* float tensors still take any double */
    float fv[2] = {1, 2};
    KilnTensor *tf = f32_of(fv, 2);
    OK(kiln_add_scalar(tf, 1.5, &o));
    float fw[2] = {2.5f, 3.5f};
    kt_expect_f32(o, fw, 2, 0, 0, "f32 + 1.5");
    OK(kiln_tensor_free(o));
    OK(kiln_tensor_free(tf));
    OK(kiln_tensor_free(ts));
    OK(kiln_tensor_free(ti));
}

/* ---- item 9: size arithmetic ------------------------------------------------------------- */

/* Frees a tensor an op should not have made (so a failing test does not also leak). */
#define DROP(t) do { if (t) { kiln_tensor_free(t); (t) = NULL; } } while (0)

static const size_t HUGE_PAD = (size_t)1 << (sizeof(size_t) * 8 - 1); /* 2^63 on 64-bit */

/* conv2d(ones(1,1,2,2), ones(1,1,1,1), padding=2^63) returned a (1,1,2,2) result. */
static void test_conv2d_huge_padding(void) {
    size_t sx[4] = {1, 1, 2, 2}, sw[4] = {1, 1, 1, 1};
    KilnTensor *x = NULL, *w = NULL, *o = NULL;
    OK(kiln_ones(sx, 4, KILN_F32, &x));
    OK(kiln_ones(sw, 4, KILN_F32, &w));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_conv2d: ", kiln_conv2d(x, w, NULL, 1, 1, HUGE_PAD, HUGE_PAD, 1, 1, 1, &o));
    CHECK(o == NULL);
    DROP(o);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_conv2d: ", kiln_conv2d(x, w, NULL, 1, 1, HUGE_PAD, 0, 1, 1, 1, &o));
    DROP(o);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_conv2d: ", kiln_conv2d(x, w, NULL, HUGE_PAD, 1, SIZE_MAX / 2, 0, 1, 1, 1, &o));
    DROP(o);
    /* the inputs are intact and a sane conv still works: 1x1 kernel of ones, padding 1 */
    OK(kiln_conv2d(x, w, NULL, 1, 1, 1, 1, 1, 1, 1, &o));
    size_t s44[4] = {1, 1, 4, 4};
    kt_expect_shape(o, s44, 4, "conv2d padding 1");
    float want[16] = {0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    kt_expect_f32(o, want, 16, 0, 0, "conv2d padding 1");
    OK(kiln_tensor_free(o));
    OK(kiln_tensor_free(w));
    OK(kiln_tensor_free(x));
}

static void test_max_pool2d_huge_padding(void) {
    size_t sx[4] = {1, 1, 2, 2};
    KilnTensor *x = NULL, *o = NULL;
    float xv[4] = {1, 4, 2, 3};
    OK(kiln_tensor_from_host(KILN_F32, sx, 4, xv, sizeof xv, &x));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_max_pool2d: ", kiln_max_pool2d(x, 1, 1, 1, 1, HUGE_PAD, HUGE_PAD, &o));
    CHECK(o == NULL);
    DROP(o);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_avg_pool2d: ", kiln_avg_pool2d(x, 1, 1, 1, 1, HUGE_PAD, HUGE_PAD, &o));
    DROP(o);
    OK(kiln_max_pool2d(x, 2, 2, 1, 1, 0, 0, &o));
    float want[1] = {4};
    kt_expect_f32(o, want, 1, 0, 0, "max_pool2d 2x2");
    OK(kiln_tensor_free(o));
    kt_expect_f32(x, xv, 4, 0, 0, "pool input intact");
    OK(kiln_tensor_free(x));
}

/* Zero-size tensors may have huge other dimensions; concatenating two [0, 2^63] along axis
 * 1 made [0, 0] (2^64 wrapped). It must be an error, wherever it is caught. */
static void test_zero_size_concat_overflow(void) {
    size_t s[2] = {0, HUGE_PAD};
    KilnTensor *a = NULL, *o = NULL;
#if SIZE_MAX > 0xFFFFFFFFu
    /* a zero-size shape whose other dimensions multiply past 2^64 (its strides would) */
    size_t wide[3] = {0, (size_t)1 << 40, (size_t)1 << 40};
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_tensor_empty: ", kiln_tensor_empty(KILN_F32, wide, 3, &o));
    DROP(o);
#endif
    KilnStatus st = kiln_tensor_empty(KILN_F32, s, 2, &a);
    if (st != KILN_OK) {
        /* rejected at creation: that closes the finding too, if it is a clear error */
        if (st != KILN_ERR_INVALID_ARGUMENT) KT_FAIL("empty([0, 2^63]) -> %s: %s", kiln_status_name(st), kt_msg());
        return;
    }
    const KilnTensor *two[2] = {a, a};
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "kiln_concat: ", kiln_concat(two, 2, 1, &o));
    if (o) {
        size_t shape[8] = {0};
        kiln_tensor_shape(o, shape, 8);
        KT_FAIL("concat of two [0, 2^63] gave a tensor of shape [%zu, %zu]", shape[0], shape[1]);
        kiln_tensor_free(o);
    }
    /* along axis 0 the sizes add to 0 and the result is [0, 2^63]: not an overflow */
    o = NULL;
    st = kiln_concat(two, 2, 0, &o);
    if (st == KILN_OK) {
        size_t shape[8] = {0};
        OK(kiln_tensor_shape(o, shape, 8));
        CHECK(shape[0] == 0 && shape[1] == HUGE_PAD);
        OK(kiln_tensor_free(o));
    } else if (st != KILN_ERR_INVALID_ARGUMENT) {
        KT_FAIL("concat axis 0 -> %s: %s", kiln_status_name(st), kt_msg());
    }
    OK(kiln_tensor_free(a));
}

/* ---- item 8: more than 2^32 workgroups in total ----------------------------------------- */

static void test_dispatch_over_2_32_groups(void) {
    float v[3] = {1, 2, 3};
    KilnTensor *t = f32_of(v, 3);
    KilnKernel *k = NULL;
    OK(kiln_kernel_compile(INC, "main", &k));
    const KilnTensor *bind[1] = {t};
    /* 4096 * 4096 * 257 = 4,311,744,512 > 2^32; each dimension alone is within the limit */
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "workgroup", kiln_kernel_dispatch(k, bind, 1, NULL, 0, 4096, 4096, 257));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "workgroup", kiln_kernel_dispatch(k, bind, 1, NULL, 0, 65536, 65536, 1));
    OK(kiln_kernel_dispatch(k, bind, 1, NULL, 0, 1, 1, 1));
    float want[3] = {2, 3, 4};
    kt_expect_f32(t, want, 3, 0, 0, "tensor after a rejected dispatch");
    OK(kiln_kernel_free(k));
    OK(kiln_tensor_free(t));
}

/* ---- items 1 and 2: kernels that took the process down ---------------------------------- */

/* o[0] = i[0] + i[0] + ... (terms times), as a flat expression. */
static char *flat_kernel(int terms) {
    const char *head = "@group(0) @binding(0) var<storage, read> i: array<f32>;\n"
                       "@group(0) @binding(1) var<storage, read_write> o: array<f32>;\n"
                       "@compute @workgroup_size(1)\nfn main() {\n    o[0] = i[0]";
    const char *tail = ";\n}\n";
    size_t n = strlen(head) + (size_t)terms * 7 + strlen(tail) + 1;
    char *src = malloc(n), *p = src;
    p += sprintf(p, "%s", head);
    for (int t = 1; t < terms; t++) p += sprintf(p, " + i[0]");
    sprintf(p, "%s", tail);
    return src;
}

static void test_flat_expression_20000(void) {
    char *src = flat_kernel(20000);
    KilnKernel *k = (KilnKernel *)survivor;
    EXPECT_ERR(KILN_ERR_SHADER, "kiln_kernel_compile: ", kiln_kernel_compile(src, "main", &k));
    CHECK(k == NULL);
    if (k) kiln_kernel_free(k);
    free(src);
}

/* o[0] = ((((i[0])))) with `depth` pairs of parentheses: the most recursion per source byte. */
static char *nested_kernel(int depth) {
    const char *head = "@group(0) @binding(0) var<storage, read> i: array<f32>;\n"
                       "@group(0) @binding(1) var<storage, read_write> o: array<f32>;\n"
                       "@compute @workgroup_size(1)\nfn main() {\n    o[0] = ";
    const char *tail = ";\n}\n";
    size_t n = strlen(head) + (size_t)depth * 2 + 4 + strlen(tail) + 1;
    char *src = malloc(n), *p = src;
    p += sprintf(p, "%s", head);
    for (int d = 0; d < depth; d++) *p++ = '(';
    p += sprintf(p, "i[0]");
    for (int d = 0; d < depth; d++) *p++ = ')';
    sprintf(p, "%s", tail);
    return src;
}

/* The Elixir finding: a caller with a small stack (the BEAM's dirty schedulers) died at ~600
 * terms. From a thread with a 256 KiB stack, 2,000 terms must either compile and compute
 * 2,000 or be refused with KILN_ERR_SHADER. */
typedef struct { char *src; float input; KilnStatus s; float result; char msg[256]; } SmallStack;

/* Compiles r->src, runs it on i = [r->input], o = [0] and reads o[0] back into r->result. */
static void *small_stack_compile(void *arg) {
    SmallStack *r = (SmallStack *)arg;
    KilnKernel *k = NULL;
    r->s = kiln_kernel_compile(r->src, "main", &k);
    r->result = -1;
    if (r->s != KILN_OK) { kiln_last_error_message(r->msg, sizeof r->msg); return NULL; }
    float one = r->input, zero = 0;
    size_t s1[1] = {1};
    KilnTensor *ti = NULL, *to = NULL;
    if (kiln_tensor_from_host(KILN_F32, s1, 1, &one, sizeof one, &ti) == KILN_OK &&
        kiln_tensor_from_host(KILN_F32, s1, 1, &zero, sizeof zero, &to) == KILN_OK) {
        const KilnTensor *bind[2] = {ti, to};
        r->s = kiln_kernel_dispatch(k, bind, 2, NULL, 0, 1, 1, 1);
        if (r->s == KILN_OK) r->s = kiln_tensor_to_host(to, &r->result, sizeof r->result);
        if (r->s != KILN_OK) kiln_last_error_message(r->msg, sizeof r->msg);
    }
    kiln_tensor_free(to);
    kiln_tensor_free(ti);
    kiln_kernel_free(k);
    return NULL;
}

/* Runs `src` from a thread with a 256 KiB stack: it must compile and compute `want`, or be
 * refused with KILN_ERR_SHADER; anything else (a crash above all) fails. */
static void on_small_stack(char *src, float input, float want, const char *what) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t th;
    SmallStack r = {src, input, KILN_ERR_INTERNAL, 0, {0}};
    if (pthread_create(&th, &attr, small_stack_compile, &r) != 0) { KT_FAIL("pthread_create"); exit(1); }
    pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    free(src);
    printf("(%s) ", r.s == KILN_OK ? "compiled" : r.s == KILN_ERR_SHADER ? "refused: SHADER" : "?");
    if (r.s == KILN_OK) {
        if (r.result != want) KT_FAIL("%s computed %g, want %g", what, r.result, want);
    } else if (r.s != KILN_ERR_SHADER) {
        KT_FAIL("%s on a small stack -> %s: %s", what, kiln_status_name(r.s), r.msg);
    }
}

static void test_flat_expression_small_stack(void) {
    on_small_stack(flat_kernel(2000), 1.0f, 2000.0f, "a 2,000-term flat expression");
}

/* 25,000 nested parentheses: about 50 KB, under the 64 KiB source limit kiln-core is getting,
 * and far past what a 256 KiB stack holds if naga recursed on it. */
static void test_nested_parentheses_small_stack(void) {
    on_small_stack(nested_kernel(25000), 7.0f, 7.0f, "25,000 nested parentheses");
}

/* A 64 MiB var<workgroup> array (the limit is 16 to 32 KiB) must be refused before the
 * driver sees it. */
static void test_huge_workgroup_array(void) {
    const char *src =
        "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n"
        "var<workgroup> big: array<f32, 16777216>;\n"
        "@compute @workgroup_size(64)\n"
        "fn main(@builtin(local_invocation_index) l: u32) {\n"
        "    big[l * 262144u] = f32(l);\n"
        "    workgroupBarrier();\n"
        "    if (l == 0u) { o[0] = big[262144u]; }\n"
        "}\n";
    KilnKernel *k = (KilnKernel *)survivor;
    EXPECT_ERR(KILN_ERR_SHADER, "workgroup", kiln_kernel_compile(src, "main", &k));
    CHECK(k == NULL);
    if (k) kiln_kernel_free(k);
}

/* ---------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    /* Tests whose fix lies in kiln-core come after the ones the C boundary fixes itself, and
     * the two that used to crash the process come last, so a regression there still lets
     * the others report. */
    struct { const char *name; void (*fn)(void); } tests[] = {
        {"double_free", test_double_free},
        {"use_after_free", test_use_after_free},
        {"stale_pointer", test_stale_pointer},
        {"foreign_pointers", test_foreign_pointers},
        {"freed_kernel_dispatch", test_freed_kernel_dispatch},
        {"free_during_read", test_free_during_read},
        {"free_kernel_during_dispatch", test_free_kernel_during_dispatch},
        {"reset_devices", test_reset_devices},
        {"integer_scalars", test_integer_scalars},
        {"conv2d_huge_padding", test_conv2d_huge_padding},
        {"max_pool2d_huge_padding", test_max_pool2d_huge_padding},
        {"zero_size_concat_overflow", test_zero_size_concat_overflow},
        {"dispatch_over_2_32_groups", test_dispatch_over_2_32_groups},
        {"flat_expression_small_stack", test_flat_expression_small_stack},
        {"nested_parentheses_small_stack", test_nested_parentheses_small_stack},
        {"flat_expression_20000", test_flat_expression_20000},
        {"huge_workgroup_array", test_huge_workgroup_array},
    };
    const size_t ntests = sizeof tests / sizeof tests[0];
    for (int a = 1; a < argc; a++) {
        int known = 0;
        for (size_t i = 0; i < ntests; i++) known |= strcmp(argv[a], tests[i].name) == 0;
        if (!known) {
            fprintf(stderr, "test_hostile: unknown test %s; the tests are:\n", argv[a]);
            for (size_t i = 0; i < ntests; i++) fprintf(stderr, "  %s\n", tests[i].name);
            return 2;
        }
    }
    make_survivor();
    check_alive("start-up");
    int failed = 0;
    for (size_t i = 0; i < ntests; i++) {
        int selected = argc == 1;
        for (int a = 1; a < argc; a++) selected |= strcmp(argv[a], tests[i].name) == 0;
        if (!selected) continue;
        printf("%-31s ", tests[i].name);
        fflush(stdout);
        int before = kt_failures;
        tests[i].fn();
        check_alive(tests[i].name);
        int ok = kt_failures == before;
        failed += !ok;
        printf("%s\n", ok ? "ok" : "FAILED");
        fflush(stdout);
    }
    OK(kiln_tensor_free(survivor));
    /* Handles live in a table, so a tensor the library forgot to release would not show up
     * as a leak under valgrind: count the device's live tensor buffers instead. Every test
     * freed what it made, so none is left once queued work has finished. */
    KilnMemoryStats m;
    OK(kiln_synchronize());
    OK(kiln_memory_stats(&m));
    if (m.live_buffers != 0) KT_FAIL("%llu tensor buffers still live at the end", (unsigned long long)m.live_buffers);
    if (kt_failures) {
        fprintf(stderr, "test_hostile: %d test(s) failed, %d failure(s)\n", failed, kt_failures);
        return 1;
    }
    printf("test_hostile: all passed\n");
    return 0;
}
