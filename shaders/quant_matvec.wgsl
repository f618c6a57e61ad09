// y[m, n] = sum_k x[m, k] * W[n, k] for few rows of x (decode): W quantized [N, K] (rows of
// K/32 blocks). TPR threads share one W row, striding over its units (8 values each) so that
// neighbouring threads read neighbouring words; a workgroup does 256 / TPR W rows for MT rows of
// x at once (each W unit decoded once, used MT times), then sums each row's TPR partial sums in
// workgroup memory in a fixed order (deterministic). Accumulates in f32.
struct Params {
    m: u32,       // rows of x
    n: u32,       // rows of W (outputs per x row)
    k: u32,       // values per row
    blocks: u32,  // k / 32
    row_h: u32,   // halfwords per W row
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
// x read four values at a time: rows start at multiples of K (a multiple of 32) and the values
// a unit pairs with start at multiples of 4.
@group(0) @binding(1) var<storage, read> x: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<uniform> p: Params;

const TPR: u32 = {{TPR}}u;
const RPW: u32 = 256u / TPR;
const MT: u32 = {{MT}}u;

var<workgroup> red: array<f32, {{RED}}>;

fn x4(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i >> 2u]);
}

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let lane = li % TPR;
    let slot = li / TPR;
    let n = (wg.x + wg.y * nwg.x) * RPW + slot;
    let m0 = wg.z * MT;
    var acc: array<f32, MT>;
    for (var r = 0u; r < MT; r++) {
        acc[r] = 0.0;
    }
    if (n < p.n) {
        let units = p.blocks * UPB;
        let hrow = n * p.row_h;
        for (var t = lane; t < units; t += TPR) {
            let b = t / UPB;
            let un = decode(hrow + b * BLOCK_H, t % UPB);
            let kb = b * 32u;
            for (var r = 0u; r < MT; r++) {
                if (m0 + r < p.m) {
                    let xo = (m0 + r) * p.k + kb;
                    acc[r] += dot(un.a, x4(xo + un.pa)) + dot(un.b, x4(xo + un.pb));
                }
            }
        }
    }
    for (var r = 0u; r < MT; r++) {
        red[r * 256u + li] = acc[r];
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var r = 0u; r < MT; r++) {
                red[r * 256u + li] += red[r * 256u + li + s];
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u && n < p.n) {
        for (var r = 0u; r < MT; r++) {
            if (m0 + r < p.m) {
                out[(m0 + r) * p.n + n] = {{T}}(red[r * 256u + li]);
            }
        }
    }
}
