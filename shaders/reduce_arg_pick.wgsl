// Stage 2 of a split argmax/argmin (core/src/ops/reduce.rs): stage 1 wrote, for every piece of
// every run, the position of its winner along the run (reduce.wgsl, [outer, pieces, inner]
// i32). One 256-thread workgroup per output reads those positions' values back from x and
// keeps the winner by the same order as stage 1 (`takes`: NaN, then the larger or smaller value,
// then the lower position). `takes` is a total order on distinct positions, so the fold order
// cannot change the result: identical to the unsplit kernel's.
{{ENABLE}}
struct Params {
    outputs: u32,  // outer * inner
    r: u32,        // length of the reduced run
    inner: u32,
    pieces: u32,   // partial positions per output
}

@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read> part: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<i32>;
@group(0) @binding(3) var<uniform> p: Params;

{{ORDER}}
fn candidate(o: u32, i: u32, piece: u32) -> Acc {
    let j = u32(part[(o * p.pieces + piece) * p.inner + i]);
    return Acc({{A}}(x[(o * p.r + j) * p.inner + i]), j);
}

var<workgroup> sh: array<Acc, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= p.outputs) {
        return;
    }
    let o = t / p.inner;
    let i = t % p.inner;
    var acc = candidate(o, i, lid % p.pieces);
    for (var c = lid + 256u; c < p.pieces; c += 256u) {
        let b = candidate(o, i, c);
        if (takes(acc, b)) {
            acc = b;
        }
    }
    sh[lid] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s && takes(sh[lid], sh[lid + s])) {
            sh[lid] = sh[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        out[t] = i32(sh[0].i);
    }
}
