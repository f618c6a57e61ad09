//! The K formats' decode matrix-vector kernel (`shaders/quant_matvec_k.wgsl`): Q4_K, Q5_K and
//! Q6_K super-blocks read as whole words by 8 lanes each, scales decoded once per 32-value group
//! per lane, x staged in workgroup memory and each x value used for two W rows. The strided
//! kernel (`quant_matvec.wgsl`, one 8-value unit at a time through quant_common's generic
//! `decode_at`, x read from global memory per unit) stays for Q2_K, Q3_K and for shapes whose x
//! does not fit in workgroup memory.
//!
//! [`quant_matmul_fused`](super::quant::quant_matmul_fused) takes it for 1 to
//! `MATVEC_MAX_ROWS` rows of x (`MatvecKernel::Auto` and `Wide`; `Strided` keeps the old
//! kernel, for A/B timing). Its sums are f32 in another order than the strided kernel's: the
//! two agree within the matvec bound, (K + 2) 2^-24 Σ|x w|, not bit for bit.
//!
//! With the RoPE-to-cache epilogue (`quant_qkv_rope_to_cache` and its stacked form, where a
//! Q4_K_M's Q4_K Q and K rows and its Q6_K V rows are one dispatch each) slot j takes pair j's two
//! rows (i and i + half of a head) and `rope_store` (quant_matvec_rope.wgsl) writes them. Where
//! x rows do not all fit in workgroup memory at once (8 rows of a long K), fewer are staged per
//! workgroup and W is read once per group of them (from L2 after the first).

use super::quant_format::{QuantFormat, QuantFusion, MATVEC_MAX_ROWS};
use super::quant_matvec_wide::MatvecKernel;
use super::quant_rope::{rope_part, RopeToCache, ROPE_COMMON};
use crate::device::Device;
use crate::exec::{grid, Launch, Params};
use crate::pipeline::{render, Checks, PipelineKey};
use crate::tensor::Tensor;
use crate::Result;

const SHADER: &str = include_str!("../../../shaders/quant_matvec_k.wgsl");

/// Workgroups the launch aims for before it takes smaller workgroups (2 per SM of a 132-SM
/// H100), as the wide kernel's.
const TARGET_GROUPS: usize = 256;
/// Rows of x one workgroup stages at most (more take more workgroups along z).
const MAX_MT: usize = 4;
/// Lanes the launch aims for before it gives a slot more lane groups (each then fewer
/// super-blocks in series): a small matrix (a 1B layer's 512 V rows: 256 slots of 16 lanes) is
/// otherwise a few thousand lanes, each waiting on a chain of loads.
const TARGET_LANES: usize = 1 << 15;

/// `KILN_KMATVEC_TUNE=g=N` (measurement only): lane groups per slot (1, 2, 4 or 8) instead of
/// the rule's, for A/B timing on the GPU machine.
fn tune_g() -> Option<usize> {
    static ENV: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| {
        let v = crate::platform::env_var("KILN_KMATVEC_TUNE")?;
        let g = v.trim().strip_prefix("g=")?.parse::<usize>().ok()?;
        [1, 2, 4, 8].contains(&g).then_some(g)
    })
}

/// Whether this kernel decodes `format`.
pub fn has_k_kernel(format: QuantFormat) -> bool {
    matches!(format, QuantFormat::Q4_K | QuantFormat::Q5_K | QuantFormat::Q6_K)
}

/// Words one lane loads per super-block and W row: Q4_K d|dmin, 3 scale words, 4 quant words;
/// Q5_K those and a word of fifth bits; Q6_K (210-byte blocks, every other one at an odd
/// halfword) its 4 low-nibble and 2 high-bit words as pairs of aligned words, and the 5 words
/// spanning its 16 scales and d.
fn lane_words(format: QuantFormat) -> usize {
    match format {
        QuantFormat::Q4_K => 8,
        QuantFormat::Q5_K => 9,
        QuantFormat::Q6_K => 17,
        _ => 0,
    }
}

