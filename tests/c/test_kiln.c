/* Kiln's C test: every op group against values computed here, custom kernels, devices and
 * stats, and errors and misuse (each with its status and message). Exit status 0 = pass.
 * Built against the installed kiln.h / libkiln (make c-test), also run under valgrind. */
#include "kiln_test.h"

/* Every tensor a test creates is tracked and freed at the end of its group. */
static KilnTensor *tracked[512];
static size_t ntracked = 0;
static KilnTensor *T(KilnTensor *t) {
    if (ntracked == sizeof tracked / sizeof tracked[0]) { fprintf(stderr, "too many tensors\n"); exit(1); }
    tracked[ntracked++] = t;
    return t;
}
static void free_all(void) {
    while (ntracked) kiln_tensor_free(tracked[--ntracked]);
}
static KilnTensor *F(const float *data, const size_t *shape, size_t ndim) { return T(kt_f32(data, shape, ndim)); }
static KilnTensor *I(const int32_t *data, const size_t *shape, size_t ndim) { return T(kt_i32(data, shape, ndim)); }
#define OUT(call_with_out) (OK_EXPR(call_with_out), T(o_))

static double sigmoid(double x) { return 1 / (1 + exp(-x)); }

/* ------------------------------------------------------------------------------------------ */
static void test_elementwise(void) {
    enum { R = 3, C = 5 };
    float a[R * C], b[C], w[R * C];
    kt_fill(a, R * C);
    kt_fill(b, C);
    b[2] = 0.75f; /* no zero divisors */
    for (int i = 0; i < C; i++) if (fabsf(b[i]) < 0.1f) b[i] = 0.3f;
    size_t sa[2] = {R, C}, sb[1] = {C};
    KilnTensor *ta = F(a, sa, 2), *tb = F(b, sb, 1), *o_ = NULL;

    struct { const char *name; KilnStatus (*fn)(const KilnTensor *, const KilnTensor *, KilnTensor **); } bins[] = {
        {"add", kiln_add}, {"sub", kiln_sub}, {"mul", kiln_mul}, {"div", kiln_div},
        {"maximum", kiln_maximum}, {"minimum", kiln_minimum}};
    for (size_t f = 0; f < sizeof bins / sizeof bins[0]; f++) {
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                float x = a[i * C + j], y = b[j];
                float v = f == 0 ? x + y : f == 1 ? x - y : f == 2 ? x * y : f == 3 ? x / y : f == 4 ? fmaxf(x, y) : fminf(x, y);
                w[i * C + j] = v;
            }
        KilnTensor *t = OUT(bins[f].fn(ta, tb, &o_));
        kt_expect_shape(t, sa, 2, bins[f].name);
        kt_expect_f32(t, w, R * C, 1e-6f, 1e-6f, bins[f].name);
        /* the same through kiln_binary by name */
        KilnTensor *t2 = OUT(kiln_binary(bins[f].name, ta, tb, &o_));
        kt_expect_f32(t2, w, R * C, 1e-6f, 1e-6f, "kiln_binary");
    }
    /* [3,1] + [1,5] broadcasts to [3,5] */
    float col[R] = {1, 2, 3}, row[C] = {10, 20, 30, 40, 50};
    size_t scol[2] = {R, 1}, srow[2] = {1, C};
    KilnTensor *t = OUT(kiln_add(F(col, scol, 2), F(row, srow, 2), &o_));
    for (int i = 0; i < R; i++) for (int j = 0; j < C; j++) w[i * C + j] = col[i] + row[j];
    kt_expect_shape(t, sa, 2, "broadcast add");
    kt_expect_f32(t, w, R * C, 0, 0, "broadcast add");

    /* pow on positive bases */
    float pa[6] = {0.5f, 1, 2, 3, 4, 9}, pb[6] = {2, 3, 0.5f, -1, 1.5f, 0.5f}, pw[6];
    for (int i = 0; i < 6; i++) pw[i] = powf(pa[i], pb[i]);
    size_t s6[1] = {6};
    kt_expect_f32(OUT(kiln_pow(F(pa, s6, 1), F(pb, s6, 1), &o_)), pw, 6, 1e-5f, 1e-5f, "pow");

    /* scalar forms */
    for (int i = 0; i < R * C; i++) w[i] = a[i] * 2.5f;
    kt_expect_f32(OUT(kiln_mul_scalar(ta, 2.5, &o_)), w, R * C, 1e-6f, 1e-6f, "mul_scalar");
    for (int i = 0; i < R * C; i++) w[i] = a[i] - 1.0f;
    kt_expect_f32(OUT(kiln_sub_scalar(ta, 1.0, &o_)), w, R * C, 1e-6f, 1e-6f, "sub_scalar");
    for (int i = 0; i < R * C; i++) w[i] = 1.0f - a[i];
    kt_expect_f32(OUT(kiln_binary_scalar("sub", ta, 1.0, true, &o_)), w, R * C, 1e-6f, 1e-6f, "scalar_first sub");
    for (int i = 0; i < R * C; i++) w[i] = fmaxf(a[i], 0.25f);
    kt_expect_f32(OUT(kiln_maximum_scalar(ta, 0.25, &o_)), w, R * C, 0, 0, "maximum_scalar");
    for (int i = 0; i < 6; i++) pw[i] = pa[i] * pa[i];
    kt_expect_f32(OUT(kiln_pow_scalar(F(pa, s6, 1), 2.0, &o_)), pw, 6, 1e-5f, 1e-5f, "pow_scalar");
    {
        float dw[R * C], mw[R * C], aw[R * C];
        for (int i = 0; i < R * C; i++) { dw[i] = a[i] / 4.0f; mw[i] = fminf(a[i], -0.25f); aw[i] = a[i] + 3.0f; }
        kt_expect_f32(OUT(kiln_div_scalar(ta, 4.0, &o_)), dw, R * C, 1e-6f, 1e-6f, "div_scalar");
        kt_expect_f32(OUT(kiln_minimum_scalar(ta, -0.25, &o_)), mw, R * C, 0, 0, "minimum_scalar");
        kt_expect_f32(OUT(kiln_add_scalar(ta, 3.0, &o_)), aw, R * C, 1e-6f, 1e-6f, "add_scalar");
    }

    /* unary ops */
    enum { U = 37 };
    float x[U], pos[U], uw[U];
    for (int i = 0; i < U; i++) { x[i] = 3 * kt_rand(); pos[i] = 0.1f + 2 * fabsf(kt_rand()); }
    size_t su[1] = {U};
    KilnTensor *tx = F(x, su, 1), *tp = F(pos, su, 1);
    struct { const char *name; KilnStatus (*fn)(const KilnTensor *, KilnTensor **); int positive; } un[] = {
        {"neg", kiln_neg, 0}, {"abs", kiln_abs, 0}, {"exp", kiln_exp, 0}, {"log", kiln_log, 1},
        {"sqrt", kiln_sqrt, 1}, {"rsqrt", kiln_rsqrt, 1}, {"sin", kiln_sin, 0}, {"cos", kiln_cos, 0},
        {"tanh", kiln_tanh, 0}, {"sigmoid", kiln_sigmoid, 0}, {"relu", kiln_relu, 0}, {"gelu", kiln_gelu, 0},
        {"gelu_tanh", kiln_gelu_tanh, 0}, {"silu", kiln_silu, 0}};
    for (size_t f = 0; f < sizeof un / sizeof un[0]; f++) {
        const float *in = un[f].positive ? pos : x;
        for (int i = 0; i < U; i++) {
            double v = in[i], r;
            switch (f) {
            case 0: r = -v; break;
            case 1: r = fabs(v); break;
            case 2: r = exp(v); break;
            case 3: r = log(v); break;
            case 4: r = sqrt(v); break;
            case 5: r = 1 / sqrt(v); break;
            case 6: r = sin(v); break;
            case 7: r = cos(v); break;
            case 8: r = tanh(v); break;
            case 9: r = sigmoid(v); break;
            case 10: r = v > 0 ? v : 0; break;
            case 11: r = 0.5 * v * (1 + erf(v / sqrt(2.0))); break;
            case 12: r = 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v))); break;
            default: r = v * sigmoid(v); break;
            }
            uw[i] = (float)r;
        }
        KilnTensor *in_t = un[f].positive ? tp : tx;
        kt_expect_f32(OUT(un[f].fn(in_t, &o_)), uw, U, 2e-5f, 2e-5f, un[f].name);
        kt_expect_f32(OUT(kiln_unary(un[f].name, in_t, &o_)), uw, U, 2e-5f, 2e-5f, "kiln_unary");
    }

    /* comparisons give bool (one byte an element on the host) */
    uint32_t cw[R * C];
    struct { KilnStatus (*fn)(const KilnTensor *, const KilnTensor *, KilnTensor **); KilnStatus (*sfn)(const KilnTensor *, double, KilnTensor **); } cmps[] = {
        {kiln_eq, kiln_eq_scalar}, {kiln_ne, kiln_ne_scalar}, {kiln_lt, kiln_lt_scalar},
        {kiln_le, kiln_le_scalar}, {kiln_gt, kiln_gt_scalar}, {kiln_ge, kiln_ge_scalar}};
    float bb[C];
    memcpy(bb, b, sizeof bb);
    bb[1] = a[1]; /* one exact tie */
    KilnTensor *tbb = F(bb, sb, 1);
    for (int f = 0; f < 6; f++) {
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++) {
                float p = a[i * C + j], q = bb[j];
                cw[i * C + j] = f == 0 ? p == q : f == 1 ? p != q : f == 2 ? p < q : f == 3 ? p <= q : f == 4 ? p > q : p >= q;
            }
        kt_expect_bool(OUT(cmps[f].fn(ta, tbb, &o_)), cw, R * C, "compare");
        for (int i = 0; i < R * C; i++) {
            float p = a[i], q = a[3];
            cw[i] = f == 0 ? p == q : f == 1 ? p != q : f == 2 ? p < q : f == 3 ? p <= q : f == 4 ? p > q : p >= q;
        }
        kt_expect_bool(OUT(cmps[f].sfn(ta, (double)a[3], &o_)), cw, R * C, "compare_scalar");
    }

    /* where(cond [3,1], a [3,5], b [5]) */
    uint32_t cond[R] = {1, 0, 7};
    KilnTensor *tc = NULL;
    OK(kiln_tensor_from_host(KILN_U32, scol, 2, cond, sizeof cond, &tc));
    T(tc);
    for (int i = 0; i < R; i++) for (int j = 0; j < C; j++) w[i * C + j] = cond[i] ? a[i * C + j] : b[j];
    kt_expect_f32(OUT(kiln_where(tc, ta, tb, &o_)), w, R * C, 0, 0, "where");

    /* cast: float -> int truncates toward zero, saturating as WGSL does (to the largest i32
     * that an f32 holds exactly, 2^31 - 128) */
    float cf[5] = {-2.7f, -0.5f, 0.5f, 2.9f, 3e9f};
    uint32_t ci[5] = {(uint32_t)-2, 0, 0, 2, 2147483520u};
    size_t s5[1] = {5};
    KilnTensor *tci = OUT(kiln_cast(F(cf, s5, 1), KILN_I32, &o_));
    KilnDType dt = 99;
    OK(kiln_tensor_dtype(tci, &dt));
    CHECK(dt == KILN_I32);
    kt_expect_u32(tci, ci, 5, "cast f32->i32");
    int32_t iv[3] = {-3, 0, 41};
    float fv[3] = {-3, 0, 41};
    size_t s3[1] = {3};
    kt_expect_f32(OUT(kiln_cast(I(iv, s3, 1), KILN_F32, &o_)), fv, 3, 0, 0, "cast i32->f32");

    /* bool: one byte an element on the host, any nonzero byte true */
    uint8_t hb[5] = {0, 1, 2, 255, 0}, hc[5] = {1, 1, 0, 9, 0};
    uint32_t bw[5];
    KilnTensor *tb5 = NULL, *tc5 = NULL;
    OK(kiln_tensor_from_host(KILN_BOOL, s5, 1, hb, sizeof hb, &tb5));
    T(tb5);
    OK(kiln_tensor_from_host(KILN_BOOL, s5, 1, hc, sizeof hc, &tc5));
    T(tc5);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "bytes given", kiln_tensor_from_host(KILN_BOOL, s5, 1, hb, 4, &o_));
    for (int i = 0; i < 5; i++) bw[i] = hb[i] != 0;
    kt_expect_bool(tb5, bw, 5, "bool upload");
    for (int i = 0; i < 5; i++) bw[i] = (hb[i] != 0) && (hc[i] != 0);
    kt_expect_bool(OUT(kiln_logical_and(tb5, tc5, &o_)), bw, 5, "logical_and");
    for (int i = 0; i < 5; i++) bw[i] = (hb[i] != 0) != (hc[i] != 0);
    kt_expect_bool(OUT(kiln_logical_xor(tb5, tc5, &o_)), bw, 5, "logical_xor");
    for (int i = 0; i < 5; i++) bw[i] = hb[i] == 0;
    kt_expect_bool(OUT(kiln_logical_not(tb5, &o_)), bw, 5, "logical_not");
    uint32_t one = 1, zero = 0;
    kt_expect_bool(OUT(kiln_any(tb5, NULL, 0, false, &o_)), &one, 1, "any");
    kt_expect_bool(OUT(kiln_all(tb5, NULL, 0, false, &o_)), &zero, 1, "all");
    float nanv[5] = {NAN, -0.0f, INFINITY, 1.0f, -NAN};
    uint32_t isn[5] = {1, 0, 0, 0, 1}, sgn[5] = {0, 1, 0, 0, 1}, tru[5] = {1, 0, 1, 1, 1};
    KilnTensor *tn = F(nanv, s5, 1);
    kt_expect_bool(OUT(kiln_isnan(tn, &o_)), isn, 5, "isnan");
    kt_expect_bool(OUT(kiln_signbit(tn, &o_)), sgn, 5, "signbit");
    kt_expect_bool(OUT(kiln_cast(tn, KILN_BOOL, &o_)), tru, 5, "cast f32->bool");
    float fb[5] = {0, 1, 1, 1, 0};
    kt_expect_f32(OUT(kiln_cast(tb5, KILN_F32, &o_)), fb, 5, 0, 0, "cast bool->f32");
    float wb[5];
    for (int i = 0; i < 5; i++) wb[i] = hb[i] ? nanv[i] : 7.0f;
    size_t s1[1] = {1};
    KilnTensor *t7 = OUT(kiln_full(s1, 1, KILN_F32, 7.0, &o_));
    kt_expect_f32(OUT(kiln_where(tb5, tn, t7, &o_)), wb, 5, 0, 0, "where(bool)");
    EXPECT_ERR(KILN_ERR_DTYPE_MISMATCH, "not defined on bool", kiln_add(tb5, tc5, &o_));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "is not a bool value", kiln_full(s5, 1, KILN_BOOL, 2.0, &o_));

    /* integer arithmetic */
    int32_t ia[4] = {7, -7, 9, 100}, ib[4] = {2, 2, -4, 7};
    /* floor division, numpy's //: -7 div 2 = -4, 9 div -4 = -3 */
    uint32_t iw[4] = {3, (uint32_t)-4, (uint32_t)-3, 14};
    size_t s4[1] = {4};
    kt_expect_u32(OUT(kiln_div(I(ia, s4, 1), I(ib, s4, 1), &o_)), iw, 4, "i32 div");
    free_all();
}

