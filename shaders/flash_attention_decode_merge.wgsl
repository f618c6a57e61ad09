// The one-pass ending of flash_attention_decode.wgsl (ops/attention/, `decode_source`): the
// combine pass of split-KV folded into the split kernel, so decode attention is one dispatch.
// Each workgroup stores its split's partials (m, l, acc) as before, then counts itself done in
// `cnt[row]`; the last of a row's `nsplit` workgroups to finish merges the row's partials
// exactly as flash_attention_combine.wgsl does (same sums in the same order: the same bits as
// the two-pass path) and puts the counter back to 0 for the next dispatch.
// Ordering: the partials are written and read with atomics (device-scope, so never a stale
// cached copy) and storageBarrier() sits between the partials' stores and the count (release)
// and between the count and the merge's loads (acquire). naga emits it as a Device-scope
// acquire-release OpControlBarrier for Vulkan and DeviceMemoryBarrierWithGroupSync for D3D;
// Metal's threadgroup_barrier(mem_device) and WGSL itself promise less (WGSL's atomics are
// relaxed). This is the classic "last block" reduction (CUDA's threadFenceReduction);
// KILN_DECODE_FUSE=0 is the two-dispatch path for a driver that breaks it.
@group(0) @binding({{OUT_SLOT}}) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding({{CNT_SLOT}}) var<storage, read_write> cnt: array<atomic<u32>>;

const MAXS = {{MAXS}}u;
var<workgroup> wts: array<f32, MAXS>;
var<workgroup> is_last: u32;

fn put(i: u32, x: f32) {
    atomicStore(&part[i], bitcast<u32>(x));
}

fn take(i: u32) -> f32 {
    return bitcast<f32>(atomicLoad(&part[i]));
}

fn finish(row: u32, lid: u32) {
    storageBarrier();
    if (lid == 0u) {
        let before = atomicAdd(&cnt[row], 1u);
        is_last = select(0u, 1u, before + 1u == p.nsplit);
    }
    if (workgroupUniformLoad(&is_last) == 0u) {
        return;
    }
    storageBarrier();
    if (lid == 0u) {
        atomicStore(&cnt[row], 0u);
    }
    merge_row(row, lid);
}