/// The launch: (workgroup size, lane groups per slot, rows of x per workgroup, vec4s of xs),
/// or None where x does not fit in the device's workgroup memory even one row at a time.
fn shape(device: &Device, m: usize, k: usize, slots: usize) -> Option<(usize, usize, usize, usize)> {
    let nsb = k / QuantFormat::SUPER_LEN;
    // Lane groups per slot: each takes about 4 super-blocks of a row (short rows: one group),
    // more (up to one super-block each) where the slots are too few to fill the GPU.
    let mut g = (nsb / 4).clamp(1, 8).next_power_of_two().min(8);
    while g < 8 && g < nsb && slots * 8 * g < TARGET_LANES {
        g *= 2;
    }
    let g = tune_g().unwrap_or(g);
    let tps = 8 * g;
    let mut wg = 256;
    while wg > 64 && wg > tps && slots.div_ceil(wg / tps) < TARGET_GROUPS {
        wg /= 2;
    }
    let limit = device.limits().max_compute_workgroup_storage_size as usize;
    let mut mt = m.min(MAX_MT);
    loop {
        let sh = mt * k / 4;
        // xs, red (2 MT WG f32) and inv_rms.
        if sh * 16 + 2 * mt * wg * 4 + mt * 4 <= limit {
            return Some((wg, g, mt, sh));
        }
        if mt == 1 {
            return None;
        }
        mt /= 2;
    }
}

/// Whether the kernel can run `m` rows of x of `k` values in `format` against `n` outputs
/// (2n W rows under `swiglu`) on `device`.
pub fn applies(device: &Device, format: QuantFormat, m: usize, k: usize, n: usize, swiglu: bool) -> bool {
    if !has_k_kernel(format) || m == 0 || m > MATVEC_MAX_ROWS || n == 0 || k == 0 {
        return false;
    }
    if !k.is_multiple_of(QuantFormat::SUPER_LEN) {
        return false;
    }
    let slots = if swiglu { n } else { n.div_ceil(2) };
    shape(device, m, k, slots).is_some()
}

/// Runs y = x Wᵀ (with `fusion`) into `out` on this kernel if `kernel` allows it and it applies;
/// false leaves the work to the caller. Operands are checked by the caller: `m` rows of x with
/// `k` values, `n` outputs. With `rope` (`fusion` then holds at most the norm) W's `n` rows are
/// whole heads of a QKV stack and the epilogue RoPEs and writes the caches.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    x: &Tensor,
    w: &Tensor,
    out: &Tensor,
    format: QuantFormat,
    n: usize,
    k: usize,
    m: usize,
    fusion: &QuantFusion,
    kernel: MatvecKernel,
    rope: Option<&RopeToCache>,
) -> Result<bool> {
    let device = x.device().clone();
    let glu = fusion.swiglu;
    let kernel = if kernel == MatvecKernel::Auto { MatvecKernel::from_env() } else { kernel };
    if kernel == MatvecKernel::Strided || !applies(&device, format, m, k, n, glu) {
        return Ok(false);
    }
    let slots = if glu { n } else { n.div_ceil(2) };
    let Some((wg, g, mt, sh)) = shape(&device, m, k, slots) else {
        return Ok(false);
    };
    let limits = device.limits();
    let mut groups = grid(slots.div_ceil(wg / (8 * g)) as u64, limits.max_compute_workgroups_per_dimension)?;
    groups[2] = m.div_ceil(mt) as u32;
    let dtype = x.dtype();
    let enable = crate::exec::enables(&[dtype]);
    let eps = fusion.rms_norm.map_or(0.0, |(_, e)| e);
    let row_h = format.row_bytes(k)? / 2;
    let nsb = k / QuantFormat::SUPER_LEN;
    let mut params = Params::new().u32(m).u32(n).u32(k).u32(nsb).u32(row_h).f32(eps).u32(0u32).u32(0u32);
    let (norm, res) = (fusion.rms_norm.is_some(), fusion.residual.is_some());
    let gt = fusion.rms_norm.map_or(x, |(g, _)| g);
    let r = fusion.residual.unwrap_or(x);
    let mut tensors = vec![w, x, out, gt, r];
    if let Some(rp) = rope {
        if glu || res || !n.is_multiple_of(2 * rp.half) {
            return Err(crate::Error::Internal(
                "quant K matvec: RoPE takes whole heads and no SwiGLU or residual".into(),
            ));
        }
        let pos_word;
        (params, pos_word) = rp.push_params(params);
        tensors.extend([rp.k_cache, rp.v_cache]);
        tensors.extend(rp.factors);
        rp.follow_in_plan(&device, pos_word, m, groups);
    }
    let with_rope = rope.is_some();
    let factors = rope.is_some_and(|r| r.factors.is_some());
    Launch {
        key: PipelineKey::new(
            "quant_matvec_k",
            &[
                format as u32,
                dtype as u32,
                wg as u32,
                g as u32,
                mt as u32,
                sh as u32,
                norm as u32,
                glu as u32,
                res as u32,
                with_rope as u32,
                factors as u32,
            ],
        ),
        source: Box::new(move || {
            source(format, dtype.wgsl(), enable, wg, g, mt, sh, Fuse { norm, glu, res, rope: with_rope, factors })
        }),
        tensors: &tensors,
        params: Some(params),
        groups,
    }
    .run_with(&device, Checks::Unchecked)?;
    Ok(true)
}