static void test_creation(void) {
    KilnTensor *o_ = NULL;
    size_t s23[2] = {2, 3};
    uint32_t sevens[6] = {7, 7, 7, 7, 7, 7};
    kt_expect_u32(OUT(kiln_full(s23, 2, KILN_I32, 7.0, &o_)), sevens, 6, "full");
    float z[6] = {0}, one[6] = {1, 1, 1, 1, 1, 1};
    kt_expect_f32(OUT(kiln_zeros(s23, 2, KILN_F32, &o_)), z, 6, 0, 0, "zeros");
    KilnTensor *t = OUT(kiln_ones(s23, 2, KILN_F32, &o_));
    kt_expect_f32(t, one, 6, 0, 0, "ones");
    KilnTensor *c = OUT(kiln_copy(t, &o_));
    OK(kiln_fill(t, -2.5));
    float m25[6] = {-2.5f, -2.5f, -2.5f, -2.5f, -2.5f, -2.5f};
    kt_expect_f32(t, m25, 6, 0, 0, "fill");
    kt_expect_f32(c, one, 6, 0, 0, "copy is independent");
    float ar[10];
    for (int i = 0; i < 10; i++) ar[i] = 0.5f * (float)i;
    KilnTensor *a = OUT(kiln_arange(0, 5, 0.5, KILN_F32, &o_));
    size_t s10[1] = {10};
    kt_expect_shape(a, s10, 1, "arange");
    kt_expect_f32(a, ar, 10, 1e-6f, 0, "arange");
    uint32_t ai[4] = {10, 7, 4, 1};
    kt_expect_u32(OUT(kiln_arange(10, 0, -3, KILN_I32, &o_)), ai, 4, "arange i32");
    /* scalar (rank 0) and empty tensors */
    float s = 4.25f;
    KilnTensor *ts = F(&s, NULL, 0);
    size_t nd = 9;
    OK(kiln_tensor_ndim(ts, &nd));
    CHECK(nd == 0);
    CHECK(kt_numel(ts) == 1);
    kt_expect_f32(ts, &s, 1, 0, 0, "scalar");
    size_t s0[2] = {3, 0};
    KilnTensor *te = NULL;
    OK(kiln_tensor_from_host(KILN_F32, s0, 2, NULL, 0, &te));
    T(te);
    CHECK(kt_numel(te) == 0);
    KilnTensor *te2 = OUT(kiln_exp(te, &o_));
    kt_expect_shape(te2, s0, 2, "empty exp");
    OK(kiln_tensor_to_host(te2, NULL, 0));
    size_t sz = 0;
    OK(kiln_dtype_size(KILN_F16, &sz));
    CHECK(sz == 2);
    KilnTensor *emp = OUT(kiln_tensor_empty(KILN_U32, s23, 2, &o_));
    OK(kiln_tensor_nbytes(emp, &sz));
    CHECK(sz == 24);
    free_all();
}

