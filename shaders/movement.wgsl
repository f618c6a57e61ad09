// Every data-movement op (permute, transpose, slice, concat, index_select, gather, embedding)
// is this one kernel. Thread i walks the coordinates of its element in `p.shape` (row-major)
// and accumulates an element offset `off = p.base + sum(coord[d] * p.stride[d])`:
//   copy:    dst[i] = src[off]            (permute / transpose / slice: a strided gather)
//   scatter: dst[off] = src[i]            (concat: one input into its region of the output)
//   take:    dst[i] = src[off + j * p.ax_stride] with j = idx[coord[p.axis]] (index_select)
//   gather:  dst[i] = src[off + j * p.ax_stride] with j = idx[i]           (torch.gather)
// Data is moved as raw words: 4-byte dtypes travel as u32 whatever they hold, so no float
// canonicalisation can touch the bits; f16 travels as f16.
{{ENABLE}}
struct Params {
    n: u32,
    rank: u32,
    base: u32,
    axis: u32,       // the dimension whose coordinate picks the index (take), else 8
    ax_stride: u32,  // element stride of the indexed axis in src
    ax_size: u32,    // length of the indexed axis (indices at or past it read 0)
    wrap: u32,       // 1: negative i32 indices count from the end (numpy take)
    pad: u32,
    shape: array<vec4<u32>, 2>,
    stride: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
{{IDX_BINDING}}
@group(0) @binding({{OUT}}) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding({{PARAMS}}) var<uniform> p: Params;

// Index value -> element of the indexed axis, or ax_size when out of range.
fn pick(raw: {{IDXT}}) -> u32 {
{{PICK}}
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.n) {
        return;
    }
    var rem = i;
    var off = p.base;
    var cax = 0u;
    for (var k = 0u; k < p.rank; k++) {
        let d = p.rank - 1u - k;
        let q = d / 4u;
        let r = d % 4u;
        let c = rem % p.shape[q][r];
        rem = rem / p.shape[q][r];
        off += c * p.stride[q][r];
        if (d == p.axis) {
            cax = c;
        }
    }
{{BODY}}
}
