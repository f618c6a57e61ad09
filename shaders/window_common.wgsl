// Shared by conv.wgsl and pool.wgsl (rendered into each as WINDOW_COMMON); the
// parameter block is built by `Geometry::params` in ops/conv/mod.rs.
struct Params {
    total: u32,
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
    cg: u32,   // input channels per group
    og: u32,   // output channels per group
    // conv.wgsl: the input channels of the group this dispatch sums, [cbegin, cend); pool.wgsl:
    // the window rows it folds. All of them except on CPU adapters, where many are split over
    // dispatches (core/src/loop_budget.rs: llvmpipe's loop limiter), each after the first going
    // on from what the previous stored in out.
    cbegin: u32,
    cend: u32,
}

// Output position i of a window op over [planes, OH, OW]: its column, row and plane, and where
// its window starts in the unpadded input (negative left of or above the image).
struct Window {
    ox: u32,
    oy: u32,
    plane: u32,
    x0: i32,
    y0: i32,
}

fn window_of(i: u32) -> Window {
    let ox = i % p.ow;
    let t = i / p.ow;
    let oy = t % p.oh;
    return Window(ox, oy, t / p.oh, i32(ox * p.sw) - i32(p.pw), i32(oy * p.sh) - i32(p.ph));
}