static void test_f16(void) {
    KilnDeviceInfo info;
    size_t count = 0, chosen = 0;
    OK(kiln_device_count(&count));
    for (size_t i = 0; i < count; i++) {
        OK(kiln_device_info(i, &info));
        if (info.chosen) chosen = i;
    }
    OK(kiln_device_info(chosen, &info));
    uint16_t h[4] = {0x3C00, 0x4000, 0x3800, 0xBC00}; /* 1, 2, 0.5, -1 */
    size_t s4[1] = {4};
    KilnTensor *t = NULL;
    KilnStatus s = kiln_tensor_from_host(KILN_F16, s4, 1, h, sizeof h, &t);
    if (!info.shader_f16) {
        if (s == KILN_OK) {
            KilnTensor *o = NULL;
            KilnStatus s2 = kiln_add(t, t, &o);
            CHECK(s2 == KILN_ERR_UNSUPPORTED || s2 == KILN_OK);
            kiln_tensor_free(o);
        }
        kiln_tensor_free(t);
        printf("  (f16: the adapter has no SHADER_F16; checked that it is refused cleanly)\n");
        return;
    }
    OK(s);
    KilnTensor *o = NULL;
    OK(kiln_add(t, t, &o));
    uint16_t got[4];
    OK(kiln_tensor_to_host(o, got, sizeof got));
    uint16_t want[4] = {0x4000, 0x4400, 0x3C00, 0xC000}; /* 2, 4, 1, -2 */
    for (int i = 0; i < 4; i++) if (got[i] != want[i]) KT_FAIL("f16 add[%d] = %04x, want %04x", i, got[i], want[i]);
    kiln_tensor_free(o);
    kiln_tensor_free(t);
}

static void test_matmul(void) {
    enum { B = 2, M = 5, K = 7, N = 3 };
    float a[B * M * K], b[K * N], w[B * M * N];
    kt_fill(a, B * M * K);
    kt_fill(b, K * N);
    for (int z = 0; z < B; z++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = 0;
                for (int k = 0; k < K; k++) acc += (double)a[z * M * K + i * K + k] * b[k * N + j];
                w[z * M * N + i * N + j] = (float)acc;
            }
    size_t sa2[2] = {M, K}, sa3[3] = {B, M, K}, sb[2] = {K, N}, sw2[2] = {M, N}, sw3[3] = {B, M, N};
    KilnTensor *o_ = NULL, *tb = F(b, sb, 2);
    KilnTensor *t = OUT(kiln_matmul(F(a, sa2, 2), tb, &o_));
    kt_expect_shape(t, sw2, 2, "matmul");
    kt_expect_f32(t, w, M * N, 1e-5f, 1e-5f, "matmul");
    t = OUT(kiln_matmul(F(a, sa3, 3), tb, &o_)); /* batch broadcast */
    kt_expect_shape(t, sw3, 3, "batched matmul");
    kt_expect_f32(t, w, B * M * N, 1e-5f, 1e-5f, "batched matmul");
    /* vector @ matrix: [K] x [K, N] -> [N] */
    size_t sk[1] = {K}, sn[1] = {N};
    t = OUT(kiln_matmul(F(a, sk, 1), tb, &o_));
    kt_expect_shape(t, sn, 1, "vector matmul");
    kt_expect_f32(t, w, N, 1e-5f, 1e-5f, "vector matmul");
    free_all();
}

