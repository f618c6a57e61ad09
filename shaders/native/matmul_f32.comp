// Native-tier f32 matmul (core/src/ops/matmul/native.rs): C[b] = A[b] @ B[b] in f32 on the FMA
// units, the WGSL tier's tiled kernel (shaders/matmul.wgsl, 128x128 tiles, 8x8 per invocation)
// without naga: each output is the same sequence of fma(a, b, acc) over k = 0 .. K-1, so the
// bytes equal the WGSL tier's; what changes is the schedule: the next K step's tiles are read
// from global memory into registers while the products of this step run on the other of two
// workgroup-memory buffers (one barrier per step), and no index carries a runtime bounds check.
//
// This module bypasses naga (wgpu's passthrough shaders): there are no runtime bounds checks but
// the ones written here. Every global read is guarded by the problem's sizes (rows past M,
// columns past N and k past K read 0); every store by M and N; every workgroup-memory index is
// in range by construction (reasoned at each access). Only Kiln's own kernels run this way.
//
// Needs K and N multiples of 4 (every row and batch offset of A, B and C is then 16-byte
// aligned, and a vec4 along k or n lies wholly inside or wholly outside the matrix); the caller
// checks that (`matmul`'s choice). Variant defines: BK (k per step).
#version 450
#extension GL_EXT_control_flow_attributes : require

#define NT 256
#define BM 128
#define BN 128
// Rows of the transposed A tile are padded by 4 floats: the transposing stores of one warp then
// fall on two banks' worth of conflicts instead of four, and rows stay 16-byte aligned.
#define SA (BM + 4)
#define A_TILE (BK * SA)
#define B_TILE (BK * BN)
// vec4 chunks per tile and per invocation.
#define A_PER (BM * BK / 4 / NT)
#define B_PER (BK * BN / 4 / NT)
#if (BM * BK / 4) % NT != 0 || (BK * BN / 4) % NT != 0
#error "tile chunks must divide evenly over the workgroup"
#endif

layout(local_size_x = NT, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C4 { vec4 c4[]; };

// shaders/matmul_common.wgsl's Params (its leading fields, byte for byte; std140 arrays of
// uvec4 have stride 16). The fields after `dims` (the CPU adapters' K range) are not read: this
// tier never runs a split K.
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

shared float As[2 * A_TILE];  // [2][BK][SA]: A's tile transposed (k-major)
shared vec4 Bs[2 * B_TILE / 4];  // [2][BK][BN / 4]

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
    // Element offsets, multiples of 4 (K and N are): vec4 indices below.
    uint coff = bi * p.m * p.n;
    uint row0 = mt * BM;
    uint col0 = nt * BN;
    uint lid = gl_LocalInvocationIndex;
    // This invocation's 8x8 block: rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, columns likewise
    // with tx (two 4-wide halves 64 apart, so a warp's vec4 reads of a tile row are contiguous).
    uint tx = lid % 16u;
    uint ty = lid / 16u;
    uint k4s = p.k / 4u;
    uint n4s = p.n / 4u;

    vec4 acc[16];  // [row 0..7][half 0..1]
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        acc[i] = vec4(0.0);
    }

    // A chunk c (0 .. BM * BK / 4): row c / (BK / 4), k4 c % (BK / 4). B chunk c: k c / (BN / 4),
    // n4 c % (BN / 4).
    vec4 ra[A_PER];
    vec4 rb[B_PER];
    uint steps = (p.k + BK - 1u) / BK;

    // Reads step s's tiles into registers (0 outside the matrices).
