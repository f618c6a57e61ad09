// conv2d, NCHW, direct: one thread per output element out[n, o, oy, ox] =
//   bias[o] + sum over c in o's group, ky, kx of x[n, c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw] * w[o, c, ky, kx]
// Taps that fall in the padding are skipped (zero padding). Floats accumulate in f32 (f16 data
// widened on load), integers in their own type (wrapping).
{{ENABLE}}
{{WINDOW_COMMON}}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read> wt: array<{{T}}>;
{{BIAS_DECL}}
@group(0) @binding({{OUT}}) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.total) {
        return;
    }
    let win = window_of(i);
    let oc = win.plane % p.o;
    let ni = win.plane / p.o;
    let g = oc / p.og;
    var acc = {{BIAS_INIT}};
    if (p.cbegin > 0u) {
        acc = {{ACC}}(out[i]);
    }
    let y0 = win.y0;
    let x0 = win.x0;
    for (var ci = p.cbegin; ci < p.cend; ci++) {
        let xbase = (ni * p.c + g * p.cg + ci) * p.h * p.w;
        let wbase = (oc * p.cg + ci) * p.kh * p.kw;
        for (var ky = 0u; ky < p.kh; ky++) {
            let iy = y0 + i32(ky * p.dh);
            if (iy < 0 || iy >= i32(p.h)) {
                continue;
            }
            for (var kx = 0u; kx < p.kw; kx++) {
                let ix = x0 + i32(kx * p.dw);
                if (ix < 0 || ix >= i32(p.w)) {
                    continue;
                }
                acc += {{ACC}}(x[xbase + u32(iy) * p.w + u32(ix)]) * {{ACC}}(wt[wbase + ky * p.kw + kx]);
            }
        }
    }
    out[i] = {{T}}(acc);
}