static void test_reduce(void) {
    enum { A = 4, B = 7, C = 3 };
    float x[A * B * C];
    kt_fill(x, A * B * C);
    x[1 * B * C + 2 * C + 1] = 5.0f; /* a clear maximum */
    size_t sx[3] = {A, B, C};
    KilnTensor *tx = F(x, sx, 3), *o_ = NULL;
    float s1[A * C], mx[A * C], mn[A * C], me[A * C], va[A * C];
    uint32_t am[A * C];
    for (int i = 0; i < A; i++)
        for (int k = 0; k < C; k++) {
            double s = 0, hi = -1e30, lo = 1e30;
            uint32_t arg = 0;
            for (int j = 0; j < B; j++) {
                double v = x[i * B * C + j * C + k];
                s += v;
                if (v > hi) { hi = v; arg = (uint32_t)j; }
                if (v < lo) lo = v;
            }
            double mean = s / B, ss = 0;
            for (int j = 0; j < B; j++) { double d = x[i * B * C + j * C + k] - mean; ss += d * d; }
            s1[i * C + k] = (float)s; mx[i * C + k] = (float)hi; mn[i * C + k] = (float)lo;
            me[i * C + k] = (float)mean; va[i * C + k] = (float)(ss / (B - 1)); am[i * C + k] = arg;
        }
    ptrdiff_t ax1[1] = {1}, axm2[1] = {-2};
    size_t keep[3] = {A, 1, C}, nokeep[2] = {A, C};
    KilnTensor *t = OUT(kiln_sum(tx, ax1, 1, true, &o_));
    kt_expect_shape(t, keep, 3, "sum keepdims");
    kt_expect_f32(t, s1, A * C, 1e-5f, 1e-5f, "sum axis 1");
    t = OUT(kiln_mean(tx, axm2, 1, false, &o_));
    kt_expect_shape(t, nokeep, 2, "mean");
    kt_expect_f32(t, me, A * C, 1e-6f, 1e-5f, "mean axis -2");
    kt_expect_f32(OUT(kiln_max(tx, ax1, 1, false, &o_)), mx, A * C, 0, 0, "max");
    kt_expect_f32(OUT(kiln_min(tx, ax1, 1, false, &o_)), mn, A * C, 0, 0, "min");
    kt_expect_f32(OUT(kiln_var(tx, ax1, 1, false, 1, &o_)), va, A * C, 1e-5f, 1e-4f, "var ddof=1");
    kt_expect_u32(OUT(kiln_argmax(tx, &ax1[0], false, &o_)), am, A * C, "argmax axis 1");
    /* all axes */
    double tot = 0, lo = 1e30;
    uint32_t lo_at = 0;
    for (int i = 0; i < A * B * C; i++) { tot += x[i]; if (x[i] < lo) { lo = x[i]; lo_at = (uint32_t)i; } }
    float ft = (float)tot;
    t = OUT(kiln_sum(tx, NULL, 0, false, &o_));
    kt_expect_shape(t, NULL, 0, "sum all");
    kt_expect_f32(t, &ft, 1, 1e-4f, 1e-5f, "sum all");
    kt_expect_u32(OUT(kiln_argmin(tx, NULL, false, &o_)), &lo_at, 1, "argmin flattened");
    /* two axes */
    ptrdiff_t ax02[2] = {0, 2};
    float s02[B];
    for (int j = 0; j < B; j++) { double s = 0; for (int i = 0; i < A; i++) for (int k = 0; k < C; k++) s += x[i * B * C + j * C + k]; s02[j] = (float)s; }
    kt_expect_f32(OUT(kiln_sum(tx, ax02, 2, false, &o_)), s02, B, 1e-5f, 1e-5f, "sum axes 0,2");
    free_all();
}

static void test_norm(void) {
    enum { R = 5, C = 9 };
    float x[R * C], w[R * C], g[C], be[C];
    kt_fill(x, R * C);
    kt_fill(g, C);
    kt_fill(be, C);
    size_t sx[2] = {R, C}, sc[1] = {C};
    KilnTensor *tx = F(x, sx, 2), *tg = F(g, sc, 1), *tbe = F(be, sc, 1), *o_ = NULL;
    float lsm[R * C], ln[R * C], rms[R * C];
    for (int i = 0; i < R; i++) {
        double hi = -1e30, s = 0, m = 0, v = 0, sq = 0;
        for (int j = 0; j < C; j++) hi = fmax(hi, x[i * C + j]);
        for (int j = 0; j < C; j++) s += exp(x[i * C + j] - hi);
        for (int j = 0; j < C; j++) m += x[i * C + j];
        m /= C;
        for (int j = 0; j < C; j++) { v += (x[i * C + j] - m) * (x[i * C + j] - m); sq += (double)x[i * C + j] * x[i * C + j]; }
        v /= C;
        for (int j = 0; j < C; j++) {
            w[i * C + j] = (float)(exp(x[i * C + j] - hi) / s);
            lsm[i * C + j] = (float)(x[i * C + j] - hi - log(s));
            ln[i * C + j] = (float)((x[i * C + j] - m) / sqrt(v + 1e-5) * g[j] + be[j]);
            rms[i * C + j] = (float)(x[i * C + j] / sqrt(sq / C + 1e-6) * g[j]);
        }
    }
    kt_expect_f32(OUT(kiln_softmax(tx, -1, &o_)), w, R * C, 1e-6f, 1e-5f, "softmax");
    kt_expect_f32(OUT(kiln_log_softmax(tx, 1, &o_)), lsm, R * C, 1e-5f, 1e-5f, "log_softmax");
    kt_expect_f32(OUT(kiln_layer_norm(tx, tg, tbe, 1e-5f, &o_)), ln, R * C, 1e-4f, 1e-4f, "layer_norm");
    kt_expect_f32(OUT(kiln_rms_norm(tx, tg, 1e-6f, &o_)), rms, R * C, 1e-4f, 1e-4f, "rms_norm");
    /* softmax over axis 0 */
    for (int j = 0; j < C; j++) {
        double hi = -1e30, s = 0;
        for (int i = 0; i < R; i++) hi = fmax(hi, x[i * C + j]);
        for (int i = 0; i < R; i++) s += exp(x[i * C + j] - hi);
        for (int i = 0; i < R; i++) w[i * C + j] = (float)(exp(x[i * C + j] - hi) / s);
    }
    kt_expect_f32(OUT(kiln_softmax(tx, 0, &o_)), w, R * C, 1e-6f, 1e-5f, "softmax axis 0");
    /* batch_norm: x [2, 3, 4], stats [3] */
    enum { N = 2, CH = 3, L = 4 };
    float bx[N * CH * L], mean[CH], var[CH], wt[CH], bi[CH], bw[N * CH * L];
    kt_fill(bx, N * CH * L);
    kt_fill(mean, CH);
    kt_fill(wt, CH);
    kt_fill(bi, CH);
    for (int c = 0; c < CH; c++) var[c] = 0.5f + fabsf(kt_rand());
    for (int n = 0; n < N; n++)
        for (int c = 0; c < CH; c++)
            for (int l = 0; l < L; l++) {
                int i = (n * CH + c) * L + l;
                bw[i] = (float)((bx[i] - mean[c]) / sqrt(var[c] + 1e-5) * wt[c] + bi[c]);
            }
    size_t sbx[3] = {N, CH, L}, sch[1] = {CH};
    kt_expect_f32(OUT(kiln_batch_norm(F(bx, sbx, 3), F(mean, sch, 1), F(var, sch, 1), F(wt, sch, 1), F(bi, sch, 1), 1e-5f, &o_)),
                  bw, N * CH * L, 1e-5f, 1e-4f, "batch_norm");
    free_all();
}

