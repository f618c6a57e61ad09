// Depthwise conv2d (one input channel per group, ops/conv/depthwise.rs), floats: each workgroup
// computes a TH x TW tile of one output plane. The input window that tile reads is copied into
// workgroup memory once (zeros in the padding), so each input element is read from global
// memory about once instead of KH * KW times; then each thread computes TH / 8 outputs of one
// column from the window. Accumulates in f32. Every global index is guarded and the window's
// indices are in range by construction (WH x WW covers every tap of the tile).
{{ENABLE}}

struct Params {
    groups: u32,   // workgroups: planes * tiles_y * tiles_x
    tiles_x: u32,
    tiles_y: u32,
    c: u32,
    h: u32,
    w: u32,
    o: u32,
    oh: u32,
    ow: u32,
    kh: u32,
    kw: u32,
    sh: u32,
    sw: u32,
    ph: u32,
    pw: u32,
    dh: u32,
    dw: u32,
    og: u32,       // output channels per group (the depth multiplier)
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read> wt: array<{{T}}>;
{{BIAS_DECL}}
@group(0) @binding({{OUT}}) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

const TW = 32u;
const TH = {{TH}}u;
const ROWS = TH / 8u; // outputs per thread, 8 rows of threads apart
// The geometry is baked into each pipeline, so the tap loops unroll with constant offsets.
const KH = {{KH}}u;
const KW = {{KW}}u;
const SH = {{SH}}u;
const SW = {{SW}}u;
const WW = {{WW}}u;
const WH = {{WH}}u;

var<workgroup> win: array<f32, {{WIN_LEN}}>;

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = wid.x + (wid.y + wid.z * nwg.y) * nwg.x;
    if (g >= p.groups) {
        return;
    }
    let tx = g % p.tiles_x;
    let rest = g / p.tiles_x;
    let ty = rest % p.tiles_y;
    let plane = rest / p.tiles_y;
    let oc = plane % p.o;
    let ni = plane / p.o;
    let xbase = (ni * p.c + oc / p.og) * p.h * p.w;
    // The window's corner in the input (negative in the padding).
    let y0 = i32(ty * TH * SH) - i32(p.ph);
    let x0 = i32(tx * TW * SW) - i32(p.pw);
    for (var i = lid; i < WH * WW; i += 256u) {
        let r = i / WW;
        let iy = y0 + i32(r);
        let ix = x0 + i32(i - r * WW);
        var v = 0.0;
        if (u32(iy) < p.h && u32(ix) < p.w) {
            v = f32(x[xbase + u32(iy) * p.w + u32(ix)]);
        }
        win[i] = v;
    }
    workgroupBarrier();
    let cx = lid % TW;
    let cy = lid / TW;
    let ox = tx * TW + cx;
    let wbase = oc * KH * KW;
    // Unrolled over the kernel taps and this thread's rows (ops/conv/depthwise.rs).
{{TAPS}}
{{STORE}}}