#define READ(s)                                                                                  \
    [[unroll]] for (uint i = 0u; i < A_PER; i++) {                                               \
        uint c = lid + i * NT;                                                                   \
        uint row = row0 + c / (BK / 4u);                                                         \
        uint k4 = (s) * (BK / 4u) + c % (BK / 4u);                                               \
        ra[i] = (row < p.m && k4 < k4s) ? a4[aoff / 4u + row * k4s + k4] : vec4(0.0);            \
    }                                                                                            \
    [[unroll]] for (uint i = 0u; i < B_PER; i++) {                                               \
        uint c = lid + i * NT;                                                                   \
        uint kk = (s) * BK + c / (BN / 4u);                                                      \
        uint n4 = col0 / 4u + c % (BN / 4u);                                                     \
        rb[i] = (kk < p.k && n4 < n4s) ? b4[boff / 4u + kk * n4s + n4] : vec4(0.0);              \
    }

    // Stores the registers into buffer `buf`. As: [k][row] with k = 4 (c % (BK/4)) + lane <
    // BK, row = c / (BK/4) < BM; Bs: [k][n4] with k < BK, n4 < BN/4: in range.
#define STORE(buf)                                                                               \
    [[unroll]] for (uint i = 0u; i < A_PER; i++) {                                               \
        uint c = lid + i * NT;                                                                   \
        uint row = c / (BK / 4u);                                                                \
        uint k0 = 4u * (c % (BK / 4u));                                                          \
        As[(buf) * A_TILE + (k0 + 0u) * SA + row] = ra[i].x;                                     \
        As[(buf) * A_TILE + (k0 + 1u) * SA + row] = ra[i].y;                                     \
        As[(buf) * A_TILE + (k0 + 2u) * SA + row] = ra[i].z;                                     \
        As[(buf) * A_TILE + (k0 + 3u) * SA + row] = ra[i].w;                                     \
    }                                                                                            \
    [[unroll]] for (uint i = 0u; i < B_PER; i++) {                                               \
        uint c = lid + i * NT;                                                                   \
        Bs[(buf) * (B_TILE / 4u) + c] = rb[i];                                                   \
    }

    READ(0u)
    STORE(0u)
    barrier();
    for (uint s = 0u; s < steps; s++) {
        uint cur = s & 1u;
        bool more = s + 1u < steps;
        if (more) {
            READ(s + 1u)
        }
        // Products of this step: a's 8 rows (two vec4 of the transposed tile, at ty*4 and
        // 64 + ty*4 < BM), b's 8 columns (two vec4 at tx and 16 + tx < BN/4).
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            uint ab = cur * A_TILE + kk * SA;
            vec4 a0 = vec4(As[ab + ty * 4u], As[ab + ty * 4u + 1u], As[ab + ty * 4u + 2u], As[ab + ty * 4u + 3u]);
            vec4 a1 = vec4(As[ab + 64u + ty * 4u], As[ab + 64u + ty * 4u + 1u], As[ab + 64u + ty * 4u + 2u],
                           As[ab + 64u + ty * 4u + 3u]);
            uint bb = cur * (B_TILE / 4u) + kk * (BN / 4u);
            vec4 b0 = Bs[bb + tx];
            vec4 b1 = Bs[bb + 16u + tx];
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                acc[2u * i] = fma(vec4(a0[i]), b0, acc[2u * i]);
                acc[2u * i + 1u] = fma(vec4(a0[i]), b1, acc[2u * i + 1u]);
                acc[8u + 2u * i] = fma(vec4(a1[i]), b0, acc[8u + 2u * i]);
                acc[8u + 2u * i + 1u] = fma(vec4(a1[i]), b1, acc[8u + 2u * i + 1u]);
            }
        }
        if (more) {
            // The other buffer was last read in step s - 1, before that step's barrier.
            STORE(cur ^ 1u)
        }
        barrier();
    }

    // Rows row0 + {ty*4 + i, 64 + ty*4 + i}, vec4 columns col0/4 + {tx, 16 + tx}: a vec4 lies
    // wholly inside N or wholly outside (N % 4 == 0).
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint row = row0 + (i < 4u ? ty * 4u + i : 64u + ty * 4u + (i - 4u));
        if (row < p.m) {
            uint n4a = col0 / 4u + tx;
            uint n4b = col0 / 4u + 16u + tx;
            if (n4a < n4s) {
                c4[coff / 4u + row * n4s + n4a] = acc[2u * i];
            }
            if (n4b < n4s) {
                c4[coff / 4u + row * n4s + n4b] = acc[2u * i + 1u];
            }
        }
    }
}