static void test_conv(void) {
    enum { N = 2, C = 4, H = 6, W = 5, O = 6, G = 2, KH = 3, KW = 3, SH = 1, SW = 2, PH = 1, PW = 0 };
    enum { OH = (H + 2 * PH - (KH - 1) - 1) / SH + 1, OW = (W + 2 * PW - (KW - 1) - 1) / SW + 1 };
    static float x[N * C * H * W], w[O * (C / G) * KH * KW], bias[O], want[N * O * OH * OW];
    kt_fill(x, N * C * H * W);
    kt_fill(w, O * (C / G) * KH * KW);
    kt_fill(bias, O);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double acc = bias[o];
                    int g = o / (O / G);
                    for (int ci = 0; ci < C / G; ci++)
                        for (int kh = 0; kh < KH; kh++)
                            for (int kw = 0; kw < KW; kw++) {
                                int ih = oh * SH - PH + kh, iw = ow * SW - PW + kw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int c = g * (C / G) + ci;
                                acc += (double)x[((n * C + c) * H + ih) * W + iw] * w[((o * (C / G) + ci) * KH + kh) * KW + kw];
                            }
                    want[((n * O + o) * OH + oh) * OW + ow] = (float)acc;
                }
    size_t sx[4] = {N, C, H, W}, sw[4] = {O, C / G, KH, KW}, sb[1] = {O}, so[4] = {N, O, OH, OW};
    KilnTensor *tx = F(x, sx, 4), *o_ = NULL;
    KilnTensor *t = OUT(kiln_conv2d(tx, F(w, sw, 4), F(bias, sb, 1), SH, SW, PH, PW, 1, 1, G, &o_));
    kt_expect_shape(t, so, 4, "conv2d");
    kt_expect_f32(t, want, N * O * OH * OW, 1e-5f, 1e-4f, "conv2d");

    /* pooling: 2x3 window, stride 2x1, padding 1x1 */
    enum { PKH = 2, PKW = 3, PSH = 2, PSW = 1, PPH = 1, PPW = 1 };
    enum { QH = (H + 2 * PPH - PKH) / PSH + 1, QW = (W + 2 * PPW - PKW) / PSW + 1 };
    static float mx[N * C * QH * QW], av[N * C * QH * QW];
    for (int nc = 0; nc < N * C; nc++)
        for (int oh = 0; oh < QH; oh++)
            for (int ow = 0; ow < QW; ow++) {
                double hi = -INFINITY, s = 0;
                for (int kh = 0; kh < PKH; kh++)
                    for (int kw = 0; kw < PKW; kw++) {
                        int ih = oh * PSH - PPH + kh, iw = ow * PSW - PPW + kw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        double v = x[(nc * H + ih) * W + iw];
                        hi = fmax(hi, v);
                        s += v;
                    }
                mx[(nc * QH + oh) * QW + ow] = (float)hi;
                av[(nc * QH + oh) * QW + ow] = (float)(s / (PKH * PKW));
            }
    size_t sq[4] = {N, C, QH, QW};
    t = OUT(kiln_max_pool2d(tx, PKH, PKW, PSH, PSW, PPH, PPW, &o_));
    kt_expect_shape(t, sq, 4, "max_pool2d");
    kt_expect_f32(t, mx, N * C * QH * QW, 0, 0, "max_pool2d");
    kt_expect_f32(OUT(kiln_avg_pool2d(tx, PKH, PKW, PSH, PSW, PPH, PPW, &o_)), av, N * C * QH * QW, 1e-6f, 1e-5f, "avg_pool2d");
    free_all();
}

