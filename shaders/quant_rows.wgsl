// Whole rows of a quantized matrix [rows, cols] to f32: dequantize (row r of the output is W's
// row r) and embedding lookup (row r is W's row ids[r]; ids outside [0, rows), negative i32
// ones included, give zeros). One thread per unit of 8 values, stored as OT (f32; f16 for the
// native tier's quantized product, ops/quant/product.rs, which rounds the decoded f32 values).
struct Params {
    units: u32,     // output rows * units per row
    row_units: u32, // cols / 32 * UPB
    cols: u32,
    rows: u32,      // rows of W
    row_h: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<{{OT}}>>;
{{IDS}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * 256u;
    if (t >= p.units) {
        return;
    }
    let r = t / p.row_units;
    let b = (t % p.row_units) / UPB;
    let src = {{SRC}};
    let o = r * p.cols + b * 32u;
    if (src >= p.rows) {
        let q = (o + (t % UPB) * 8u) / 4u;
        out[q] = vec4<{{OT}}>(0.0);
        out[q + 1u] = vec4<{{OT}}>(0.0);
        return;
    }
    let un = decode_at(src * p.row_h, b, t % UPB);
    // A unit's two runs of 4 start at multiples of 4 (pa, pb), as rows and blocks do: one
    // 4-wide store each.
    out[(o + un.pa) / 4u] = vec4<{{OT}}>(un.a);
    out[(o + un.pb) / 4u] = vec4<{{OT}}>(un.b);
}
