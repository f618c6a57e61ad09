// The parameter block of the three flash kernels (flash_attention, _blocked, _coop), rendered
// into each as FLASH_PARAMS; built by `Geometry::flash_params` (core/src/ops/attention/geometry.rs).
struct Params {
    lq: u32,
    lk: u32,
    d: u32,
    dv: u32,
    nqb: u32,      // query blocks per batch entry
    blocks: u32,   // batch * nqb
    causal: u32,
    scale2: f32,   // scale * log2(e)
    msq: u32,      // mask stride over queries (0 when broadcast)
    msk: u32,      // mask stride over keys
    brank: u32,
    pad0: u32,
    bshape: array<vec4<u32>, 2>,
    qstride: array<vec4<u32>, 2>,
    kstride: array<vec4<u32>, 2>,
    vstride: array<vec4<u32>, 2>,
    mstride: array<vec4<u32>, 2>,
}
