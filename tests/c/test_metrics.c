/* Metrics and profiles over the C ABI: the Prometheus text, per-op profiles, and a session's
 * GPU-time budget. */
#include "kiln_test.h"

/* x + y (+ y ...) `adds` times, checked on the host; returns nothing, frees everything. */
static void run_adds(size_t n, int adds) {
    size_t shape[1] = {n};
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    kt_fill(a, n);
    kt_fill(b, n);
    KilnTensor *ta = kt_f32(a, shape, 1), *tb = kt_f32(b, shape, 1), *acc = NULL;
    OK(kiln_add(ta, tb, &acc));
    for (int i = 1; i < adds; i++) {
        KilnTensor *next = NULL;
        OK(kiln_add(acc, tb, &next));
        kiln_tensor_free(acc);
        acc = next;
    }
    OK(kiln_tensor_to_host(acc, y, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) {
        float want = a[i];
        for (int k = 0; k < adds; k++) want += b[i];
        if (y[i] != want) { KT_FAIL("sum[%zu] = %g, want %g", i, y[i], want); break; }
    }
    kiln_tensor_free(ta); kiln_tensor_free(tb); kiln_tensor_free(acc);
    free(a); free(b); free(y);
}

/* The value of the sample line starting with `prefix` in `text` (-1 when absent). */
static double sample(const char *text, const char *prefix) {
    const char *p = text;
    size_t len = strlen(prefix);
    while ((p = strstr(p, prefix)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[len] == ' ') return strtod(p + len + 1, NULL);
        p += len;
    }
    return -1.0;
}

static void test_metrics_text(void) {
    char *before = NULL, *after = NULL;
    run_adds(100, 1); /* the op exists from here on */
    OK(kiln_metrics_text(&before));
    run_adds(300, 4);
    OK(kiln_metrics_text(&after));
    const char *key = "kiln_op_dispatches_total{op=\"elementwise:add\"}";
    double d = sample(after, key) - sample(before, key);
    if (d != 4.0) KT_FAIL("elementwise:add dispatches moved by %g, want 4", d);
    if (!strstr(after, "# TYPE kiln_op_gpu_seconds histogram")) KT_FAIL("no GPU-time histogram in\n%s", after);
    if (!strstr(after, "# HELP kiln_errors_total ")) KT_FAIL("no errors family");
    OK(kiln_string_free(before));
    OK(kiln_string_free(after));
    OK(kiln_string_free(NULL));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "out", kiln_metrics_text(NULL));
}

static void test_profile(void) {
    KilnProfileSummary sum;
    KilnProfileRow *rows = (KilnProfileRow *)&sum; /* garbage: must come back NULL */
    char *text = (char *)&sum;
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "no profile", kiln_profile_stop(&sum, &rows, &text));
    if (rows != NULL || text != NULL) KT_FAIL("a failed stop leaves rows and text NULL");
    OK(kiln_profile_start());
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "already running", kiln_profile_start());
    run_adds(257, 3);
    OK(kiln_profile_stop(&sum, &rows, &text));
    int found = 0;
    double shares = 0;
    for (size_t i = 0; i < sum.n_rows; i++) {
        shares += rows[i].share;
        if (strcmp(rows[i].op, "elementwise:add") == 0) {
            found = 1;
            if (rows[i].calls != 3) KT_FAIL("add calls %llu, want 3", (unsigned long long)rows[i].calls);
            if (rows[i].timed != 3) KT_FAIL("add timed %llu, want 3", (unsigned long long)rows[i].timed);
        }
    }
    if (!found) KT_FAIL("no elementwise:add row in\n%s", text);
    if (sum.n_rows != 1) KT_FAIL("%zu rows, want 1:\n%s", sum.n_rows, text);
    if (sum.total_s <= 0 || fabs(shares - 1.0) > 1e-9) KT_FAIL("total %g, shares %g", sum.total_s, shares);
    if (!strstr(text, "elementwise:add") || !strstr(text, "calls")) KT_FAIL("table:\n%s", text);
    if (sum.clock != KILN_CLOCK_GPU_TIMESTAMPS && sum.clock != KILN_CLOCK_WALL) KT_FAIL("clock %u", sum.clock);
    if (sum.clock == KILN_CLOCK_WALL && !strstr(text, "WALL-CLOCK")) KT_FAIL("wall clock not labelled");
    OK(kiln_profile_rows_free(rows, sum.n_rows));
    OK(kiln_string_free(text));
    OK(kiln_profile_rows_free(NULL, 0));
    /* Text is optional; an empty profile has no rows. */
    OK(kiln_profile_start());
    OK(kiln_profile_stop(&sum, &rows, NULL));
    if (sum.n_rows != 0 || rows != NULL) KT_FAIL("empty profile: %zu rows", sum.n_rows);
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "summary", kiln_profile_stop(NULL, &rows, NULL));
}

static void test_gpu_budget(void) {
    KilnSessionLimits l = {0};
    l.max_gpu_time_ms = 2;
    KilnSession *s = NULL;
    OK(kiln_session_create(&l, &s));
    OK(kiln_session_enter(s));
    size_t n = 1 << 18, shape[1] = {n};
    float *a = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    kt_fill(a, n);
    KilnTensor *ta = kt_f32(a, shape, 1);
    KilnStatus st = KILN_OK;
    for (int i = 0; i < 5000 && st == KILN_OK; i++) {
        KilnTensor *t = NULL;
        st = kiln_mul(ta, ta, &t);
        if (st == KILN_OK) {
            OK(kiln_tensor_to_host(t, y, n * sizeof(float)));
            kiln_tensor_free(t);
        }
    }
    if (st != KILN_ERR_COMPUTE_LIMIT) KT_FAIL("budget never refused (%s)", kiln_status_name(st));
    else if (!strstr(kt_msg(), "GPU time")) KT_FAIL("message: %s", kt_msg());
    KilnSessionStats stats;
    OK(kiln_session_stats(s, &stats));
    if (stats.gpu_time_ns < 2000000) KT_FAIL("gpu_time_ns %llu", (unsigned long long)stats.gpu_time_ns);
    if (stats.bound_bytes == 0) KT_FAIL("no bound bytes");
    kiln_tensor_free(ta);
    OK(kiln_session_exit());
    OK(kiln_session_free(s));
    free(a); free(y);
}

int main(void) {
    test_metrics_text();
    test_profile();
    test_gpu_budget();
    if (kt_failures) { fprintf(stderr, "test_metrics: %d failure(s)\n", kt_failures); return 1; }
    printf("test_metrics: ok\n");
    return 0;
}