/// The epilogue a launch folds in: the norm, SwiGLU, the residual, or RoPE and the cache write
/// (with or without frequency factors).
#[derive(Clone, Copy, Default)]
struct Fuse {
    norm: bool,
    glu: bool,
    res: bool,
    rope: bool,
    factors: bool,
}

/// The kernel's WGSL (tests validate it with naga for shapes no test device runs).
#[allow(clippy::too_many_arguments)]
fn source(format: QuantFormat, ty: &str, enable: &str, wg: usize, g: usize, mt: usize, sh: usize, f: Fuse) -> String {
    let Fuse { norm, glu, res, rope, factors } = f;
    let (fields, part, slot) = rope_part(rope, factors, ty);
    // Pair `slot` of the part's (whole) heads: rows i and i + half of head slot / half.
    let rope_rows =
        if rope { "    r0 = (slot / p.half) * 2u * p.half + slot % p.half;\n    r1 = r0 + p.half;\n" } else { "" };
    let mut acc_decl = String::new();
    let mut red_store = String::new();
    for a in 0..2 {
        for q in 0..mt {
            acc_decl += &format!("    var acc{a}_{q} = vec4<f32>(0.0);\n");
            red_store += &format!(
                "    red[({a}u * MT + {q}u) * WG + li] = (acc{a}_{q}.x + acc{a}_{q}.z) + (acc{a}_{q}.y + acc{a}_{q}.w);\n"
            );
        }
    }
    let src = enable.to_string()
        + &format.common_wgsl()
        + &render(
            SHADER,
            &[
                ("T", ty),
                ("WG", &wg.to_string()),
                ("G", &g.to_string()),
                ("MT", &mt.to_string()),
                ("NW", &lane_words(format).to_string()),
                ("SH", &sh.max(1).to_string()),
                ("RED", &(2 * mt * wg).to_string()),
                ("NORM", &norm.to_string()),
                ("GLU", &glu.to_string()),
                ("RES", &res.to_string()),
                ("ROPE", &rope.to_string()),
                ("ROPE_FIELDS", &fields),
                ("P_SLOT", &slot),
                ("ROPE_ROWS", rope_rows),
                ("ROPE_PART", &part),
                ("LOAD", &load_wgsl(format)),
                ("ACC_DECL", &acc_decl),
                ("COMPUTE", &compute_wgsl(format, mt)),
                ("RED_STORE", &red_store),
            ],
        );
    if rope {
        crate::ops::elementwise::with_special(src + ROPE_COMMON)
    } else {
        src
    }
}

/// load_sb's body: lane l's words of the super-block at halfword hb (constant indices keep
/// them in registers).
fn load_wgsl(format: QuantFormat) -> String {
    let mut s = String::new();
    match format {
        QuantFormat::Q4_K | QuantFormat::Q5_K => {
            // 144- and 176-byte blocks: word-aligned, as are rows of them.
            s += "        let i = hb >> 1u;\n";
            for t in 0..4 {
                s += &format!("        v[{t}] = w[i + {t}u];\n");
            }
            // Q5_K: the fifth bits (bytes 16..48) before the nibbles (from byte 48).
            let qs = if format == QuantFormat::Q5_K {
                s += "        v[8] = w[i + 4u + l];\n";
                12
            } else {
                4
            };
            for c in 0..4 {
                s += &format!("        v[{}] = w[i + {}u + l];\n", 4 + c, qs + 8 * c);
            }
        }
        QuantFormat::Q6_K => {
            // Low nibbles: word k of the lane at halfword 16k + 2l; high bits: 64 + 16n + 2l;
            // each as the two aligned words it spans when hb is odd.
            for k in 0..4 {
                s += &format!("        let l{k} = (hb + {}u + 2u * l) >> 1u;\n", 16 * k);
                s += &format!("        v[{}] = w[l{k}];\n        v[{}] = w[l{k} + 1u];\n", 2 * k, 2 * k + 1);
            }
            for n in 0..2 {
                s += &format!("        let q{n} = (hb + {}u + 2u * l) >> 1u;\n", 64 + 16 * n);
                s += &format!("        v[{}] = w[q{n}];\n        v[{}] = w[q{n} + 1u];\n", 8 + 2 * n, 9 + 2 * n);
            }
            // Scales (halfwords 96..104) and d (104): five words from halfword 96's.
            s += "        let sw = (hb + 96u) >> 1u;\n";
            for t in 0..5 {
                s += &format!("        v[{}] = w[sw + {t}u];\n", 12 + t);
            }
        }
        _ => unreachable!("{format} has no K matvec kernel"),
    }
    s
}

