/* Kiln from many threads at once: 12 threads, each with its own tensors, running ops, a
 * shared custom kernel and a shared read-only tensor, and checking that the last error
 * message is per thread. Exit status 0 = pass. */
#include "kiln_test.h"

#include <pthread.h>

enum { THREADS = 12, ITERS = 6, M = 6, K = 5, N = 4 };

static KilnKernel *scale_kernel;
static KilnTensor *shared_b; /* [K, N], read by every thread */
static float shared_bv[K * N];

static const char *SCALE = /* y[i] = x[i] * p.s */
    "struct P { s: f32, n: u32 }\n"
    "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<f32>;\n"
    "@group(0) @binding(2) var<uniform> p: P;\n"
    "@compute @workgroup_size(32)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>) { if (id.x < p.n) { y[id.x] = x[id.x] * p.s; } }\n";

typedef struct { int id; int failures; } Job;

#define TFAIL(...) do { fprintf(stderr, "thread %d: ", job->id); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); job->failures++; } while (0)
#define TOK(call) do { KilnStatus s_ = (call); if (s_ != KILN_OK) { char m_[512]; kiln_last_error_message(m_, sizeof m_); \
    TFAIL("%s -> %s: %s", #call, kiln_status_name(s_), m_); goto done; } } while (0)

static void *worker(void *arg) {
    Job *job = (Job *)arg;
    uint64_t st = 0x1234567ull * (uint64_t)(job->id + 1);
    for (int it = 0; it < ITERS; it++) {
        float a[M * K], c[M * N], want[M * N], y[M * N];
        for (int i = 0; i < M * K; i++) { st = st * 6364136223846793005ull + 1442695040888963407ull; a[i] = (float)((st >> 41) % 200) / 100.0f - 1.0f; }
        double total = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = 0;
                for (int k = 0; k < K; k++) acc += (double)a[i * K + k] * shared_bv[k * N + j];
                want[i * N + j] = (float)acc + (float)job->id;
                total += want[i * N + j];
            }
        KilnTensor *ta = NULL, *tc = NULL, *td = NULL, *ts = NULL, *ty = NULL;
        size_t sa[2] = {M, K}, sy[1] = {M * N};
        TOK(kiln_tensor_from_host(KILN_F32, sa, 2, a, sizeof a, &ta));
        TOK(kiln_matmul(ta, shared_b, &tc));
        TOK(kiln_add_scalar(tc, (double)job->id, &td));
        TOK(kiln_sum(td, NULL, 0, false, &ts));
        TOK(kiln_tensor_empty(KILN_F32, sy, 1, &ty));
        struct { float s; uint32_t n; } p = {-2.0f, M * N};
        const KilnTensor *bind[2] = {td, ty};
        TOK(kiln_kernel_dispatch(scale_kernel, bind, 2, &p, sizeof p, 1, 1, 1));
        TOK(kiln_tensor_to_host(td, c, sizeof c));
        TOK(kiln_tensor_to_host(ty, y, sizeof y));
        for (int i = 0; i < M * N; i++) {
            if (fabsf(c[i] - want[i]) > 1e-4f) { TFAIL("iter %d: c[%d] = %g, want %g", it, i, c[i], want[i]); break; }
            if (fabsf(y[i] + 2 * want[i]) > 2e-4f) { TFAIL("iter %d: y[%d] = %g, want %g", it, i, y[i], -2 * want[i]); break; }
        }
        float sum = 0;
        TOK(kiln_tensor_to_host(ts, &sum, sizeof sum));
        if (fabs(sum - total) > 1e-3 * (1 + fabs(total))) TFAIL("iter %d: sum %g, want %g", it, sum, total);

        /* an error whose message names this thread's shape: the message must be ours */
        size_t bad[1] = {(size_t)(100 + job->id)};
        KilnTensor *o = NULL, *tb = NULL;
        float z[1] = {0};
        size_t one[1] = {1};
        TOK(kiln_tensor_from_host(KILN_F32, one, 1, z, sizeof z, &tb));
        KilnStatus s = kiln_tensor_from_host(KILN_F32, bad, 1, z, sizeof z, &o);
        char msg[512], needle[64];
        kiln_last_error_message(msg, sizeof msg);
        snprintf(needle, sizeof needle, "[%d]", 100 + job->id);
        if (s != KILN_ERR_INVALID_ARGUMENT || o != NULL || strstr(msg, needle) == NULL)
            TFAIL("error message not thread-local: %s (%s)", msg, kiln_status_name(s));
        kiln_tensor_free(tb);
    done:
        kiln_tensor_free(ty);
        kiln_tensor_free(ts);
        kiln_tensor_free(td);
        kiln_tensor_free(tc);
        kiln_tensor_free(ta);
        if (job->failures) break;
    }
    return NULL;
}

int main(void) {
    for (int i = 0; i < K * N; i++) shared_bv[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
    size_t sb[2] = {K, N};
    OK(kiln_tensor_from_host(KILN_F32, sb, 2, shared_bv, sizeof shared_bv, &shared_b));
    OK(kiln_kernel_compile(SCALE, "main", &scale_kernel));
    pthread_t th[THREADS];
    Job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i].id = i;
        jobs[i].failures = 0;
        if (pthread_create(&th[i], NULL, worker, &jobs[i]) != 0) { fprintf(stderr, "pthread_create failed\n"); return 1; }
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        failures += jobs[i].failures;
    }
    OK(kiln_synchronize());
    kiln_kernel_free(scale_kernel);
    kiln_tensor_free(shared_b);
    if (failures) { fprintf(stderr, "test_threads: %d failure(s)\n", failures); return 1; }
    printf("test_threads: %d threads x %d iterations: all passed\n", THREADS, ITERS);
    return 0;
}
