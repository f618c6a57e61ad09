// Native-tier f16 matmul (core/src/native/matmul.rs): C[b] = A[b] @ B[b], f16 inputs, f32
// accumulation on KHR cooperative matrices (tensor cores), f16 output: what the WGSL tier's f16
// matmul computes (shaders/matmul.wgsl, shaders/matmul_coop.wgsl), in the hardware's summation
// order. Compiled to SPIR-V by `make native-shaders` (mk/native.mk) once per variant listed in
// shaders/native/kernels.txt; the SPIR-V is checked in under shaders/native/spv/.
//
// This module bypasses naga (wgpu's passthrough shaders): there are no runtime bounds checks but
// the ones written here. Every global index is guarded below; every workgroup-memory index is in
// range by construction (reasoned at each access). Only Kiln's own kernels run this way.
//
// Variant defines: WM x WN subgroups of 32 invocations per workgroup, each owning TM x TN 16x16
// f32 accumulators; K walked in steps of BK (a multiple of 16). ALIGNED=1 where K and N are both
// multiples of 8 (and so every batch offset too): tiles are read from global memory 8 halves
// (16 bytes) at a time and full output tiles are stored straight from the accumulators;
// ALIGNED=0 reads one half at a time, any shape. DOUBLE: see the pipeline below.
//
// Pipeline (DOUBLE=1): the tiles of K step s+1 are read from global memory into registers while
// the products of step s run on the other of two workgroup-memory buffers; then they are stored
// into that buffer, and one barrier per K step separates the two. DOUBLE=0: one buffer, two
// barriers per step (store, barrier, read the next step into registers, products, barrier), the
// WGSL tier's schedule, in half the workgroup memory.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

#define SG 32
#define NT (WM * WN * SG)
#define BM (WM * TM * 16)
#define BN (WN * TN * 16)
// Rows of the workgroup tiles are padded by 8 halves (16 bytes): cooperative loads want 16-byte
// aligned rows, and the padding spreads consecutive rows over the banks.
#define SA (BK + 8)
#define SB (BN + 8)
// The tiles are arrays of f16vec4: strides and offsets below in f16vec4 units.
#define SA4 (SA / 4)
#define SB4 (SB / 4)
#define A_TILE4 (BM * SA4)
#define B_TILE4 (BK * SB4)

layout(local_size_x = NT, local_size_y = 1, local_size_z = 1) in;

