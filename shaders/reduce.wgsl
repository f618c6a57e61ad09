// Reductions (sum, mean, var, max, min, argmax, argmin) over x viewed as [outer, r, inner].
// Two entry points, one of them rendered as `main`:
//  - row: inner == 1, one 256-thread workgroup per row (workgroups spread over x and y),
//    each thread folds the elements j = lid, lid + 256, ... then a fixed tree in workgroup memory;
//  - col: one thread per (outer, inner) column folding j = 0 .. r - 1 in order.
// Long runs with few outputs are split in fixed pieces (`chunk`): each piece writes a partial
// result and a second launch folds the partials, so the GPU has enough threads to stay busy.
// Both orders are fixed, so repeated runs give identical bytes (no atomics). Floats accumulate in
// f32 (f16 data included); integers in their own type, wrapping.
{{ENABLE}}
struct Params {
    rows: u32,     // row kernel: outer * nchunks; col kernel: outer * nchunks * inner
    r: u32,        // length of the reduced run
    inner: u32,
    denom: f32,    // mean: r; var: r - ddof
    chunk: u32,    // the run is folded in pieces of this length (r when not split)
    nchunks: u32,  // pieces per run; each writes one partial result
    pad0: u32,
    pad1: u32,
}

// x is array<T>, or array<vec4<T>> for rows of whole vec4s (then read 16 bytes at a time).
@group(0) @binding(0) var<storage, read> x: array<{{XT}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{O}}>;
@group(0) @binding(2) var<uniform> p: Params;

{{ORDER}}
fn load(k: u32) -> {{A}} {
    return {{A}}({{LOADX}});
}

fn combine(a: Acc, b: Acc) -> Acc {
    {{COMBINE}}
}

// Value v at position j along the run; phase 1 of var squares the deviation from mean.
fn elem_v(v: {{A}}, j: u32, phase: u32, mean: f32) -> Acc {
    {{ELEM}}
}

fn elem(k: u32, j: u32, phase: u32, mean: f32) -> Acc {
    return elem_v(load(k), j, phase, mean);
}

// Starting value of a fold whose first position is j0.
fn init(base: u32, stride: u32, j0: u32) -> Acc {
    {{INIT}}
}

fn result(a: Acc) -> {{O}} {
    {{RESULT}}
}

var<workgroup> sh: array<Acc, 256>;

fn row_pass(lid: u32, base: u32, len: u32, phase: u32, mean: f32) -> Acc {
    var acc = init(base, 1u, lid % len);
{{ROW_LOOP}}
    sh[lid] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            sh[lid] = combine(sh[lid], sh[lid + s]);
        }
        workgroupBarrier();
    }
    let total = sh[0];
    workgroupBarrier();
    return total;
}

// Four loads in flight per step (a dependent chain of single loads leaves the GPU waiting on
// memory); the fold order is still j = 0, 1, 2, ...
fn col_pass(base: u32, stride: u32, len: u32, phase: u32, mean: f32) -> Acc {
    var acc = init(base, stride, 0u);
    var j = 0u;
    for (; j + 4u <= len; j += 4u) {
        let e0 = elem(base + j * stride, j, phase, mean);
        let e1 = elem(base + (j + 1u) * stride, j + 1u, phase, mean);
        let e2 = elem(base + (j + 2u) * stride, j + 2u, phase, mean);
        let e3 = elem(base + (j + 3u) * stride, j + 3u, phase, mean);
        acc = combine(combine(combine(combine(acc, e0), e1), e2), e3);
    }
    for (; j < len; j++) {
        acc = combine(acc, elem(base + j * stride, j, phase, mean));
    }
    return acc;
}

@compute @workgroup_size(256)
fn {{ROW_ENTRY}}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * nwg.x;
    if (g >= p.rows) {
        return;
    }
    let start = (g % p.nchunks) * p.chunk;
    let len = min(p.chunk, p.r - start);
    let base = (g / p.nchunks) * p.r + start;
{{ROW_BODY}}
    // Positions are within the piece: a split arg reduction's partial is the run's position.
    if (lid == 0u) {
        out[g] = result(Acc(a.v, a.i + start));
    }
}

@compute @workgroup_size(256)
fn {{COL_ENTRY}}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.rows) {
        return;
    }
    let q = t / p.inner;
    let start = (q % p.nchunks) * p.chunk;
    let len = min(p.chunk, p.r - start);
    let base = ((q / p.nchunks) * p.r + start) * p.inner + t % p.inner;
    let stride = p.inner;
{{COL_BODY}}
    out[t] = result(Acc(a.v, a.i + start));
}
