// max_pool2d / avg_pool2d over NCHW planes, one thread per output element. Padded taps are
// skipped: they never win the max and add zero to the sum; the average divides by the whole
// window (kh * kw), as PyTorch's count_include_pad=True. Floats are computed in f32.
{{ENABLE}}
{{WINDOW_COMMON}}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.total) {
        return;
    }
    let win = window_of(i);
    let base = win.plane * p.h * p.w;
    let y0 = win.y0;
    let x0 = win.x0;
    var acc = {{ACC}}(0);
    var found = false;
    // A window's rows may be split over dispatches on CPU adapters (p.cbegin, p.cend: the rows
    // [cbegin, cend) here; core/src/loop_budget.rs): a later one goes on from what the previous
    // stored (avg: the raw sum, divided by the last), found where an earlier row was in the
    // image (padding is at most half the kernel, so every such row has a column in it too).
    if (p.cbegin > 0u) {
        acc = {{ACC}}(out[i]);
        found = y0 + i32(p.cbegin) > 0 && y0 < i32(p.h);
    }
    for (var ky = p.cbegin; ky < p.cend; ky++) {
        let iy = y0 + i32(ky);
        if (iy < 0 || iy >= i32(p.h)) {
            continue;
        }
        for (var kx = 0u; kx < p.kw; kx++) {
            let ix = x0 + i32(kx);
            if (ix < 0 || ix >= i32(p.w)) {
                continue;
            }
            let v = {{ACC}}(x[base + u32(iy) * p.w + u32(ix)]);
            {{COMBINE}}
            found = true;
        }
    }
    if (p.cend == p.kh) {
        out[i] = {{T}}({{FINISH}});
    } else {
        out[i] = {{T}}(acc);
    }
}
