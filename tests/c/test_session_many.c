/* 1000 sessions open at once across pthreads (issue 18): each over-quota request fails with
 * KILN_ERR_QUOTA_EXCEEDED, every sum is checked on the host, and no memory is left after all
 * close. Tiny tensors, so that it stays fast on lavapipe. */
/* pthread_barrier_t under -std=c11 */
#define _POSIX_C_SOURCE 200809L
#include "kiln_test.h"

#include <pthread.h>
#include <stdatomic.h>

#define THREADS 20
#define PER_THREAD 50 /* 1000 sessions open at the same time */
#define CLASS 64      /* 9 to 16 f32 take one 64-byte size class */

static atomic_int failures = 0;
static pthread_barrier_t barrier;

#define FAIL_IF(cond, ...) do { if (cond) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); atomic_fetch_add(&failures, 1); } } while (0)

struct held {
    KilnSession *s;
    KilnTensor *t[3]; /* a, b, a + b: the quota exactly */
};

static float rnd(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

/* Opens one session, fills its quota with a + b (checked), and is refused one more tensor. */
static void open_one(struct held *h, uint64_t *rng, int who) {
    KilnSessionLimits l = {0};
    l.max_bytes = 3 * CLASS;
    OK(kiln_session_create(&l, &h->s));
    OK(kiln_session_enter(h->s));
    size_t n = 9 + (size_t)(*rng % 8);
    size_t shape[1] = {n};
    float a[16], b[16], y[16];
    for (size_t i = 0; i < n; i++) { a[i] = rnd(rng); b[i] = rnd(rng); }
    OK(kiln_tensor_from_host(KILN_F32, shape, 1, a, n * sizeof(float), &h->t[0]));
    OK(kiln_tensor_from_host(KILN_F32, shape, 1, b, n * sizeof(float), &h->t[1]));
    OK(kiln_add(h->t[0], h->t[1], &h->t[2]));
    OK(kiln_tensor_to_host(h->t[2], y, n * sizeof(float)));
    for (size_t i = 0; i < n; i++) FAIL_IF(y[i] != a[i] + b[i], "session %d: y[%zu] = %g, want %g", who, i, y[i], a[i] + b[i]);
    KilnTensor *extra = NULL;
    size_t one[1] = {1};
    KilnStatus st = kiln_tensor_from_host(KILN_F32, one, 1, a, sizeof(float), &extra);
    FAIL_IF(st != KILN_ERR_QUOTA_EXCEEDED || extra != NULL, "session %d: over the quota gave %s", who, kiln_status_name(st));
    OK(kiln_session_exit());
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(t + 1) * 0x100000001B3ull;
    struct held *h = calloc(PER_THREAD, sizeof *h);
    for (int i = 0; i < PER_THREAD; i++) open_one(&h[i], &rng, t * PER_THREAD + i);
    pthread_barrier_wait(&barrier); /* every session is open and holds its tensors here */
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < PER_THREAD; i++) {
        KilnSessionStats st;
        OK(kiln_session_stats(h[i].s, &st));
        FAIL_IF(st.bytes_in_use != 3 * CLASS || st.quota_exceeded != 1 || st.live_buffers != 3,
                "session %d: %llu bytes, %llu quota errors", t * PER_THREAD + i,
                (unsigned long long)st.bytes_in_use, (unsigned long long)st.quota_exceeded);
        OK(kiln_session_close(h[i].s));
        OK(kiln_session_stats(h[i].s, &st));
        FAIL_IF(!st.closed || st.bytes_in_use != 0 || st.live_buffers != 0, "session %d: left after close",
                t * PER_THREAD + i);
        float y[16];
        KilnStatus s = kiln_tensor_to_host(h[i].t[2], y, sizeof(float));
        FAIL_IF(s != KILN_ERR_INVALID_ARGUMENT, "session %d: a closed session's tensor read gave %s",
                t * PER_THREAD + i, kiln_status_name(s));
        for (int k = 0; k < 3; k++) OK(kiln_tensor_free(h[i].t[k]));
        OK(kiln_session_free(h[i].s));
    }
    free(h);
    return NULL;
}

int main(void) {
    KilnMemoryStats before, held, after;
    OK(kiln_memory_stats(&before));
    pthread_barrier_init(&barrier, NULL, THREADS + 1);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    pthread_barrier_wait(&barrier);
    OK(kiln_memory_stats(&held));
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    OK(kiln_memory_stats(&after));
    FAIL_IF(held.in_use_bytes - before.in_use_bytes < (uint64_t)THREADS * PER_THREAD * 3 * CLASS,
            "only %llu bytes held with every session open", (unsigned long long)(held.in_use_bytes - before.in_use_bytes));
    FAIL_IF(after.in_use_bytes != before.in_use_bytes, "%llu bytes left after every session closed",
            (unsigned long long)(after.in_use_bytes - before.in_use_bytes));
    if (failures || kt_failures) {
        fprintf(stderr, "test_session_many: %d failure(s)\n", failures + kt_failures);
        return 1;
    }
    printf("test_session_many: %d sessions on %d threads: all passed\n", THREADS * PER_THREAD, THREADS);
    return 0;
}