static void test_movement(void) {
    KilnTensor *o_ = NULL;
    float x[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    size_t s234[3] = {2, 3, 4};
    KilnTensor *tx = F(x, s234, 3);
    /* reshape with -1 */
    ptrdiff_t rs[2] = {3, -1};
    size_t s38[2] = {3, 8};
    KilnTensor *t = OUT(kiln_reshape(tx, rs, 2, &o_));
    kt_expect_shape(t, s38, 2, "reshape");
    kt_expect_f32(t, x, 24, 0, 0, "reshape");
    /* permute (2, 0, 1): [4, 2, 3] */
    ptrdiff_t perm[3] = {2, 0, 1};
    float pw[24];
    for (int k = 0; k < 4; k++) for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++) pw[(k * 2 + i) * 3 + j] = x[(i * 3 + j) * 4 + k];
    size_t s423[3] = {4, 2, 3};
    t = OUT(kiln_permute(tx, perm, 3, &o_));
    kt_expect_shape(t, s423, 3, "permute");
    kt_expect_f32(t, pw, 24, 0, 0, "permute");
    /* transpose(0, -1): [4, 3, 2] */
    float tw[24];
    for (int k = 0; k < 4; k++) for (int j = 0; j < 3; j++) for (int i = 0; i < 2; i++) tw[(k * 3 + j) * 2 + i] = x[(i * 3 + j) * 4 + k];
    kt_expect_f32(OUT(kiln_transpose(tx, 0, -1, &o_)), tw, 24, 0, 0, "transpose");
    /* concat [2,3] and [4,3] on axis 0, then [2,3] and [2,1] on axis 1 */
    size_t s23[2] = {2, 3}, s43[2] = {4, 3}, s63[2] = {6, 3}, s21[2] = {2, 1}, s24[2] = {2, 4};
    KilnTensor *a = F(x, s23, 2), *b = F(x + 6, s43, 2), *c = F(x + 20, s21, 2);
    const KilnTensor *ab[2] = {a, b}, *ac[2] = {a, c};
    t = OUT(kiln_concat(ab, 2, 0, &o_));
    kt_expect_shape(t, s63, 2, "concat 0");
    kt_expect_f32(t, x, 18, 0, 0, "concat 0");
    float cw[8] = {0, 1, 2, 20, 3, 4, 5, 21};
    t = OUT(kiln_concat(ac, 2, -1, &o_));
    kt_expect_shape(t, s24, 2, "concat 1");
    kt_expect_f32(t, cw, 8, 0, 0, "concat 1");
    /* slice x[3,8] axis 1, 1:100:3 -> cols 1, 4, 7; and -3: */
    KilnTensor *m = OUT(kiln_reshape(tx, rs, 2, &o_));
    float sw[9];
    for (int i = 0; i < 3; i++) for (int j = 0; j < 3; j++) sw[i * 3 + j] = x[i * 8 + 1 + 3 * j];
    size_t s33[2] = {3, 3};
    t = OUT(kiln_slice(m, 1, 1, 100, 3, &o_));
    kt_expect_shape(t, s33, 2, "slice");
    kt_expect_f32(t, sw, 9, 0, 0, "slice");
    size_t s13[2] = {1, 8};
    t = OUT(kiln_slice(m, 0, -1, 3, 1, &o_));
    kt_expect_shape(t, s13, 2, "slice negative start");
    kt_expect_f32(t, x + 16, 8, 0, 0, "slice negative start");
    /* index_select rows [2, 0, 2] of [3, 8] */
    int32_t idx[3] = {2, 0, 2};
    size_t s3[1] = {3};
    float iw[24];
    for (int r = 0; r < 3; r++) for (int j = 0; j < 8; j++) iw[r * 8 + j] = x[idx[r] * 8 + j];
    kt_expect_f32(OUT(kiln_index_select(m, 0, I(idx, s3, 1), &o_)), iw, 24, 0, 0, "index_select");
    /* gather axis 1 on [3, 8] with index [3, 2] */
    int32_t gi[6] = {7, 0, 3, 3, 1, 6};
    float gw[6];
    for (int r = 0; r < 3; r++) for (int j = 0; j < 2; j++) gw[r * 2 + j] = x[r * 8 + gi[r * 2 + j]];
    size_t s32[2] = {3, 2};
    t = OUT(kiln_gather(m, 1, I(gi, s32, 2), &o_));
    kt_expect_shape(t, s32, 2, "gather");
    kt_expect_f32(t, gw, 6, 0, 0, "gather");
    /* Negative indices count from the end, numpy's take / take_along_axis (issue 28: gather read
       -1 as 0); -9 and 8 are outside [-8, 8) and read 0. */
    int32_t ni[6] = {-1, -8, -9, 8, -2, 0};
    float nw[6];
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 2; j++) {
            int32_t v = ni[r * 2 + j];
            v = v < 0 ? v + 8 : v;
            nw[r * 2 + j] = (v < 0 || v >= 8) ? 0.0f : x[r * 8 + v];
        }
    kt_expect_f32(OUT(kiln_gather(m, 1, I(ni, s32, 2), &o_)), nw, 6, 0, 0, "gather negative");
    size_t s6[1] = {6};
    float nt[18];
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 6; j++) {
            int32_t v = ni[j] < 0 ? ni[j] + 8 : ni[j];
            nt[r * 6 + j] = (v < 0 || v >= 8) ? 0.0f : x[r * 8 + v];
        }
    kt_expect_f32(OUT(kiln_index_select(m, 1, I(ni, s6, 1), &o_)), nt, 18, 0, 0, "index_select negative");
    free_all();
}

static void test_nn(void) {
    KilnTensor *o_ = NULL;
    /* embedding: weight [6, 4], ids [2, 3] -> [2, 3, 4] */
    float wt[24];
    kt_fill(wt, 24);
    int32_t ids[6] = {5, 0, 2, 2, 1, 4};
    float ew[24];
    for (int i = 0; i < 6; i++) for (int d = 0; d < 4; d++) ew[i * 4 + d] = wt[ids[i] * 4 + d];
    size_t s64[2] = {6, 4}, s23[2] = {2, 3}, s234[3] = {2, 3, 4};
    KilnTensor *t = OUT(kiln_embedding(F(wt, s64, 2), I(ids, s23, 2), &o_));
    kt_expect_shape(t, s234, 3, "embedding");
    kt_expect_f32(t, ew, 24, 0, 0, "embedding");
    /* rope: x [2, 5, 6], offset 3, base 10000 */
    enum { B = 2, L = 5, D = 6 };
    float x[B * L * D], rw[B * L * D];
    kt_fill(x, B * L * D);
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L; l++)
            for (int i = 0; i < D / 2; i++) {
                double th = (3 + l) * pow(10000.0, -2.0 * i / D);
                int at = (b * L + l) * D;
                double x0 = x[at + i], x1 = x[at + i + D / 2];
                rw[at + i] = (float)(x0 * cos(th) - x1 * sin(th));
                rw[at + i + D / 2] = (float)(x1 * cos(th) + x0 * sin(th));
            }
    size_t sr[3] = {B, L, D};
    kt_expect_f32(OUT(kiln_rope(F(x, sr, 3), 3, 10000.0f, &o_)), rw, B * L * D, 1e-5f, 1e-4f, "rope");
    /* attention: q [2, 3, 4], k [2, 5, 4], v [2, 5, 2]; and causal with Lq = Lk = 5 */
    enum { LQ = 3, LK = 5, DK = 4, DV = 2 };
    float q[B * LK * DK], k[B * LK * DK], v[B * LK * DV], aw[B * LK * DV];
    kt_fill(q, B * LK * DK);
    kt_fill(k, B * LK * DK);
    kt_fill(v, B * LK * DV);
    for (int causal = 0; causal < 2; causal++) {
        int lq = causal ? LK : LQ;
        double scale = causal ? 0.7 : 1 / sqrt((double)DK);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < lq; i++) {
                double sc[LK], hi = -1e30, s = 0;
                for (int j = 0; j < LK; j++) {
                    double d = 0;
                    for (int e = 0; e < DK; e++) d += (double)q[(b * lq + i) * DK + e] * k[(b * LK + j) * DK + e];
                    sc[j] = (causal && j > i) ? -INFINITY : d * scale;
                    hi = fmax(hi, sc[j]);
                }
                for (int j = 0; j < LK; j++) { sc[j] = exp(sc[j] - hi); s += sc[j]; }
                for (int e = 0; e < DV; e++) {
                    double acc = 0;
                    for (int j = 0; j < LK; j++) acc += sc[j] / s * v[(b * LK + j) * DV + e];
                    aw[(b * lq + i) * DV + e] = (float)acc;
                }
            }
        size_t sq[3] = {B, (size_t)lq, DK}, sk[3] = {B, LK, DK}, sv[3] = {B, LK, DV}, so[3] = {B, (size_t)lq, DV};
        float fscale = 0.7f;
        t = OUT(kiln_attention(F(q, sq, 3), F(k, sk, 3), F(v, sv, 3), causal != 0, causal ? &fscale : NULL, &o_));
        kt_expect_shape(t, so, 3, "attention");
        kt_expect_f32(t, aw, (size_t)(B * lq * DV), 1e-5f, 1e-4f, causal ? "causal attention" : "attention");
    }
    free_all();
}

