/* Sessions over the C ABI: quotas, closing, loop budgets, the shader policy, the audit log,
 * and sessions on many threads. */
#include "kiln_test.h"

#include <pthread.h>

static const char *SPIN_KERNEL =
    "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
    "@compute @workgroup_size(1) fn main() { loop { x[0] = x[0] + 1.0; } }";

static const char *ATOMIC_KERNEL =
    "@group(0) @binding(0) var<storage, read_write> c: atomic<u32>;\n"
    "@compute @workgroup_size(1) fn main() { atomicAdd(&c, 1u); }";

/* a + b checked on the host. */
static void check_add(size_t n) {
    size_t shape[1] = {n};
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    kt_fill(a, n);
    kt_fill(b, n);
    KilnTensor *ta = kt_f32(a, shape, 1), *tb = kt_f32(b, shape, 1), *ty = NULL;
    OK(kiln_add(ta, tb, &ty));
    OK(kiln_tensor_to_host(ty, y, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) {
        if (y[i] != a[i] + b[i]) { KT_FAIL("add[%zu] = %g, want %g", i, y[i], a[i] + b[i]); break; }
    }
    kiln_tensor_free(ta); kiln_tensor_free(tb); kiln_tensor_free(ty);
    free(a); free(b); free(y);
}

static void test_quota_and_close(void) {
    KilnSessionLimits l = {0};
    l.max_bytes = 3 * 4096;
    KilnSession *s = NULL;
    OK(kiln_session_create(&l, &s));
    OK(kiln_session_enter(s));
    float ones[1024];
    for (int i = 0; i < 1024; i++) ones[i] = 1.0f;
    size_t shape[1] = {1024};
    KilnTensor *t[3];
    for (int i = 0; i < 3; i++) t[i] = kt_f32(ones, shape, 1);
    KilnTensor *extra = NULL;
    EXPECT_ERR(KILN_ERR_QUOTA_EXCEEDED, "quota", kiln_tensor_from_host(KILN_F32, shape, 1, ones, sizeof ones, &extra));
    CHECK(extra == NULL);
    /* The refused allocation disturbed nothing. */
    float back[1024];
    OK(kiln_tensor_to_host(t[0], back, sizeof back));
    CHECK(back[1023] == 1.0f);
    KilnSessionStats st;
    OK(kiln_session_stats(s, &st));
    CHECK(st.bytes_in_use == 3 * 4096 && st.quota_exceeded == 1 && st.live_buffers == 3);
    OK(kiln_tensor_free(t[2]));
    check_add(13); /* fits again */
    OK(kiln_session_exit());

    /* Close: the session's tensors become invalid, never a crash; freeing them is fine. */
    OK(kiln_session_close(s));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "closed", kiln_tensor_to_host(t[0], back, sizeof back));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "closed", kiln_tensor_check(t[1]));
    KilnTensor *y = NULL;
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "closed", kiln_add(t[0], t[1], &y));
    OK(kiln_session_stats(s, &st));
    CHECK(st.closed && st.bytes_in_use == 0 && st.live_buffers == 0);
    OK(kiln_tensor_free(t[0]));
    OK(kiln_tensor_free(t[1]));
    OK(kiln_session_free(s));
    /* The default session is unaffected. */
    check_add(1031);
}

