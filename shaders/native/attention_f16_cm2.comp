// Native-tier f16 flash attention on NV cooperative matrix 2 (core/src/ops/attention/native.rs):
// out = softmax(q kᵀ · scale) v per batch entry, q [Lq, D], k and v the first Lk of their
// kv_rows rows [., D] / [., DV], optional top-left causal masking (key j > query i dropped); f16
// operands, f32 scores, softmax state and output accumulators, f16 output. Runs only where the
// device was opened with VK_NV_cooperative_matrix2 and the probe found a flexible-dimensions
// configuration for this variant's workgroup size and tiles (core/src/native.rs, Cm2Caps).
//
// Why this kernel exists: WGSL's cooperative matrices have no element access, so the WGSL tier's
// flash kernel (shaders/flash_attention_coop.wgsl) round-trips every score tile through
// workgroup memory for the online softmax (about half its time, BENCHMARKS.md). Here the softmax
// runs on the accumulators themselves: row reductions (coopMatReduceNV) and per-element
// functions (coopMatPerElementNV), the structure of llama.cpp's flash_attn_cm2.comp.
//
// One workgroup per (batch entry, BR query rows); the whole workgroup owns BR x BC score tiles
// and the BR x DV output accumulator (workgroup scope). The softmax state M (row max) and L (row
// sum) are kept smeared across each row of a BR x 16 matrix (STATE below). Base-2 exponentials on scores scaled by
// scale * log2(e), as the WGSL kernels compute them.
//
// Bounds: no index is computed for a global access. Q, K, V and the output go through tensor
// layouts of the problem's dimensions (Lq x D, Lk x D, Lk x DV, Lq x DV) in clamp mode Constant:
// rows past Lq or Lk load as 0 and stores past Lq are dropped. Score columns past Lk (and, under
// causal, past each row's diagonal) are set to -inf before the row max; the running max starts
// at a finite value, so their exponentials are 0 (Lk = 0: no tile, L = 0, and the row is written
// as zeros, as the op defines it). The batch offsets are whole matrices (multiples of D or DV elements, which the op requires to be
// multiples of 8: 16-byte aligned, as tensor loads need). Every branch and loop bound depends
// only on the workgroup's tile and the parameters: uniform over the workgroup, as
// workgroup-scope matrices need. This module bypasses naga (wgpu's passthrough shaders); only
// Kiln's kernels run this way.
//
// Variant defines: WG invocations per workgroup, BR query rows and BC keys per tile, HD = D and
// HDV = DV (the op picks the variant whose head sizes equal the problem's); MASK=1 adds an
// additive f16 mask to the scaled scores (a row whose keys are all -inf gets zeros: its running
// max stays -FLT_MAX/2, its exponentials 0 and its sum 0).
//
// Tried on the H200 and dropped (BENCHMARKS.md, "f16 attention on NV cooperative matrix 2"):
// reading V's tile and the next K tile before the softmax (register pressure: 99 -> 73 TFLOP/s
// at 8x8x1024x64), row sums by a row reduction instead of the product with ones (99 -> 94), the
// last query blocks first (no change), the rescale skipped unless some row's max grew by 2^8
// (decided by a whole-tile max reduction: 99 -> 77). On 2026-11-29 (same page): P V accumulated
// in f16 as llama.cpp does (no change), one or two subgroups a workgroup (32 invocations of 16-32
// query rows: 56-66 / 75-111 TFLOP/s; 64 of 64 rows: 84 / 144), and, to find the ceiling, the
// kernel without its softmax (P = the scores): 189-190 / 341-349, so the softmax's own work is
// about half of the kernel's time.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require


layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

#ifndef MASK
#define MASK 0
#endif

layout(std430, set = 0, binding = 0) readonly buffer Q { float16_t q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float16_t k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float16_t v[]; };
#if MASK
// The additive mask, broadcast to [batch..., Lq, Lk]: contiguous along the keys, its row stride
// (0: broadcast over the queries) and batch offsets multiples of 8 (the op checks).
layout(std430, set = 0, binding = 3) readonly buffer Mask { float16_t mask[]; };
layout(std430, set = 0, binding = 4) writeonly buffer O { float16_t o[]; };
#define PARAMS_BINDING 5
#else
layout(std430, set = 0, binding = 3) writeonly buffer O { float16_t o[]; };
#define PARAMS_BINDING 4
#endif