static void test_random(void) {
    enum { N = 2000 };
    size_t sn[1] = {N};
    KilnTensor *o_ = NULL;
    KilnTensor *u1 = OUT(kiln_random_uniform(sn, 1, KILN_F32, 42, -2.0, 3.0, &o_));
    KilnTensor *u2 = OUT(kiln_random_uniform(sn, 1, KILN_F32, 42, -2.0, 3.0, &o_));
    KilnTensor *u3 = OUT(kiln_random_uniform(sn, 1, KILN_F32, 43, -2.0, 3.0, &o_));
    float *a = (float *)kt_read(u1, NULL), *b = (float *)kt_read(u2, NULL), *c = (float *)kt_read(u3, NULL);
    double s = 0;
    int in_range = 1, differ = 0;
    for (int i = 0; i < N; i++) { s += a[i]; in_range &= a[i] >= -2.0f && a[i] < 3.0f; differ += a[i] != c[i]; }
    CHECK(in_range);
    CHECK(memcmp(a, b, N * sizeof(float)) == 0);
    CHECK(differ > N / 2);
    CHECK(fabs(s / N - 0.5) < 0.15);
    free(a); free(b); free(c);
    KilnTensor *nt = OUT(kiln_random_normal(sn, 1, KILN_F32, 7, 1.0, 2.0, &o_));
    float *n = (float *)kt_read(nt, NULL);
    double m = 0, v = 0;
    for (int i = 0; i < N; i++) m += n[i];
    m /= N;
    for (int i = 0; i < N; i++) v += (n[i] - m) * (n[i] - m);
    v = sqrt(v / (N - 1));
    if (fabs(m - 1.0) > 0.2 || fabs(v - 2.0) > 0.2) KT_FAIL("random_normal: mean %g std %g, want 1 and 2", m, v);
    free(n);
    free_all();
}

static const char *INC_KERNEL = /* a[i] += p.add for i < p.n, over several workgroups */
    "struct P { add: i32, n: u32 }\n"
    "@group(0) @binding(0) var<storage, read_write> a: array<i32>;\n"
    "@group(0) @binding(1) var<uniform> p: P;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n"
    "    if (id.x < p.n) { a[id.x] = a[id.x] + p.add; }\n"
    "}\n";

static void test_kernels(void) {
    enum { N = 300 };
    int32_t data[N];
    uint32_t want[N];
    for (int i = 0; i < N; i++) { data[i] = i - 100; want[i] = (uint32_t)(i - 100 + 2 * 7); }
    size_t sn[1] = {N};
    KilnTensor *t = I(data, sn, 1);
    KilnKernel *k = NULL;
    OK(kiln_kernel_compile(INC_KERNEL, "main", &k));
    struct { int32_t add; uint32_t n; } p = {7, N};
    const KilnTensor *ts[1] = {t};
    OK(kiln_kernel_dispatch(k, ts, 1, &p, sizeof p, (N + 63) / 64, 1, 1));
    OK(kiln_kernel_dispatch(k, ts, 1, &p, sizeof p, (N + 63) / 64, 1, 1));
    kt_expect_u32(t, want, N, "custom kernel");
    /* misuse of a dispatch */
    float f[N] = {0};
    KilnTensor *tf = F(f, sn, 1);
    const KilnTensor *wrong[1] = {tf}, *two[2] = {t, t}, *hole[1] = {NULL};
    EXPECT_ERR(KILN_ERR_DTYPE_MISMATCH, "i32", kiln_kernel_dispatch(k, wrong, 1, &p, sizeof p, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "storage bindings", kiln_kernel_dispatch(k, two, 2, &p, sizeof p, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "uniform", kiln_kernel_dispatch(k, ts, 1, NULL, 0, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "uniform", kiln_kernel_dispatch(k, ts, 1, &p, 2, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "tensors[0] is NULL", kiln_kernel_dispatch(k, hole, 1, &p, sizeof p, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "tensors is NULL", kiln_kernel_dispatch(k, NULL, 1, &p, sizeof p, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "kernel is NULL", kiln_kernel_dispatch(NULL, ts, 1, &p, sizeof p, 1, 1, 1));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "uniforms is NULL", kiln_kernel_dispatch(k, ts, 1, NULL, 8, 1, 1, 1));
    kt_expect_u32(t, want, N, "tensor intact after misuse");
    kiln_kernel_free(k);
    /* invalid WGSL */
    KilnKernel *bad = (KilnKernel *)&p;
    EXPECT_ERR(KILN_ERR_SHADER, "2:", kiln_kernel_compile("@compute @workgroup_size(1)\nfn main() { let x = ; }\n", "main", &bad));
    CHECK(bad == NULL);
    EXPECT_ERR(KILN_ERR_SHADER, "3:", kiln_kernel_compile(
        "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n"
        "@compute @workgroup_size(1)\nfn main() { a[0] = 1u; }\n", "main", &bad));
    EXPECT_ERR(KILN_ERR_SHADER, "no entry point", kiln_kernel_compile(INC_KERNEL, "nope", &bad));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "source is NULL", kiln_kernel_compile(NULL, "main", &bad));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "entry is NULL", kiln_kernel_compile(INC_KERNEL, NULL, &bad));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "out is NULL", kiln_kernel_compile(INC_KERNEL, "main", NULL));
    kiln_kernel_free(NULL);
    free_all();
}

static void test_errors(void) {
    float d[6] = {1, 2, 3, 4, 5, 6};
    size_t s23[2] = {2, 3}, s3[1] = {3}, s4[1] = {4}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int sentinel;
    KilnTensor *o = (KilnTensor *)&sentinel;
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "out is NULL", kiln_tensor_from_host(KILN_F32, s23, 2, d, sizeof d, NULL));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "shape is NULL", kiln_tensor_from_host(KILN_F32, NULL, 2, d, sizeof d, &o));
    CHECK(o == NULL);
    o = (KilnTensor *)&sentinel;
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "data is NULL", kiln_tensor_from_host(KILN_F32, s23, 2, NULL, sizeof d, &o));
    CHECK(o == NULL);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "needs 24", kiln_tensor_from_host(KILN_F32, s23, 2, d, 20, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "unknown dtype value 99", kiln_tensor_from_host((KilnDType)99, s23, 2, d, sizeof d, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "rank", kiln_tensor_from_host(KILN_F32, s9, 9, d, 4, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "unknown dtype", kiln_zeros(s23, 2, (KilnDType)7, &o));

    KilnTensor *a = F(d, s3, 1), *b = F(d, s4, 1), *m = F(d, s23, 2), *i = NULL;
    int32_t id[3] = {1, 2, 3};
    i = I(id, s3, 1);
    o = (KilnTensor *)&sentinel;
    EXPECT_ERR(KILN_ERR_SHAPE_MISMATCH, "", kiln_add(a, b, &o));
    CHECK(o == NULL);
    EXPECT_ERR(KILN_ERR_DTYPE_MISMATCH, "", kiln_add(a, i, &o));
    EXPECT_ERR(KILN_ERR_DTYPE_MISMATCH, "", kiln_log(i, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "unknown dtype value 7", kiln_cast(a, (KilnDType)7, &o));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "x is NULL", kiln_cast(NULL, KILN_I32, &o));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "x is NULL", kiln_exp(NULL, &o));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "a is NULL", kiln_mul_scalar(NULL, 2, &o));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "out is NULL", kiln_add(a, a, NULL));
    EXPECT_ERR(KILN_ERR_SHAPE_MISMATCH, "", kiln_matmul(m, m, &o));
    ptrdiff_t bad_axis[1] = {5}, dup[2] = {0, -2};
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "axis 5", kiln_sum(m, bad_axis, 1, false, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "repeated", kiln_sum(m, dup, 2, false, &o));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "axes is NULL", kiln_sum(m, NULL, 1, false, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "axis", kiln_softmax(m, 2, &o));
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "unknown", kiln_unary("cube", a, &o));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "op is NULL", kiln_binary(NULL, a, a, &o));
    const KilnTensor *none[1] = {NULL};
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "tensors[0] is NULL", kiln_concat(none, 1, 0, &o));
    CHECK(o == NULL);
    /* read-back misuse */
    float buf[6];
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "24 bytes", kiln_tensor_to_host(m, buf, 20));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "buf is NULL", kiln_tensor_to_host(m, NULL, 24));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "t is NULL", kiln_tensor_to_host(NULL, buf, 24));
    size_t sh[1];
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "rank 2", kiln_tensor_shape(m, sh, 1));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "out is NULL", kiln_tensor_ndim(m, NULL));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "t is NULL", kiln_tensor_dtype(NULL, NULL));
    /* the message API */
    KilnStatus s = kiln_add(a, b, &o);
    CHECK(kiln_last_error_status() == s);
    size_t need = kiln_last_error_message(NULL, 0);
    char full[1024], small[5];
    CHECK(need > 5 && need < sizeof full);
    CHECK(kiln_last_error_message(full, sizeof full) == need);
    CHECK(strlen(full) == need - 1);
    CHECK(strncmp(full, "kiln_add: ", 10) == 0);
    CHECK(kiln_last_error_message(small, sizeof small) == need);
    CHECK(strlen(small) == 4 && strncmp(small, full, 4) == 0);
    CHECK(strcmp(kiln_status_name(KILN_ERR_SHADER), "SHADER") == 0);
    CHECK(strcmp(kiln_status_name(999), "UNKNOWN") == 0);
    /* success leaves the message alone; inputs are intact after the errors */
    OK(kiln_add(a, a, &o));
    T(o);
    CHECK(kiln_last_error_status() == s);
    float dbl[3] = {2, 4, 6};
    kt_expect_f32(o, dbl, 3, 0, 0, "after errors");
    kt_expect_f32(m, d, 6, 0, 0, "input intact");
    kiln_tensor_free(NULL);
    free_all();
}