static void test_loop_budget_and_policy(void) {
    KilnSessionLimits l = {0};
    l.max_loop_iterations = 1000;
    l.forbid = KILN_FORBID_ATOMICS;
    KilnSession *s = NULL;
    OK(kiln_session_create(&l, &s));
    OK(kiln_session_enter(s));
    KilnKernel *k = NULL;
    OK(kiln_kernel_compile(SPIN_KERNEL, "main", &k));
    float zeros[4] = {0};
    size_t shape[1] = {4};
    KilnTensor *x = kt_f32(zeros, shape, 1);
    const KilnTensor *args[1] = {x};
    OK(kiln_kernel_dispatch(k, args, 1, NULL, 0, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_COMPUTE_LIMIT, "loop budget", kiln_tensor_check(x));
    float back[4];
    EXPECT_ERR(KILN_ERR_COMPUTE_LIMIT, "loop budget", kiln_tensor_to_host(x, back, sizeof back));
    KilnKernel *bad = NULL;
    EXPECT_ERR(KILN_ERR_SHADER, "1:", kiln_kernel_compile(ATOMIC_KERNEL, "main", &bad));
    CHECK(bad == NULL);
    KilnSessionStats st;
    OK(kiln_session_stats(s, &st));
    CHECK(st.compute_limit_hits == 1 && st.policy_rejections == 1 && st.kernels_compiled == 1);
    OK(kiln_session_exit());
    /* The device carries on. */
    check_add(257);
    OK(kiln_kernel_free(k));
    OK(kiln_tensor_free(x));
    OK(kiln_session_free(s));
    /* Unknown policy bits are refused; a tensor is not a session. */
    l.forbid = 1u << 20;
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "KILN_FORBID", kiln_session_create(&l, &s));
    KilnTensor *t = kt_f32(zeros, shape, 1);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "KilnTensor", kiln_session_enter((const KilnSession *)t));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "session", kiln_session_close(NULL));
    kiln_tensor_free(t);
}

static int audit_events = 0, audit_opened = 0;
static void on_audit(const char *event, void *user) {
    (void)user;
    __atomic_add_fetch(&audit_events, 1, __ATOMIC_SEQ_CST);
    if (strstr(event, "\"session_opened\"")) __atomic_add_fetch(&audit_opened, 1, __ATOMIC_SEQ_CST);
}

static void test_audit(void) {
    OK(kiln_audit_to_callback(on_audit, NULL));
    KilnSession *s = NULL;
    OK(kiln_session_create(NULL, &s));
    OK(kiln_session_free(s));
    OK(kiln_audit_off());
    OK(kiln_session_create(NULL, &s));
    OK(kiln_session_free(s));
    CHECK(audit_opened == 1 && audit_events == 2);
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "callback", kiln_audit_to_callback(NULL, NULL));
}

static void *session_thread(void *arg) {
    (void)arg;
    KilnSessionLimits l = {0};
    l.max_bytes = 2 * 1024;
    KilnSession *s = NULL;
    OK(kiln_session_create(&l, &s));
    OK(kiln_session_enter(s));
    float v[200];
    for (int i = 0; i < 200; i++) v[i] = (float)i;
    size_t shape[1] = {200};
    KilnTensor *a = kt_f32(v, shape, 1), *y = NULL;
    OK(kiln_add(a, a, &y));
    float back[200];
    OK(kiln_tensor_to_host(y, back, sizeof back));
    for (int i = 0; i < 200; i++) if (back[i] != 2.0f * (float)i) { KT_FAIL("thread add[%d]", i); break; }
    KilnTensor *over = NULL;
    EXPECT_ERR(KILN_ERR_QUOTA_EXCEEDED, "quota", kiln_add(a, y, &over));
    OK(kiln_session_exit());
    OK(kiln_session_free(s)); /* frees a and y */
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "closed", kiln_tensor_to_host(y, back, sizeof back));
    kiln_tensor_free(a);
    kiln_tensor_free(y);
    return NULL;
}

static void test_threads(void) {
    pthread_t th[16];
    for (int i = 0; i < 16; i++) pthread_create(&th[i], NULL, session_thread, NULL);
    for (int i = 0; i < 16; i++) pthread_join(th[i], NULL);
}

int main(void) {
    test_quota_and_close();
    test_loop_budget_and_policy();
    test_audit();
    test_threads();
    if (kt_failures) {
        fprintf(stderr, "test_session: %d failure(s)\n", kt_failures);
        return 1;
    }
    printf("test_session: ok\n");
    return 0;
}
