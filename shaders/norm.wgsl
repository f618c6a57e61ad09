// softmax, log_softmax, layer_norm and rms_norm over x viewed as [outer, r, inner]; the
// normalised run has length r. Two entry points, one of them rendered as `main`:
//  - row: inner == 1, one 256-thread workgroup per row (workgroups spread over x and y), the
//    statistics folded per thread then by a fixed tree in workgroup memory;
//  - col: one thread per (outer, inner) column walking the run in order.
// Everything is computed in f32 (f16 data included) and rounded once on store.
{{ENABLE}}
struct Params {
    rows: u32,   // row kernel: outer; col kernel: outer * inner
    r: u32,
    inner: u32,
    eps: f32,
}

// x (and out) are array<vec4<f32>> for f32 rows of whole vec4s: 16-byte loads and stores.
@group(0) @binding(0) var<storage, read> x: array<{{XT}}>;
{{BINDINGS}}

fn ld(k: u32) -> f32 {
    return f32({{LDX}});
}

fn wt(j: u32) -> f32 {
    {{WT}}
}

fn bs(j: u32) -> f32 {
    {{BS}}
}

// The arithmetic order below is the one written, on every device: WGSL lets a compiler
// reassociate and fuse float operations (the spec's "Reassociation and Fusion"), and Mesa's
// lavapipe did reorder a vec4's ((t0 + t1) + (t2 + t3)) into ((t0 + (t2 + t3)) + t1) where
// SwiftShader keeps it, so layer_norm / rms_norm on rows of whole vec4s differed in the last bits
// between them. Every product that an addition takes and every partial sum goes through
// k_keep (a select no compiler can decide): no fma, no reordering. core/tests/norm.rs checks
// the bits against a host emulation of this order.

// What a statistic folds: 0 x, 1 (x - a)^2, 2 exp(x - a), 3 x^2.
fn term(kind: u32, v: f32, a: f32) -> f32 {
    switch kind {
        case 1u: {
            let d = v - a;
            return k_keep(d * d);
        }
        case 2u: {
            return k_exp(v - a);
        }
        case 3u: {
            return k_keep(v * v);
        }
        default: {
            return v;
        }
    }
}

// Final value of element v at position j given the statistics s1, s2.
fn final_value(v: f32, s1: f32, s2: f32, j: u32) -> f32 {
    {{FINAL}}
}

var<workgroup> sh: array<f32, 256>;

// The workgroup's 256 partial results folded by a fixed tree (the same order on every device).
fn tree_sum(lid: u32, acc: f32) -> f32 {
    sh[lid] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            sh[lid] = sh[lid] + sh[lid + s];
        }
        workgroupBarrier();
    }
    let total = sh[0];
    workgroupBarrier();
    return total;
}

fn tree_max(lid: u32, acc: f32) -> f32 {
    sh[lid] = acc;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            sh[lid] = max(sh[lid], sh[lid + s]);
        }
        workgroupBarrier();
    }
    let total = sh[0];
    workgroupBarrier();
    return total;
}

// A vec4's four terms summed as ((x + y) + (z + w)), in that order on every device.
fn sum4(t: vec4<f32>) -> f32 {
    return k_keep(k_keep(t.x + t.y) + k_keep(t.z + t.w));
}

// e^v per lane (softmax's rows kept in registers).
fn exp4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(k_exp(v.x), k_exp(v.y), k_exp(v.z), k_exp(v.w));
}

fn row_sum(lid: u32, base: u32, kind: u32, a: f32) -> f32 {
    var acc = 0.0;
{{ROW_SUM_LOOP}}
    return tree_sum(lid, acc);
}

fn row_max(lid: u32, base: u32) -> f32 {
    var acc = ld(base + lid % p.r);
{{ROW_MAX_LOOP}}
    return tree_max(lid, acc);
}

fn col_sum(base: u32, stride: u32, kind: u32, a: f32) -> f32 {
    var acc = 0.0;
    for (var j = 0u; j < p.r; j++) {
        acc = k_keep(acc + term(kind, ld(base + j * stride), a));
    }
    return acc;
}

fn col_max(base: u32, stride: u32) -> f32 {
    var acc = ld(base);
    for (var j = 1u; j < p.r; j++) {
        acc = max(acc, ld(base + j * stride));
    }
    return acc;
}

@compute @workgroup_size(256)
fn {{ROW_ENTRY}}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.r;
{{ROW_STATS}}
{{ROW_FINAL}}
}

@compute @workgroup_size(256)
fn {{COL_ENTRY}}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.rows) {
        return;
    }
    let base = (t / p.inner) * p.r * p.inner + t % p.inner;
    let stride = p.inner;
{{COL_STATS}}
    for (var j = 0u; j < p.r; j++) {
        let k = base + j * stride;
        {{COL_STORE}}
    }
}
