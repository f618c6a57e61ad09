// Shared by matmul.wgsl and matmul_coop.wgsl (rendered into both as MATMUL_COMMON).
struct Params {
    m: u32,
    n: u32,
    k: u32,
    groups: u32,   // ntiles * mtiles * batch
    ntiles: u32,
    mtiles: u32,
    brank: u32,    // number of broadcast batch dimensions (<= 6)
    pad: u32,
    bshape: array<vec4<u32>, 2>,   // broadcast batch shape
    astride: array<vec4<u32>, 2>,  // element stride of A per batch dimension (0 = broadcast)
    bstride: array<vec4<u32>, 2>,
    // The k range this dispatch sums, [kbegin, kend): all of K except on CPU adapters, where a
    // long K is split over dispatches (core/src/loop_budget.rs: llvmpipe's loop limiter), each
    // after the first starting from the partial sums the previous one stored in C.
    kbegin: u32,
    kend: u32,
    pad1: u32,
    pad2: u32,
}

// The output tile workgroup g computes (n-tile fastest, then m-tile, then batch) and where its
// batch's A, B and C start (A and B through the broadcast strides).
struct Tile {
    nt: u32,
    mt: u32,
    aoff: u32,
    boff: u32,
    coff: u32,
}

fn tile_of(g: u32) -> Tile {
    let nt = g % p.ntiles;
    let rest = g / p.ntiles;
    let mt = rest % p.mtiles;
    let bi = rest / p.mtiles;
    var aoff = 0u;
    var boff = 0u;
    var r = bi;
    for (var i = 0u; i < p.brank; i++) {
        let d = p.brank - 1u - i;
        let q = d / 4u;
        let s = d % 4u;
        let ci = r % p.bshape[q][s];
        r = r / p.bshape[q][s];
        aoff += ci * p.astride[q][s];
        boff += ci * p.bstride[q][s];
    }
    return Tile(nt, mt, aoff, boff, bi * p.m * p.n);
}
