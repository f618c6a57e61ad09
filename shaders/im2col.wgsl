// im2col for conv2d through matmul (ops/conv.rs): x [N, C, H, W] ({{T}}) becomes
// cols [N, C*KH*KW, OH*OW], cols[n, (c, ky, kx), (oy, ox)] = x[n, c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw]
// (0 in the padding). Then out[n] = w[O, C*KH*KW] @ cols[n] is already NCHW. One thread per
// element of cols; consecutive threads write consecutive (oy, ox), so stores coalesce.
{{ENABLE}}
{{WINDOW_COMMON}}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> cols: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.total) {
        return;
    }
    let np = p.oh * p.ow;
    let nk = p.c * p.kh * p.kw;
    let win = window_of(t % np);
    let kk = (t / np) % nk;
    let n = t / (np * nk);
    let kx = kk % p.kw;
    let ky = (kk / p.kw) % p.kh;
    let c = kk / (p.kw * p.kh);
    // Signed, so that taps left of or above the image test negative.
    let iy = win.y0 + i32(ky * p.dh);
    let ix = win.x0 + i32(kx * p.dw);
    var v = {{T}}(0);
    if (iy >= 0 && iy < i32(p.h) && ix >= 0 && ix < i32(p.w)) {
        v = x[((n * p.c + c) * p.h + u32(iy)) * p.w + u32(ix)];
    }
    cols[t] = v;
}
