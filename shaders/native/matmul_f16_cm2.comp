// Native-tier f16 matmul on NV cooperative matrix 2 (core/src/ops/matmul/native.rs): C[b] =
// A[b] @ B[b], f16 inputs, f32 accumulation on the tensor cores, f16 output, as
// shaders/native/matmul_f16.comp computes it; runs only where the device was opened with
// VK_NV_cooperative_matrix2 and the probe found a flexible-dimensions configuration for this
// variant's tile and workgroup size (core/src/native_cm2.rs). Compiled by glslang 15
// (mk/native.mk), once per kernels.txt line.
//
// Unlike matmul_f16.comp, there is no staging here: the whole workgroup owns one BM x BN f32
// accumulator (workgroup scope), and the driver stages the BM x BK and BK x BN operand tiles
// through its own reserved workgroup memory when coopMatLoadTensorNV reads them.
//
// Bounds: no index is computed here. Every global read and write goes through a tensor layout
// whose dimensions are the problem's (batch, M, K), (batch, K, N) and (batch, M, N), in clamp
// mode Constant: a load outside them returns 0 (so ragged M, N and K tiles multiply zeros) and a
// store outside them is dropped (GLSL_NV_cooperative_matrix2, "spanCoordToTensorCoord"). The
// batch is the layouts' outermost dimension rather than an element offset: the offset's bytes
// must be a multiple of 16, which the batch offsets M*K, K*N, M*N times 2 are not for ragged
// shapes. This module bypasses naga (wgpu's passthrough shaders); only Kiln's kernels run this way.
//
// FAST=1, where K and N are multiples of 8 (so every row and batch offset is 16-byte aligned):
// 2-D layouts over one matrix at an element offset, strides and offsets masked to multiples of
// 8 so the compiler can prove that alignment, the K loop unrolled UNROLL steps at a time so the
// driver can overlap loads with products (llama.cpp's mul_mm_cm2 does the same). A workgroup
// whose whole tile lies inside M x N, with K a multiple of BK, uses clamp mode Undefined (every
// access is inside the operands by that condition); the others (ragged edges) clamp mode
// Constant on the same 2-D layouts. FAST=0, and K or N not multiples of 8: the 3-D clamped
// layouts below.
//
// Variant defines: WG invocations per workgroup, BM x BN output tile, K steps of BK, FAST.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float16_t b[]; };
#ifndef BT
#define BT 0
#endif
#ifndef OUTF32
#define OUTF32 0
#endif
#if OUTF32
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer C { float16_t c[]; };
#endif

// shaders/matmul_common.wgsl's Params, byte for byte (see matmul_f16.comp).
layout(std140, set = 0, binding = 3) uniform Params {
    uint m;
    uint n;
    uint k;
    uint groups;  // ntiles * mtiles * batch
    uint ntiles;
    uint mtiles;
    uint brank;   // broadcast batch dimensions (<= 8)
    uint pad;
    uvec4 dims[6];  // bshape[2], astride[2], bstride[2]
} p;

#define CLAMP gl_CooperativeMatrixClampModeConstantNV

