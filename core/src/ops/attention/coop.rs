//! f16 flash attention on cooperative matrices (`shaders/flash_attention_coop.wgsl`): Q·Kᵀ and
//! P·V as 16x16x16 f16 products with f32 accumulators (tensor cores), the online softmax between
//! them on the invocations. Taken where the device has wgpu's cooperative-matrix feature with an
//! f16 x f16 -> f32 configuration, one subgroup size of 16, 32 or 64, and D, Dv multiples of 16.
//! Which configuration runs (`pick`) and its launch; its WGSL in `coop_wgsl.rs`.

use super::coop_wgsl::{source, CoopAttn};
use super::{Geometry, FLASH_MAX_D};
use crate::device::Device;
use crate::dtype::DType;
use crate::exec::{grid, Launch};
use crate::pipeline::Checks;
use crate::shape::numel;
use crate::tensor::Tensor;
use crate::Result;

/// Subgroups per workgroup (16 query rows each), most wanted first: 8 shares every K and V tile
/// among 128 query rows, which measured 1.5-1.8x faster than 4 on the H100 (BENCHMARKS.md item
/// 28) though it leaves room for only 32 keys per tile; 4 where 8 does not fit the device.
/// `KILN_ATTN_NSG=2|4|8|16` puts one first (tuning).
fn nsg_choices() -> [usize; 2] {
    [super::knobs::attn_nsg().unwrap_or(8), 4]
}

/// Whether the tiles in workgroup memory are arrays of vec4 (one 8- or 16-byte access where the
/// scalar layout makes four) for head sizes `d`, `dv`. Measured on the H100 (causal, TFLOP/s):
/// D = 64 47.1 -> 48.1 and 80.8 -> 84.8 at 4x16x4096; D = 128 64.2 -> 61.7, so vec4 up to 64.
/// `KILN_ATTN_VEC=0|1` forces one layout (tuning).
fn vec_layout(d: usize, dv: usize) -> bool {
    super::knobs::attn_vec().unwrap_or(d <= 64 && dv <= 64)
}

/// 64-key tiles with 8 subgroups at D, Dv <= 64 by computing and reading each tile's scores in
/// two halves through a 32-key scratch, with V stored into K's tile once the scores are out: 6
/// barriers per 64 keys instead of 8. Measured on the H100 (causal, TFLOP/s, two runs each):
/// 8x8x1024x64 47.9 / 47.6 -> 49.7 / 49.0, 4x16x4096x64 83.7 / 84.5 -> 83.8 / 83.7.
/// `KILN_ATTN_HALVES=0` turns it off (tuning).
fn halves_wanted() -> bool {
    super::knobs::attn_halves()
}

/// The configuration for `dtype` attention with head sizes `d`, `dv` on `device`, or None where
/// the kernel does not apply.
pub(super) fn pick(device: &Device, dtype: DType, d: usize, dv: usize) -> Option<CoopAttn> {
    if dtype != DType::F16 || crate::ops::matmul::coop_accumulator(device) != Some("f32") {
        return None;
    }
    let sg = device.subgroup_size.map(|s| s as usize).filter(|s| [16, 32, 64].contains(s))?;
    let ok = |x: usize| x.is_multiple_of(16) && (16..=FLASH_MAX_D).contains(&x);
    if !(ok(d) && ok(dv)) {
        return None;
    }
    let limits = device.limits();
    let limit = limits.max_compute_workgroup_storage_size as usize;
    for nsg in nsg_choices() {
        if sg * nsg > limits.max_compute_invocations_per_workgroup as usize
            || sg * nsg > limits.max_compute_workgroup_size_x as usize
        {
            continue;
        }
        let vec = vec_layout(d, dv);
        // 64 keys in halves where that fits and the whole tile does not (each invocation's
        // share of a half is whole vec4s).
        if vec
            && halves_wanted()
            && CoopAttn::shared_bytes(nsg, 64, d, dv) > limit
            && CoopAttn::shared_bytes_halves(nsg, 64, d, dv) <= limit
            && (32 / (sg / 16)) % 4 == 0
        {
            return Some(CoopAttn { sg, bc: 64, d, dv, nsg, vec, halves: true });
        }
        if let Some(bc) = [64, 32, 16].into_iter().find(|&bc| CoopAttn::shared_bytes(nsg, bc, d, dv) <= limit) {
            return Some(CoopAttn { sg, bc, d, dv, nsg, vec, halves: false });
        }
    }
    None
}

