// Shared by conv_gemm.wgsl and conv_coop.wgsl (rendered into both as GEMM_COMMON): conv2d as an
// implicit GEMM per group, out[g] [M = O/groups, N = batch * OH * OW] = w[g] [M, K] @ patches
// [K = C/groups * KH * KW, N], where the patch matrix is never stored: each workgroup gathers
// its [BK, BN] slice straight from x. The parameter block is built in ops/conv/gemm.rs.
struct Params {
    m: u32,        // output channels per group
    n: u32,        // batch * OH * OW
    k: u32,        // input channels per group * KH * KW
    groups: u32,   // workgroups: ntiles * mtiles * conv groups
    ntiles: u32,
    mtiles: u32,
    ohw: u32,
    ow: u32,
    h: u32,
    w: u32,
    sh: u32,
    sw: u32,
    ph: u32,
    pw: u32,
    chw: u32,      // one image of x
    cghw: u32,     // one group's input channels of one image
    o: u32,
    hw: u32,       // one channel of x
    khw: u32,      // one input channel's taps in a weight row
}

// The tile workgroup g computes: n-tile fastest, then m-tile, then conv group (so that the
// workgroups sharing an input slice run together).
struct Tile {
    nt: u32,
    mt: u32,
    grp: u32,
}

fn tile_of(g: u32) -> Tile {
    let nt = g % p.ntiles;
    let rest = g / p.ntiles;
    return Tile(nt, rest % p.mtiles, rest / p.mtiles);
}

// Where column `col` (one output pixel of one image) reads x: `base` is the offset of its
// window's corner in its image and group (u32 arithmetic wraps; it is only used, plus a tap's
// offset, where the tap lies inside the image, so the sum is exact), and the corner itself
// (negative in the padding). `ok` is false past N.
struct Column {
    base: u32,
    iy0: i32,
    ix0: i32,
    ok: bool,
}

fn column_of(col: u32, grp: u32) -> Column {
    if (col >= p.n) {
        return Column(0u, 0, 0, false);
    }
    let b = col / p.ohw;
    let pix = col - b * p.ohw;
    let oy = pix / p.ow;
    let ox = pix - oy * p.ow;
    let iy0 = i32(oy * p.sh) - i32(p.ph);
    let ix0 = i32(ox * p.sw) - i32(p.pw);
    return Column(b * p.chw + grp * p.cghw + u32(iy0) * p.w + u32(ix0), iy0, ix0, true);
}

// The offset of column `col` in the NCHW output, less its channel's `oc * OH * OW`; 0xffffffff
// past N.
fn out_col(col: u32) -> u32 {
    if (col >= p.n) {
        return 0xffffffffu;
    }
    let b = col / p.ohw;
    return b * p.o * p.ohw + (col - b * p.ohw);
}

// Patch element (gk, column) of the B tile: taps[gk] = (offset of the tap from the window's
// corner, dy, dx, 0), precomputed on the host so the kernel divides by no runtime sizes; 0 in
// the padding and past K or N.
fn patch_at(gk: u32, col: Column) -> {{T}} {
    var v = {{T}}(0);
    if (col.ok && gk < p.k) {
        let t = taps[gk];
        let iy = col.iy0 + i32(t.y);
        let ix = col.ix0 + i32(t.z);
        if (u32(iy) < p.h && u32(ix) < p.w) {
            v = x[col.base + t.x];
        }
    }
    return v;
}

// With K ordered (ky, kx, c), c fastest (ops/conv/gemm.rs picks it where a group's input
// channels are a multiple of BK), one K step of BK shares one tap: taps[k0 / BK] = (offset of the
// step's first channel at that tap from the window's corner, dy, dx, offset of (first channel,
// tap) in a weight row). The tap offset and the padding check are then uniform per step, and
// element kk of the step is one load at base + kk * H * W (weights: woff + kk * KH * KW).
struct Step {
    base: u32,
    woff: u32,
    ok: bool,
}

fn step_of(k0: u32, col: Column) -> Step {
    let t = taps[k0 / BK];
    let iy = col.iy0 + i32(t.y);
    let ix = col.ix0 + i32(t.z);
    return Step(col.base + t.x, t.w, col.ok && k0 < p.k && u32(iy) < p.h && u32(ix) < p.w);
}

// Patch element kk of step `s` (0 in the padding and past N and K).
fn patch_step(s: Step, kk: u32) -> {{T}} {
    var v = {{T}}(0);
    if (s.ok) {
        v = x[s.base + kk * p.hw];
    }
    return v;
}
