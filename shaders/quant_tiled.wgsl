// y[m, n] = sum_k x[m, k] * W[n, k] for many rows of x (prefill): W quantized [N, K]. A
// workgroup owns a 64 x 64 tile of y; per block of K (32 values) its 256 threads stage 64 rows
// of x and 64 decoded W rows (one unit each) in workgroup memory, then each thread accumulates
// a 4 x 4 sub-tile (rows ty + 16i, columns tx + 16j). Every W block is decoded once per 64 rows
// of x. Accumulates in f32, in the same order for every element. With RES the residual r
// [m, n] is added to the rounded product as ops::add would (one dispatch, not two).
struct Params {
    m: u32,
    n: u32,
    k: u32,
    blocks: u32,
    row_h: u32,
    tiles_n: u32,  // workgroups along n
    // The blocks of K this dispatch sums, [bbegin, bend): all of them except on CPU adapters,
    // where many are split over dispatches (core/src/loop_budget.rs: llvmpipe's loop limiter),
    // each after the first going on from the f32 sums the previous one stored in out (and only
    // the last adding the residual).
    bbegin: u32,
    bend: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<storage, read> r: array<{{T}}>;
@group(0) @binding(4) var<uniform> p: Params;

const RES: bool = {{RES}};

const TS: u32 = 64u;
const LD: u32 = 33u;  // padded row stride of the staged tiles

var<workgroup> xs: array<f32, 2112>;  // TS * LD
var<workgroup> ws: array<f32, 2112>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let tile = wg.x + wg.y * nwg.x;
    let n0 = (tile % p.tiles_n) * TS;
    let m0 = (tile / p.tiles_n) * TS;
    let tx = li % 16u;
    let ty = li / 16u;
    // What this thread stages: row li / 4 of each tile, values (li % 4) * 8 .. + 8 of x and
    // unit li % 4 of W's block.
    let sr = li / 4u;
    let sq = li % 4u;
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) {
        acc[i] = 0.0;
    }
    if (p.bbegin > 0u) {
        for (var i = 0u; i < 4u; i++) {
            let m = m0 + ty + 16u * i;
            for (var j = 0u; j < 4u; j++) {
                let n = n0 + tx + 16u * j;
                if (m < p.m && n < p.n) {
                    acc[i * 4u + j] = f32(out[m * p.n + n]);
                }
            }
        }
    }
    for (var b = p.bbegin; b < p.bend; b++) {
        let xm = m0 + sr;
        for (var i = 0u; i < 8u; i++) {
            var v = 0.0;
            if (xm < p.m) {
                v = f32(x[xm * p.k + b * 32u + sq * 8u + i]);
            }
            xs[sr * LD + sq * 8u + i] = v;
        }
        let wn = n0 + sr;
        if (wn < p.n) {
            let un = decode_at(wn * p.row_h, b, sq);
            for (var i = 0u; i < 4u; i++) {
                ws[sr * LD + un.pa + i] = un.a[i];
                ws[sr * LD + un.pb + i] = un.b[i];
            }
        } else {
            for (var i = 0u; i < 8u; i++) {
                ws[sr * LD + sq * 8u + i] = 0.0;
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 32u; kk++) {
            var a: array<f32, 4>;
            var c: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                a[i] = xs[(ty + 16u * i) * LD + kk];
                c[i] = ws[(tx + 16u * i) * LD + kk];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i * 4u + j] += a[i] * c[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let m = m0 + ty + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + tx + 16u * j;
            if (m < p.m && n < p.n) {
                let y = {{T}}(acc[i * 4u + j]);
                if (RES && p.bend == p.blocks) {
                    out[m * p.n + n] = {{T}}(f32(y) + f32(r[m * p.n + n]));
                } else {
                    out[m * p.n + n] = y;
                }
            }
        }
    }
}