pub(super) fn run(
    g: &Geometry,
    c: CoopAttn,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<(&Tensor, &[usize])>,
    out: &Tensor,
) -> Result<()> {
    let device = q.device().clone();
    let br = c.nsg * 16;
    let nqb = g.lq.div_ceil(br);
    let blocks = numel(g.batch_shape) * nqb;
    let params = g.flash_params(nqb, blocks, mask.map(|(_, s)| s));
    let has_mask = mask.is_some();
    let mut tensors = vec![q, k, v];
    tensors.extend(mask.map(|(m, _)| m));
    tensors.push(out);
    Launch {
        key: format!(
            "flash_attention_coop:{}:{}:{}:{}:{}:{}:{}:{has_mask}",
            c.sg, c.bc, c.d, c.dv, c.nsg, c.vec, c.halves
        ),
        source: Box::new(move || source(c, has_mask)),
        tensors: &tensors,
        params: Some(params),
        groups: grid(blocks as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    // Global reads are guarded by Lq and Lk, stores by Lq and Dv; workgroup indices are in range
    // by construction. Device tests run ragged shapes through it.
    .run_with(&device, Checks::Unchecked)
}

/// What the kernel relies on, checked by the tests on devices with cooperative matrices: the
/// product of an identity A with the same 16x16 workgroup tile (x = 0, 1, .., 255 row-major)
/// loaded as B by `coopLoadT` (row-major: gives x) and by `coopLoad` (column-major: gives xᵀ),
/// 512 values in all.
pub fn coop_layout_probe(device: &std::sync::Arc<Device>, cfg: [u32; 4]) -> Result<Vec<f32>> {
    const PROBE: &str = r#"
enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> x: array<f16>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
const p_sa = SAu;
const p_sc = SCu;
const p_ao = AOu;
const p_co = COu;
var<workgroup> w: array<f16, 384>;
var<workgroup> id: array<f16, 4608>;
var<workgroup> c: array<f32, 4352>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var e = lid; e < 256u; e += 64u) {
        w[(e / 16u) * 24u + e % 16u] = x[e];
        id[p_ao + (e / 16u) * p_sa + e % 16u] = select(0.0h, 1.0h, e / 16u == e % 16u);
    }
    workgroupBarrier();
    let a = coopLoadT<coop_mat16x16<f16, A>>(&id[p_ao], p_sa);
    let bt = coopLoadT<coop_mat16x16<f16, B>>(&w[0], 24u);
    let bc = coopLoad<coop_mat16x16<f16, B>>(&w[0], 24u);
    let r0 = coopMultiplyAdd(a, bt, coop_mat16x16<f32, C>());
    let r1 = coopMultiplyAdd(a, bc, coop_mat16x16<f32, C>());
    coopStoreT(r0, &c[p_co], p_sc);
    coopStoreT(r1, &c[p_co + 16u * p_sc], p_sc);
    workgroupBarrier();
    for (var e = lid; e < 512u; e += 64u) {
        out[e] = c[p_co + (e / 16u) * p_sc + e % 16u];
    }
}
"#;
    let xs: Vec<half::f16> = (0..256).map(|e| half::f16::from_f32(e as f32)).collect();
    let x = Tensor::from_slice_on(device, &xs, &[256])?;
    let out = Tensor::empty_on(device, &[512], DType::F32)?;
    let src = ["SAu", "SCu", "AOu", "COu"]
        .iter()
        .zip(cfg)
        .fold(PROBE.to_string(), |s, (name, v)| s.replace(name, &format!("{v}u")));
    Launch {
        key: format!("coop_layout_probe:{cfg:?}"),
        source: Box::new(move || src),
        tensors: &[&x, &out],
        params: None,
        groups: [1, 1, 1],
    }
    .run(device)?;
    out.to_vec::<f32>()
}