// core/src/ops/attention/native.rs's `params`, word for word.
layout(std140, set = 0, binding = PARAMS_BINDING) uniform Params {
    uint lq;
    uint lk;
    uint nqb;       // query blocks of BR rows per batch entry
    uint blocks;    // nqb * batch entries
    uint causal;
    float scale2;   // scale * log2(e)
    uint brank;     // batch dimensions (<= 8)
    uint msq;       // the mask's row stride (MASK)
    uvec4 dims[10]; // bshape[2], qstride[2], kstride[2], vstride[2], mstride[2] (elements; 0 = broadcast)
} p;

#define CLAMP gl_CooperativeMatrixClampModeConstantNV
#define SCORES coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>
#define ACC coopmat<float, gl_ScopeWorkgroup, BR, HDV, gl_MatrixUseAccumulator>
// The softmax state (row max M, row sum L, the rescale factors) is one value per row, kept
// smeared across a BR x 16 matrix (16: the configurations' column granularity), so that every
// operation on it is element-wise between matrices of one type and layout, 16 columns wide
// instead of BC: fewer exponentials for the rescale and a narrower row-sum product, for one more
// smear of M to the scores' width each tile (H200: 99.1-99.4 -> 101.1-101.9 TFLOP/s at 8x8x1024x64, 165-166 -> 169-170 at
// 4x16x4096x64, BENCHMARKS.md).
#define SW 16
#define STATE coopmat<float, gl_ScopeWorkgroup, BR, SW, gl_MatrixUseAccumulator>

// The running max starts at -FLT_MAX / 2 rather than -inf, so that it is always finite and
// neither s - m nor mold - m is ever inf - inf. Dropped scores are -inf (not the same finite
// value: a row whose every key is masked would then have its dropped scores equal to its max,
// each weighing exp2(0) = 1); s - m is then -inf and its exponential 0.
#define NEG uintBitsToFloat(0xFEFFFFFFu)
#define NEG_INF uintBitsToFloat(0xFF800000u)

// Score (r, c) of the tile at query row q0, key k0: dropped past Lk, and under causal past the
// row's diagonal.
float maskScore(const in uint r, const in uint c, const in float e, const in uint q0, const in uint k0) {
    uint key = k0 + c;
    if (key >= p.lk || (p.causal != 0u && key > q0 + r)) {
        return NEG_INF;
    }
    return e;
}

float maxOf(const in uint r, const in uint c, const in float a, const in float b) {
    return max(a, b);
}

float exp2Of(const in uint r, const in uint c, const in float a) {
    return exp2(a);
}

float maxReduce(const in float a, const in float b) {
    return max(a, b);
}

// Row "reduction" that keeps one element: resizes a smeared row value to another width.
float smear(const in float a, const in float b) {
    return a;
}