static void test_devices_and_stats(void) {
    size_t n = 0, idx = 99;
    OK(kiln_device_count(&n));
    CHECK(n >= 1);
    KilnDeviceInfo info;
    int chosen = 0;
    for (size_t i = 0; i < n; i++) {
        OK(kiln_device_info(i, &info));
        CHECK(info.index == i);
        CHECK(strlen(info.name) > 0 && strlen(info.backend) > 0);
        chosen += info.chosen;
        if (i == 0) printf("  device 0: %s (%s, %s)%s\n", info.name, info.backend, info.device_type, info.chosen ? " [chosen]" : "");
    }
    CHECK(chosen == 1);
    EXPECT_ERR(KILN_ERR_INVALID_ARGUMENT, "out of range", kiln_device_info(n, &info));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "out is NULL", kiln_device_info(0, NULL));
    OK(kiln_device_select("0", &idx));
    CHECK(idx == 0);
    OK(kiln_device_select("0", NULL));
    EXPECT_ERR(KILN_ERR_NO_ADAPTER, "no-such-adapter", kiln_device_select("no-such-adapter", &idx));
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "spec is NULL", kiln_device_select(NULL, &idx));

    KilnMemoryStats m0, m1, m2;
    KilnPipelineStats p0, p1;
    OK(kiln_synchronize());
    OK(kiln_memory_stats(&m0));
    OK(kiln_pipeline_stats(&p0));
    float d[256] = {0};
    size_t s[1] = {256};
    KilnTensor *t = kt_f32(d, s, 1), *o = NULL, *o2 = NULL;
    OK(kiln_exp(t, &o));
    OK(kiln_exp(t, &o2)); /* the second call is a pipeline-cache hit */
    OK(kiln_memory_stats(&m1));
    CHECK(m1.live_buffers >= m0.live_buffers + 2);
    CHECK(m1.in_use_bytes >= m0.in_use_bytes + 2 * sizeof d);
    CHECK(m1.peak_bytes >= m1.in_use_bytes);
    OK(kiln_pipeline_stats(&p1));
    CHECK(p1.hits + p1.misses > p0.hits + p0.misses);
    CHECK(p1.hits > p0.hits);
    kiln_tensor_free(o2);
    kiln_tensor_free(o);
    kiln_tensor_free(t);
    OK(kiln_synchronize());
    OK(kiln_memory_stats(&m2));
    CHECK(m2.live_buffers + 3 <= m1.live_buffers); /* the three buffers went back to the pool */
    OK(kiln_empty_cache());
    EXPECT_ERR(KILN_ERR_NULL_POINTER, "out is NULL", kiln_memory_stats(NULL));
    CHECK(kiln_abi_version() == KILN_ABI_VERSION);
}

int main(void) {
    struct { const char *name; void (*fn)(void); int heavy; } tests[] = {
        {"devices and stats", test_devices_and_stats, 0},
        {"errors", test_errors, 0},
        {"creation", test_creation, 0},
        {"elementwise", test_elementwise, 1},
        {"f16", test_f16, 1},
        {"matmul", test_matmul, 0},
        {"reduce", test_reduce, 1},
        {"norm", test_norm, 1},
        {"conv and pooling", test_conv, 1},
        {"movement", test_movement, 1},
        {"nn", test_nn, 1},
        {"random", test_random, 1},
        {"kernels", test_kernels, 0},
    };
    /* KILN_TEST_QUICK=1 (the valgrind run) skips the groups that compile many shaders. */
    const char *quick = getenv("KILN_TEST_QUICK");
    int q = quick && *quick && strcmp(quick, "0") != 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (q && tests[i].heavy) continue;
        int before = kt_failures;
        tests[i].fn();
        printf("%-20s %s\n", tests[i].name, kt_failures == before ? "ok" : "FAILED");
    }
    if (kt_failures) {
        fprintf(stderr, "test_kiln: %d failure(s)\n", kt_failures);
        return 1;
    }
    printf("test_kiln: all passed\n");
    return 0;
}
