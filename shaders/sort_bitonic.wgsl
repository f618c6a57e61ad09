// Sort, step 2: a bitonic sorting network over rows of P (key, index) pairs (P a power of two),
// all rows at once. Stage (k, j) compares elements i and i + j (i & j == 0) and orders them
// ascending where (position in row & k) == 0, descending elsewhere; at k == P every pair is
// ascending, so each row ends sorted. Pairs are unique (the index breaks ties), which makes the
// unstable network give the stable order, the same bytes on every device.
// Two entry points, one rendered as `main`:
//  - step: one stage with j >= 256, one thread per compared pair, over global memory;
//  - block: 512 consecutive pairs in workgroup memory run every stage with j < 512 for
//    k = k_lo, 2 k_lo, ..., k_hi (the whole sort of rows up to 512 long in one dispatch, or
//    the tail of one merge of a longer row), starting each k at j = min(k / 2, 256).
struct Params {
    total: u32, // rows * P
    p2: u32,    // P
    k: u32,     // step: the stage's k; block: k_lo
    j: u32,     // step: the stage's j; block: k_hi
    pad0: u32,
    pad1: u32,
    pad2: u32,
    pad3: u32,
}

@group(0) @binding(0) var<storage, read_write> pairs: array<vec2<u32>>;
@group(0) @binding(1) var<uniform> p: Params;

var<workgroup> tile: array<vec2<u32>, 512>;

fn greater(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x > b.x || (a.x == b.x && a.y > b.y);
}

@compute @workgroup_size(256)
fn {{STEP_ENTRY}}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.total / 2u) {
        return;
    }
    let j = p.j;
    let i = ((t & ~(j - 1u)) << 1u) | (t & (j - 1u));
    let l = i | j;
    let asc = ((i & (p.p2 - 1u)) & p.k) == 0u;
    let a = pairs[i];
    let b = pairs[l];
    if (greater(a, b) == asc) {
        pairs[i] = b;
        pairs[l] = a;
    }
}

@compute @workgroup_size(256)
fn {{BLOCK_ENTRY}}(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let base = (wid.x + wid.y * nwg.x) * 512u;
    if (base >= p.total) {
        return;
    }
    for (var h = 0u; h < 2u; h += 1u) {
        let g = base + lid + 256u * h;
        if (g < p.total) {
            tile[lid + 256u * h] = pairs[g];
        } else {
            tile[lid + 256u * h] = vec2<u32>(0xffffffffu, 0xffffffffu);
        }
    }
    for (var k = p.k; k <= p.j; k <<= 1u) {
        for (var j = min(k >> 1u, 256u); j > 0u; j >>= 1u) {
            workgroupBarrier();
            let i = ((lid & ~(j - 1u)) << 1u) | (lid & (j - 1u));
            let l = i | j;
            let asc = (((base + i) & (p.p2 - 1u)) & k) == 0u;
            let a = tile[i];
            let b = tile[l];
            if (greater(a, b) == asc) {
                tile[i] = b;
                tile[l] = a;
            }
        }
    }
    workgroupBarrier();
    for (var h = 0u; h < 2u; h += 1u) {
        let g = base + lid + 256u * h;
        if (g < p.total) {
            pairs[g] = tile[lid + 256u * h];
        }
    }
}