void main() {
    uint g = gl_WorkGroupID.x + (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * gl_NumWorkGroups.x;
    if (g >= p.blocks) {
        return;
    }
    uint qblock = g % p.nqb;
    uint bi = g / p.nqb;
    // shaders/attention_common.wgsl's batch_offsets: the last batch dimension varies fastest.
    uint qo = 0u;
    uint ko = 0u;
    uint vo = 0u;
    uint mo = 0u;
    uint r = bi;
    for (uint t = 0u; t < p.brank; t++) {
        uint d = p.brank - 1u - t;
        uint ci = r % p.dims[d / 4u][d % 4u];
        r = r / p.dims[d / 4u][d % 4u];
        qo += ci * p.dims[2u + d / 4u][d % 4u];
        ko += ci * p.dims[4u + d / 4u][d % 4u];
        vo += ci * p.dims[6u + d / 4u][d % 4u];
#if MASK
        mo += ci * p.dims[8u + d / 4u][d % 4u];
#endif
    }
    uint q0 = qblock * BR;

    tensorLayoutNV<2, CLAMP> lq = createTensorLayoutNV(2, CLAMP);
    lq = setTensorLayoutDimensionNV(lq, p.lq, HD);
    tensorLayoutNV<2, CLAMP> lkl = createTensorLayoutNV(2, CLAMP);
    lkl = setTensorLayoutDimensionNV(lkl, p.lk, HD);
    tensorLayoutNV<2, CLAMP> lvl = createTensorLayoutNV(2, CLAMP);
    lvl = setTensorLayoutDimensionNV(lvl, p.lk, HDV);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
#if MASK
    tensorLayoutNV<2, CLAMP> lml = createTensorLayoutNV(2, CLAMP);
    lml = setTensorLayoutDimensionNV(lml, p.lq, p.lk);
    lml = setTensorLayoutStrideNV(lml, p.msq, 1u);
#endif

    coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseA> qa;
    coopMatLoadTensorNV(qa, q, qo, sliceTensorLayoutNV(lq, q0, BR, 0, HD));

    ACC acc = ACC(0.0);
    STATE m = STATE(NEG);
    STATE l = STATE(0.0);
    coopmat<float16_t, gl_ScopeWorkgroup, BC, SW, gl_MatrixUseB> ones =
        coopmat<float16_t, gl_ScopeWorkgroup, BC, SW, gl_MatrixUseB>(1.0);

    // Keys past the block's last row are masked for every row under causal: not visited.
    uint nk = p.causal != 0u ? min(p.lk, q0 + BR) : p.lk;
    uint tiles = (nk + BC - 1u) / BC;
    [[dont_unroll]]
    for (uint j = 0u; j < tiles; j++) {
        uint k0 = j * BC;
        coopmat<float16_t, gl_ScopeWorkgroup, HD, BC, gl_MatrixUseB> kt;
        coopMatLoadTensorNV(kt, k, ko, sliceTensorLayoutNV(lkl, k0, BC, 0, HD), transposed);
        SCORES s = SCORES(0.0);
        s = coopMatMulAdd(qa, kt, s);
        s *= p.scale2;
#if MASK
        // The mask is added to the scaled scores in natural-log units: times log2(e) here.
        coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> mv;
        coopMatLoadTensorNV(mv, mask, mo, sliceTensorLayoutNV(lml, q0, BR, k0, BC));
        s += SCORES(mv) * 1.4426950408889634;
#endif
        // A tile reaching past Lk, or (causal) past the first row's diagonal, has dropped scores.
        if (k0 + BC > p.lk || (p.causal != 0u && k0 + BC > q0 + 1u)) {
            coopMatPerElementNV(s, s, maskScore, q0, k0);
        }
        STATE rowmax;
        coopMatReduceNV(rowmax, s, gl_CooperativeMatrixReduceRowNV, maxReduce);
        STATE mold = m;
        coopMatPerElementNV(m, rowmax, maxOf, mold);
        SCORES pr;
        SCORES mw;
        coopMatReduceNV(mw, m, gl_CooperativeMatrixReduceRowNV, smear);
        coopMatPerElementNV(pr, s - mw, exp2Of);
        STATE em;
        coopMatPerElementNV(em, mold - m, exp2Of);
        coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA> pa =
            coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA>(pr);
        // Row sums of the f16 probabilities the product below takes, on the tensor cores.
        STATE rowsum = STATE(0.0);
        rowsum = coopMatMulAdd(pa, ones, rowsum);
        l = em * l + rowsum;
        ACC emd;
        coopMatReduceNV(emd, em, gl_CooperativeMatrixReduceRowNV, smear);
        acc = acc * emd;
        coopmat<float16_t, gl_ScopeWorkgroup, BC, HDV, gl_MatrixUseB> vb;
        coopMatLoadTensorNV(vb, v, vo, sliceTensorLayoutNV(lvl, k0, BC, 0, HDV));
        acc = coopMatMulAdd(pa, vb, acc);
    }

    ACC ld;
    coopMatReduceNV(ld, l, gl_CooperativeMatrixReduceRowNV, smear);
    [[unroll]] for (int i = 0; i < ld.length(); i++) {
        ld[i] = ld[i] == 0.0 ? 0.0 : 1.0 / ld[i];
    }
    acc = acc * ld;
    coopmat<float16_t, gl_ScopeWorkgroup, BR, HDV, gl_MatrixUseAccumulator> h =
        coopmat<float16_t, gl_ScopeWorkgroup, BR, HDV, gl_MatrixUseAccumulator>(acc);
    tensorLayoutNV<2, CLAMP> lo = createTensorLayoutNV(2, CLAMP);
    lo = setTensorLayoutDimensionNV(lo, p.lq, HDV);
    coopMatStoreTensorNV(h, o, bi * p.lq * HDV, sliceTensorLayoutNV(lo, q0, BR, 0, HDV));
}