void main() {
    uint g = gl_WorkGroupID.x + (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * gl_NumWorkGroups.x;
    // Uniform over the workgroup, as every branch and loop below must be for workgroup-scope
    // matrices: all invocations leave or none.
    if (g >= p.groups) {
        return;
    }
    // tile_of (shaders/matmul_common.wgsl): n-tile fastest, then m-tile, then batch.
    uint per_batch = p.ntiles * p.mtiles;
    uint t = g % per_batch;
    uint bi = g / per_batch;
    uint nt = t % p.ntiles;
    uint mt = t / p.ntiles;
    uint aoff = 0u;
    uint boff = 0u;
    uint r = bi;
    for (uint i = 0u; i < p.brank; i++) {
        uint d = p.brank - 1u - i;
        uint ci = r % p.dims[d / 4u][d % 4u];
        r = r / p.dims[d / 4u][d % 4u];
        aoff += ci * p.dims[2u + d / 4u][d % 4u];
        boff += ci * p.dims[4u + d / 4u][d % 4u];
    }
    uint row0 = mt * BM;
    uint col0 = nt * BN;

    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);

// B's K x BN tile at k0 from layout lb: B itself (K x N), or under BT, the transpose of an
// N x K matrix (a quantized weight's rows, dequantized: the product x Wᵀ of core's quant
// product, ops/quant/product.rs) read through a transposed view.
#if BT
#define LOAD_B(fb, lb, bo, k0) coopMatLoadTensorNV(fb, b, bo, sliceTensorLayoutNV(lb, col0, BN, k0, BK), tv)
#else
#define LOAD_B(fb, lb, bo, k0) coopMatLoadTensorNV(fb, b, bo, sliceTensorLayoutNV(lb, k0, BK, col0, BN))
#endif

// The K loop over layouts la (M x K) and lb (K x N), unrolled UNROLL steps at a time so the
// driver can overlap loads with products (llama.cpp's mul_mm_cm2 does the same).
#define K_LOOP(la, lb, ao, bo, steps)                                                          \
    {                                                                                          \
        uint s = 0u;                                                                           \
        for (; s + UNROLL <= steps; s += UNROLL) {                                             \
            [[unroll]] for (uint u = 0u; u < UNROLL; u++) {                                    \
                uint k0 = (s + u) * BK;                                                        \
                coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;               \
                coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> fb;               \
                coopMatLoadTensorNV(fa, a, ao, sliceTensorLayoutNV(la, row0, BM, k0, BK));     \
                LOAD_B(fb, lb, bo, k0);                                                        \
                acc = coopMatMulAdd(fa, fb, acc);                                              \
            }                                                                                  \
        }                                                                                      \
        for (; s < steps; s++) {                                                               \
            uint k0 = s * BK;                                                                  \
            coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;                   \
            coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> fb;                   \
            coopMatLoadTensorNV(fa, a, ao, sliceTensorLayoutNV(la, row0, BM, k0, BK));         \
            LOAD_B(fb, lb, bo, k0);                                                            \
            acc = coopMatMulAdd(fa, fb, acc);                                                  \
        }                                                                                      \
    }

// The result: the accumulators rounded to f16 (the WGSL tier's f16(acc)) into h, or under
// OUTF32 the accumulators as they are (the quant product's f32 result); PREP_C makes it, then
// the store takes OUT_C.
#if OUTF32
#define PREP_C
#define OUT_C acc
#else
#define PREP_C                                                                                 \
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> h =                 \
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
#define OUT_C h
#endif

#if FAST
    // Where K and N are multiples of 8, every row and batch offset is 16-byte aligned (the
    // offsets are whole matrices: M*K, K*N, M*N halves), so each operand can be a 2-D layout at
    // an element offset; the masks tell the compiler the strides and offsets are multiples of 8.
    // Uniform over the workgroup (sizes and the workgroup's tile only).
    if (p.k > 0u && p.k % 8u == 0u && p.n % 8u == 0u) {
#if BT
        tensorViewNV<2, false, 1, 0> tv = createTensorViewNV(2, false, 1, 0);
#define B_DIMS sn, sk
#define B_STRIDE sk
#else
#define B_DIMS sk, sn
#define B_STRIDE sn
#endif
        uint sk = p.k & ~7u;
        uint sn = p.n & ~7u;
        uint ao = aoff & ~7u;
        uint bo = boff & ~7u;
        uint co = (bi * p.m * p.n) & ~7u;
        uint steps = (p.k + BK - 1u) / BK;
        if (row0 + BM <= p.m && col0 + BN <= p.n && p.k % BK == 0u) {
            // Interior tile: clamp mode Undefined (no bounds work at all); every access is
            // inside the operands by this condition.
            tensorLayoutNV<2> la = createTensorLayoutNV(2);
            la = setTensorLayoutDimensionNV(la, p.m, sk);
            la = setTensorLayoutStrideNV(la, sk, 1u);
            tensorLayoutNV<2> lb = createTensorLayoutNV(2);
            lb = setTensorLayoutDimensionNV(lb, B_DIMS);
            lb = setTensorLayoutStrideNV(lb, B_STRIDE, 1u);
            K_LOOP(la, lb, ao, bo, steps)
            PREP_C
            tensorLayoutNV<2> lc = createTensorLayoutNV(2);
            lc = setTensorLayoutDimensionNV(lc, p.m, sn);
            lc = setTensorLayoutStrideNV(lc, sn, 1u);
            coopMatStoreTensorNV(OUT_C, c, co, sliceTensorLayoutNV(lc, row0, BM, col0, BN));
            return;
        } else {
            // Edge tile (ragged M, N or K): the same 2-D layouts in clamp mode Constant, which
            // read 0 past M, N and K and drop stores past M x N (the 3-D layouts below, with
            // the batch as a dimension, measured 16 TFLOP/s on the H200 against 230 inside).
            tensorLayoutNV<2, CLAMP> la = createTensorLayoutNV(2, CLAMP);
            la = setTensorLayoutDimensionNV(la, p.m, sk);
            la = setTensorLayoutStrideNV(la, sk, 1u);
            tensorLayoutNV<2, CLAMP> lb = createTensorLayoutNV(2, CLAMP);
            lb = setTensorLayoutDimensionNV(lb, B_DIMS);
            lb = setTensorLayoutStrideNV(lb, B_STRIDE, 1u);
            K_LOOP(la, lb, ao, bo, steps)
        }
        // Edge tiles store through the clamped layout.
        PREP_C
        tensorLayoutNV<2, CLAMP> lc = createTensorLayoutNV(2, CLAMP);
        lc = setTensorLayoutDimensionNV(lc, p.m, sn);
        lc = setTensorLayoutStrideNV(lc, sn, 1u);
        coopMatStoreTensorNV(OUT_C, c, co, sliceTensorLayoutNV(lc, row0, BM, col0, BN));
        return;
    }
#endif

#if BT || OUTF32
    // These variants (the quant product's) run only where K and N are multiples of 8 and K > 0
    // (core/src/ops/matmul/native.rs `quant_product`), so always on the path above.
    return;
#else
    // K = 0: no step, and C is written as zeros. Otherwise the batch offsets are whole matrices
    // (core's batch strides are multiples of M*K and K*N), so these are the operands' matrix
    // indices; the outermost dimension only has to contain them (it is sliced to one matrix).
    if (p.k > 0u) {
        uint ai = aoff / (p.m * p.k);
        uint bj = boff / (p.k * p.n);
        tensorLayoutNV<3, CLAMP> la = createTensorLayoutNV(3, CLAMP);
        la = setTensorLayoutDimensionNV(la, ai + 1u, p.m, p.k);
        tensorLayoutNV<3, CLAMP> lb = createTensorLayoutNV(3, CLAMP);
        lb = setTensorLayoutDimensionNV(lb, bj + 1u, p.k, p.n);
        uint steps = (p.k + BK - 1u) / BK;
        for (uint s = 0u; s < steps; s++) {
            uint k0 = s * BK;
            coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;
            coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> fb;
            coopMatLoadTensorNV(fa, a, 0u, sliceTensorLayoutNV(la, ai, 1u, row0, BM, k0, BK));
            coopMatLoadTensorNV(fb, b, 0u, sliceTensorLayoutNV(lb, bj, 1u, k0, BK, col0, BN));
            acc = coopMatMulAdd(fa, fb, acc);
        }
    }

    // The f32 accumulators rounded to f16 (the WGSL tier's f16(acc)); the store drops what lies
    // outside M x N.
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> h =
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
    tensorLayoutNV<3, CLAMP> lc = createTensorLayoutNV(3, CLAMP);
    lc = setTensorLayoutDimensionNV(lc, bi + 1u, p.m, p.n);
    coopMatStoreTensorNV(h, c, 0u, sliceTensorLayoutNV(lc, bi, 1u, row0, BM, col0, BN));
#endif
}