/// The math on one super-block: for each of the two W rows, the lane's 32 values (8 groups of
/// 4), each times its x from xs for every staged row of x.
fn compute_wgsl(format: QuantFormat, mt: usize) -> String {
    let mut s = String::new();
    for a in 0..2 {
        s += "            {\n";
        s += &format!("                let c = cur{a};\n");
        match format {
            QuantFormat::Q4_K | QuantFormat::Q5_K => {
                s += "                let d = half_to_f32(c[0] & 0xffffu);\n";
                s += "                let dmin = half_to_f32(c[0] >> 16u);\n";
                for grp in 0..8 {
                    s += &format!("                let sm{grp} = scale_min_k4_words(c[1], c[2], c[3], {grp}u);\n");
                    // ggml's d1 = d * sc, m1 = dmin * m (exact), y = d1 * q - m1.
                    let q = if format == QuantFormat::Q5_K {
                        format!(
                            "b4(c[{}], {}u, 0xfu) | (b4(c[8], {grp}u, 1u) << vec4<u32>(4u))",
                            4 + grp / 2,
                            (grp % 2) * 4
                        )
                    } else {
                        format!("b4(c[{}], {}u, 0xfu)", 4 + grp / 2, (grp % 2) * 4)
                    };
                    s += &format!(
                        "                let v{grp} = (d * f32(sm{grp}.x)) * cvt4({q}, 0.0) - dmin * f32(sm{grp}.y);\n"
                    );
                }
            }
            QuantFormat::Q6_K => {
                s += &format!("                let odd = ((h{a} + sb * BLOCK_H) & 1u) == 1u;\n");
                for k in 0..4 {
                    s += &format!("                let ql{k} = al(c[{}], c[{}], odd);\n", 2 * k, 2 * k + 1);
                }
                for n in 0..2 {
                    s += &format!("                let qh{n} = al(c[{}], c[{}], odd);\n", 8 + 2 * n, 9 + 2 * n);
                }
                for t in 0..4 {
                    s += &format!("                let sc{t} = al(c[{}], c[{}], odd);\n", 12 + t, 13 + t);
                }
                // d at halfword 104: the high half of the fifth word when hb is odd.
                s += "                let d = half_to_f32(select(c[16] & 0xffffu, c[16] >> 16u, odd));\n";
                // Lane l's values 4l .. 4l + 3 of group s = 4n + g take scale 2s + l / 4: byte
                // 2 (g % 2) + l / 4 of scale word 2n + g / 2.
                s += "                let hl = 8u * (l / 4u);\n";
                for grp in 0..8 {
                    let (n, g) = (grp / 4, grp % 4);
                    s += &format!(
                        "                let sc_{grp} = (bitcast<i32>(sc{} >> ({}u + hl)) << 24u) >> 24u;\n",
                        2 * n + g / 2,
                        16 * (g % 2)
                    );
                    s += &format!(
                        "                let v{grp} = (d * f32(sc_{grp})) * cvt4(b4(ql{}, {}u, 0xfu) | (b4(qh{n}, {}u, 3u) << vec4<u32>(4u)), 32.0);\n",
                        2 * n + g % 2,
                        (g / 2) * 4,
                        2 * g
                    );
                }
            }
            _ => unreachable!("{format} has no K matvec kernel"),
        }
        for grp in 0..8 {
            for q in 0..mt {
                s += &format!("                acc{a}_{q} += v{grp} * xs[{q}u * k4 + xb + {}u];\n", 8 * grp);
            }
        }
        s += "            }\n";
    }
    s
}

/// The kernel's WGSL for `format`, x dtype `ty`, workgroup size, lane groups per slot and rows
/// of x per workgroup, every fusion flag (tests validate it with naga).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn quant_matvec_k_source_for_tests(
    format: QuantFormat,
    ty: &str,
    wg: usize,
    g: usize,
    mt: usize,
    k: usize,
    norm: bool,
    glu: bool,
    res: bool,
) -> String {
    let enable = if ty == "f16" { "enable f16;\n" } else { "" };
    source(format, ty, enable, wg, g, mt, mt * k / 4, Fuse { norm, glu, res, ..Fuse::default() })
}