// One binding, two views: 16-byte reads where aligned, single halves otherwise.
layout(std430, set = 0, binding = 0) readonly buffer A1 { float16_t a1[]; };
layout(std430, set = 0, binding = 0) readonly buffer A8 { uvec4 a8[]; };
layout(std430, set = 0, binding = 1) readonly buffer B1 { float16_t b1[]; };
layout(std430, set = 0, binding = 1) readonly buffer B8 { uvec4 b8[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C1 { float16_t c1[]; };

// shaders/matmul_common.wgsl's Params, byte for byte (std140: the uvec4 arrays have stride 16).
layout(std140, set = 0, binding = 3) uniform Params {
    uint m;
    uint n;
    uint k;
    uint groups;  // ntiles * mtiles * batch
    uint ntiles;
    uint mtiles;
    uint brank;   // broadcast batch dimensions (<= 8)
    uint pad;
    // bshape[2], astride[2], bstride[2] as one array: glslang 13 would otherwise give a
    // function-local uvec4[2] this block's ArrayStride, which spirv-val rejects.
    uvec4 dims[6];
} p;

#if DOUBLE
#define NBUF 2
#else
#define NBUF 1
#endif
shared f16vec4 As[NBUF * A_TILE4];  // [NBUF][BM][SA]
shared f16vec4 Bs[NBUF * B_TILE4];  // [NBUF][BK][SB]
shared float16_t Cs[WM * WN * 256];  // [subgroup][16][16]: ragged output tiles

#if ALIGNED
// Chunks of 8 halves per tile and per invocation (exact: NT divides both, checked below).
#define A_CHUNKS (BM * BK / 8)
#define B_CHUNKS (BK * BN / 8)
#define A_PER (A_CHUNKS / NT)
#define B_PER (B_CHUNKS / NT)
#if (A_CHUNKS % NT) != 0 || (B_CHUNKS % NT) != 0
#error "tile chunks must divide evenly over the workgroup"
#endif
#else
#define A_PER (BM * BK / NT)
#define B_PER (BK * BN / NT)
#if ((BM * BK) % NT) != 0 || ((BK * BN) % NT) != 0
#error "tile elements must divide evenly over the workgroup"
#endif
#endif

void main() {
    uint g = gl_WorkGroupID.x + (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * gl_NumWorkGroups.x;
    // Uniform over the workgroup: all invocations leave or none (no barrier is skipped).
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
    uint coff = bi * p.m * p.n;
    uint row0 = mt * BM;
    uint col0 = nt * BN;
    uint lid = gl_LocalInvocationIndex;
    uint sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID;
    // This subgroup's corner in the workgroup tile.
    uint wr = (sg / WN) * (TM * 16u);
    uint wc = (sg % WN) * (TN * 16u);

    // One flat array (accumulator (i, j) at i * TN + j): spirv-opt's scalar replacement turns a
    // flat array into TM * TN registers, a nested one it leaves in memory.
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++) {
        acc[i] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    }

#if ALIGNED
    uvec4 ra[A_PER];
    uvec4 rb[B_PER];
#else
    float16_t ra[A_PER];
    float16_t rb[B_PER];
#endif

    uint steps = (p.k + BK - 1u) / BK;
    // K = 0: no step, the accumulators stay 0 and C is written as zeros.

    // Reads K step `s` of A and B into registers, zeros outside M, N, K.
#define FETCH(s)                                                                                  \
    {                                                                                             \
        uint k0 = (s) * BK;                                                                       \
        [[unroll]] for (uint i = 0u; i < A_PER; i++) {                                            \
            FETCH_A(i, lid + i * NT, k0)                                                          \
        }                                                                                         \
        [[unroll]] for (uint i = 0u; i < B_PER; i++) {                                            \
            FETCH_B(i, lid + i * NT, k0)                                                          \
        }                                                                                         \
    }
#if ALIGNED
    // Chunk l of A: row l / (BK/8), halves (l % (BK/8)) * 8 .. +8 along k. K % 8 == 0, so a chunk
    // is wholly inside K or wholly outside; the halves index aoff + gr*K + gk is a multiple of 8
    // (aoff is a multiple of M*K, gk of 8), so /8 is exact and < M*K*batch/8, the buffer's length.
#define FETCH_A(i, l, k0)                                                                         \
    {                                                                                             \
        uint gr = row0 + (l) / (BK / 8u);                                                         \
        uint gk = (k0) + ((l) % (BK / 8u)) * 8u;                                                  \
        ra[i] = (gr < p.m && gk < p.k) ? a8[(aoff + gr * p.k + gk) / 8u] : uvec4(0u);            \
    }
    // Chunk l of B: k-row l / (BN/8), columns (l % (BN/8)) * 8 .. +8; N % 8 == 0 likewise.
#define FETCH_B(i, l, k0)                                                                         \
    {                                                                                             \
        uint gk = (k0) + (l) / (BN / 8u);                                                         \
        uint gc = col0 + ((l) % (BN / 8u)) * 8u;                                                  \
        rb[i] = (gk < p.k && gc < p.n) ? b8[(boff + gk * p.n + gc) / 8u] : uvec4(0u);            \
    }
    // Chunk l goes to row l/(BK/8) (< BM), f16vec4 column 2*(l%(BK/8)) + {0,1} (< BK/4 < SA4).
#define STORE_A(buf, i, l)                                                                        \
    {                                                                                             \
        uint o = (buf) * A_TILE4 + ((l) / (BK / 8u)) * SA4 + ((l) % (BK / 8u)) * 2u;              \
        As[o] = f16vec4(unpackFloat2x16(ra[i].x), unpackFloat2x16(ra[i].y));                      \
        As[o + 1u] = f16vec4(unpackFloat2x16(ra[i].z), unpackFloat2x16(ra[i].w));                 \
    }
    // Row l/(BN/8) (< BK), f16vec4 column 2*(l%(BN/8)) + {0,1} (< BN/4 < SB4).
#define STORE_B(buf, i, l)                                                                        \
    {                                                                                             \
        uint o = (buf) * B_TILE4 + ((l) / (BN / 8u)) * SB4 + ((l) % (BN / 8u)) * 2u;              \
        Bs[o] = f16vec4(unpackFloat2x16(rb[i].x), unpackFloat2x16(rb[i].y));                      \
        Bs[o + 1u] = f16vec4(unpackFloat2x16(rb[i].z), unpackFloat2x16(rb[i].w));                 \
    }
#else
    // Element l of A's tile: row l / BK, k l % BK; each checked against M and K.
#define FETCH_A(i, l, k0)                                                                         \
    {                                                                                             \
        uint gr = row0 + (l) / BK;                                                                \
        uint gk = (k0) + (l) % BK;                                                                \
        ra[i] = (gr < p.m && gk < p.k) ? a1[aoff + gr * p.k + gk] : float16_t(0.0);              \
    }
#define FETCH_B(i, l, k0)                                                                         \
    {                                                                                             \
        uint gk = (k0) + (l) / BN;                                                                \
        uint gc = col0 + (l) % BN;                                                                \
        rb[i] = (gk < p.k && gc < p.n) ? b1[boff + gk * p.n + gc] : float16_t(0.0);              \
    }
    // Row l/BK (< BM), half l%BK (< BK < SA): f16vec4 (l%BK)/4, component (l%BK)%4.
#define STORE_A(buf, i, l)                                                                        \
    {                                                                                             \
        uint o = (buf) * A_TILE4 + ((l) / BK) * SA4 + ((l) % BK) / 4u;                            \
        As[o][((l) % BK) % 4u] = ra[i];                                                           \
    }
#define STORE_B(buf, i, l)                                                                        \
    {                                                                                             \
        uint o = (buf) * B_TILE4 + ((l) / BN) * SB4 + ((l) % BN) / 4u;                            \
        Bs[o][((l) % BN) % 4u] = rb[i];                                                           \
    }
#endif
#define STORE(buf)                                                                                \
    {                                                                                             \
        [[unroll]] for (uint i = 0u; i < A_PER; i++) {                                            \
            STORE_A(buf, i, lid + i * NT)                                                         \
        }                                                                                         \
        [[unroll]] for (uint i = 0u; i < B_PER; i++) {                                            \
            STORE_B(buf, i, lid + i * NT)                                                         \
        }                                                                                         \
    }

#if DOUBLE
    if (steps > 0u) {
        FETCH(0u)
        STORE(0u)
    }
    barrier();
#else
    if (steps > 0u) {
        FETCH(0u)
    }
#endif
    for (uint s = 0u; s < steps; s++) {
        bool more = s + 1u < steps;
#if DOUBLE
        uint cur = s & 1u;
#else
        uint cur = 0u;
        STORE(0u)
        barrier();
#endif
        // Uniform: `more` is the same for every invocation. UNCOND=1 reads past the last step
        // too (every index is then >= K, so the guards give zeros without a memory access): the
        // loads no longer sit behind a branch, for the driver to schedule.
#if UNCOND
        FETCH(s + 1u)
#else
        if (more) {
            FETCH(s + 1u)
        }
#endif
        // The fragments: A rows wr + 16i .. +16 (< BM), k kk .. kk+16 (<= BK); B k-rows kk ..
        // kk+16, columns wc + 16j .. +16 (< BN). Offsets in f16vec4 units, 16-byte aligned.
        [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> fa[TM];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> fb[TN];
            [[unroll]] for (uint i = 0u; i < TM; i++) {
                coopMatLoad(fa[i], As, cur * A_TILE4 + (wr + i * 16u) * SA4 + kk / 4u, SA4,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint j = 0u; j < TN; j++) {
                coopMatLoad(fb[j], Bs, cur * B_TILE4 + kk * SB4 + (wc + j * 16u) / 4u, SB4,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint i = 0u; i < TM; i++) {
                [[unroll]] for (uint j = 0u; j < TN; j++) {
                    acc[i * TN + j] = coopMatMulAdd(fa[i], fb[j], acc[i * TN + j]);
                }
            }
        }
#if DOUBLE
        // The other buffer was last read in step s-1, before the previous barrier.
        if (more) {
            STORE(cur ^ 1u)
        }
#endif
        barrier();
    }

    // The output: f32 accumulators rounded to f16, as the WGSL tier's f16(acc).
#if ALIGNED
    // A whole tile inside M x N stores straight to C: offsets coff + row*N + col are multiples of
    // 8 halves (N % 8 == 0, col a multiple of 16), the 16-byte alignment cooperative stores need.
    bool whole = row0 + BM <= p.m && col0 + BN <= p.n;
#else
    bool whole = false;
#endif
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> h =
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(acc[i * TN + j]);
            uint row = row0 + wr + i * 16u;
            uint col = col0 + wc + j * 16u;
            if (whole) {
                coopMatStore(h, c1, coff + row * p.n + col, p.n, gl_CooperativeMatrixLayoutRowMajor);
            } else {
                // Through this subgroup's own 16x16 scratch (sg < WM*WN), each element checked
                // against M and N; subgroup barriers order the scratch's reuse.
                coopMatStore(h, Cs, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                // 256 / 32 = 8 elements per lane: a constant trip count, so the loops around
                // unroll too and the accumulators stay in registers.
                [[unroll]] for (uint t = 0u; t < 256u / SG; t++) {
                    uint e = lane + t * SG;
                    uint rr = row + e / 16u;
                    uint cc = col + e % 16u;
                    if (rr < p.m && cc < p.n) {
                        c1[coff + rr * p.n + cc] = Cs[sg * 256u + e];
                    }
                }
                subgroupMemoryBarrierShared();
                subgroupBarrier();
            }
        }
    }
}
