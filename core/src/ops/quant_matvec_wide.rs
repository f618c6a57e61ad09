//! The bandwidth variant of the decode matrix-vector kernel (`shaders/quant_matvec_wide.wgsl`):
//! one row of x staged once per workgroup in workgroup memory, whole blocks per thread with all
//! their words loaded at once and the next step's words in flight during the math. It computes
//! the same sums in the same order as `quant_matvec.wgsl` (the shader's header says how), so
//! results match that kernel's bit for bit on a driver that fuses multiply-adds alike.
//!
//! [`quant_matmul_fused`](super::quant::quant_matmul_fused) takes it for one row of x and a
//! large W when x fits in workgroup memory; `KILN_QUANT_MATVEC=strided|wide` overrides the
//! choice (A/B timing).

use super::quant_format::{QuantFormat, QuantFusion};
use super::quant_rope::{rope_part, RopeToCache, ROPE_COMMON};
use crate::device::Device;
use crate::exec::{grid, Launch, Params};
use crate::pipeline::{render, Checks, PipelineKey};
use crate::tensor::Tensor;
use crate::Result;

const WIDE: &str = include_str!("../../../shaders/quant_matvec_wide.wgsl");

/// Which matrix-vector kernel decode's `quant_matmul` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MatvecKernel {
    /// `KILN_QUANT_MATVEC` if set, else by shape: the wide kernel for one row of x times a W of
    /// at least [`WIDE_MIN_ROWS`] rows and [`WIDE_MIN_K`] columns, where x fits.
    #[default]
    Auto,
    /// The threads-stride-over-words kernel (`quant_matvec.wgsl`), every shape and, asked for
    /// by argument, any number of rows of x (`Auto` moves past 8 to the tiled kernel and the
    /// separate fusion ops; batched decode asks for it up to its batch: one fused dispatch, W
    /// read once per 4 rows).
    Strided,
    /// The wide kernel wherever it applies (one row of x that fits in workgroup memory); for
    /// Q4_K / Q5_K / Q6_K the K kernel (`quant_matvec_k`, up to 8 rows of x), as `Auto` does.
    Wide,
}

/// W rows (2N under SwiGLU) from which `Auto` takes the wide kernel: below it the strided
/// kernel's 4x more threads per row fill more of the GPU (a guess to be settled on the H100 with
/// `kiln bench --filter quant_matvec`; SmolLM2's K/V projections, 192 rows, stay strided).
pub const WIDE_MIN_ROWS: usize = 512;
/// Columns from which `Auto` takes the wide kernel (short rows leave most of its threads idle).
pub const WIDE_MIN_K: usize = 256;
/// Columns from which the launch keeps 256-thread workgroups (16 rows of W each) instead of
/// shrinking them towards [`TARGET_GROUPS`]: a workgroup stages all of x (36 bytes per 32
/// values), so past this many columns the staging is worth sharing over more rows. Measured on
/// the H200 (`kiln bench --filter quant_matvec`, W cycled through more copies than L2 holds):
/// the 1B shape's 2048 x 8192 down projection (Q4_0) took 15.3 µs on the strided kernel, 15.4 on
/// this one with 64-thread workgroups (512 of them) and 11.6 with 256-thread ones (128).
/// (Before that measurement `Auto` kept the strided kernel past K = 4096.)
pub const WIDE_BIG_K: usize = 4096;
/// Workgroups the launch aims for before it takes smaller workgroups (2 per SM of a 132-SM
/// H100): fewer leave SMs idle or with too few loads in flight.
const TARGET_GROUPS: usize = 256;
/// Blocks per W row one thread decodes per step (words in flight: U x 5 or 9 per row, twice with
/// the prefetch) past [`WIDE_BIG_K`] columns (half under SwiGLU: a step covers the gate and the
/// up row); 1 below it. Measured on the H200 (same bench, W colder than L2): at K = 2048 one
/// block a step is as fast or faster (gate/up 18.7 -> 17.7 µs against two; the 1B decode
/// token's o step 11.5 -> 8.7 µs a layer); at K = 8192 (down, Q4_0 / Q8_0) two: 11.5 / 12.7 µs
/// against 11.9 / 13.4 with four, 11.7 / 13.4 with three, 12.6 / 15.6 with eight, 13.3 (Q4_0)
/// with one: with few blocks a row, fewer words in flight per thread leave room for more
/// threads; with many, each thread's loads must cover more latency.
const BLOCKS_PER_STEP: usize = 2;

/// Measurement-only overrides of the launch, `KILN_WIDE_TUNE="wg=128,u=4"` (either): the
/// workgroup size and the blocks per step. Neither changes a result bit (the sums are the same
/// in the same order); they exist to measure the kernel's shape on a GPU. (x read through the
/// caches instead of staged in workgroup memory measured 1.4-5x slower on the H200, 2026-11-28,
/// and was dropped.)
#[derive(Clone, Copy, Debug, Default)]
struct Tune {
    wg: Option<usize>,
    u: Option<usize>,
}

impl Tune {
    fn from_env() -> Tune {
        static ENV: std::sync::OnceLock<Tune> = std::sync::OnceLock::new();
        *ENV.get_or_init(|| {
            let mut t = Tune::default();
            for part in crate::platform::env_var("KILN_WIDE_TUNE").unwrap_or_default().split(',') {
                let (k, v) = part.split_once('=').unwrap_or((part, ""));
                let v = v.trim().parse::<usize>().ok();
                match k.trim() {
                    "wg" => t.wg = v.filter(|w| [64, 128, 256].contains(w)),
                    "u" => t.u = v.filter(|u| (1..=8).contains(u)),
                    _ => {}
                }
            }
            t
        })
    }
}

impl MatvecKernel {
    /// The `KILN_QUANT_MATVEC` override: `strided` or `wide` (anything else: by shape; the K
    /// formats' kernel, `quant_matvec_k`, follows it too).
    pub(crate) fn from_env() -> MatvecKernel {
        static ENV: std::sync::OnceLock<MatvecKernel> = std::sync::OnceLock::new();
        *ENV.get_or_init(|| match crate::platform::env_var("KILN_QUANT_MATVEC").as_deref().map(str::trim) {
            Some("strided") => MatvecKernel::Strided,
            Some("wide") => MatvecKernel::Wide,
            _ => MatvecKernel::Auto,
        })
    }
}

/// The strided kernel's threads per row for K = 32 * blocks (quant.rs uses the same rule).
pub(crate) fn strided_tpr(blocks: usize) -> usize {
    if blocks * 4 <= 64 {
        32
    } else {
        64
    }
}

/// Words of one block the kernel loads (a block starts on a 16-bit boundary: 18 bytes span 5
/// words, 20 bytes (always word-aligned) 5, 34 bytes 9).
fn block_words(format: QuantFormat) -> usize {
    match format {
        QuantFormat::Q4_0 | QuantFormat::Q4_1 => 5,
        QuantFormat::Q8_0 => 9,
        // Not run on the wide kernel (`run` checks has_wide_kernel).
        _ => 0,
    }
}

/// The launch shape: workgroup size, vec4s of workgroup memory for xs (x staged, then the
/// partial sums).
fn shape(blocks: usize, rows: usize, tpb: usize, na: usize) -> (usize, usize) {
    let mut wg = 256;
    while wg > 64 && blocks * QuantFormat::BLOCK_LEN <= WIDE_BIG_K && rows.div_ceil(wg / tpb) < TARGET_GROUPS {
        wg /= 2;
    }
    let wg = Tune::from_env().wg.filter(|w| *w >= tpb).unwrap_or(wg);
    (wg, (blocks * 9).max(na * wg))
}

/// Whether the wide kernel can run `m` rows of x of `k` values against `n` outputs (2n W rows
/// under `swiglu`) on `device`: one row of x, not empty, and x (32 values per block at a stride
/// of 36 floats) fits in the device's workgroup memory.
pub fn applies(device: &Device, m: usize, k: usize, n: usize, swiglu: bool) -> bool {
    if m != 1 || k == 0 || n == 0 || !k.is_multiple_of(QuantFormat::BLOCK_LEN) {
        return false;
    }
    let blocks = k / QuantFormat::BLOCK_LEN;
    let (wg, sh) = shape(blocks, n, strided_tpr(blocks) / 4, if swiglu { 2 } else { 1 });
    // xs, red (WG f32) and inv_rms.
    sh * 16 + wg * 4 + 4 <= device.limits().max_compute_workgroup_storage_size as usize
}

/// Runs y = x Wᵀ (with `fusion`) into `out` on the wide kernel if `kernel` (or, for `Auto`, the
/// environment and the shape) picks it and it applies; false leaves the work to the caller.
/// Operands are checked by the caller; `m` rows of x with `k` values, `n` outputs. With `rope`
/// (`ops::quant_qkv_rope_to_cache`; `fusion` then holds at most the norm) the epilogue is the
/// strided kernel's: RoPE and the KV-cache write (`quant_matvec_rope.wgsl`), the same bits.
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
    let kernel = if kernel == MatvecKernel::Auto { MatvecKernel::from_env() } else { kernel };
    let glu = fusion.swiglu;
    let na = if glu { 2 } else { 1 };
    let w_rows = n * na;
    let want = match kernel {
        MatvecKernel::Strided => false,
        MatvecKernel::Wide => true,
        MatvecKernel::Auto => w_rows >= WIDE_MIN_ROWS && k >= WIDE_MIN_K,
    };
    let device = x.device().clone();
    // The formats without a wide decode (Q5_*, the K formats) take the strided kernel.
    if !want || !format.has_wide_kernel() || !applies(&device, m, k, n, glu) {
        return Ok(false);
    }
    let blocks = k / QuantFormat::BLOCK_LEN;
    let tpb = strided_tpr(blocks) / 4;
    let (wg, sh) = shape(blocks, n, tpb, na);
    let limits = device.limits();
    let dtype = x.dtype();
    let enable = crate::exec::enables(&[dtype]);
    let u = Tune::from_env().u.unwrap_or(if k <= WIDE_BIG_K {
        1
    } else if glu {
        BLOCKS_PER_STEP / 2
    } else {
        BLOCKS_PER_STEP
    });
    let nw = block_words(format);
    let max_dim = limits.max_compute_workgroups_per_dimension;
    let mut groups = grid(n.div_ceil(wg / tpb) as u64, max_dim)?;
    let eps = fusion.rms_norm.map_or(0.0, |(_, e)| e);
    let row_h = format.row_bytes(k)? / 2;
    let mut params = Params::new().u32(1u32).u32(n).u32(k).u32(blocks).u32(row_h).f32(eps).u32(0u32).u32(0u32);
    let (norm, res) = (fusion.rms_norm.is_some(), fusion.residual.is_some());
    let g = fusion.rms_norm.map_or(x, |(g, _)| g);
    let r = fusion.residual.unwrap_or(x);
    let mut tensors = vec![w, x, out, g, r];
    if let Some(rp) = rope {
        let rpw = wg / tpb;
        if glu || res || !n.is_multiple_of(2 * rp.half) || !rpw.is_multiple_of(2) {
            return Err(crate::Error::Internal(
                "quant matvec: RoPE takes whole heads, pairs of rows and no SwiGLU or residual".into(),
            ));
        }
        let pos_word;
        (params, pos_word) = rp.push_params(params);
        tensors.extend([rp.k_cache, rp.v_cache]);
        tensors.extend(rp.factors);
        // Slots 2j and 2j + 1 take pair j (rope_row): rpw / 2 of the n / 2 pairs a workgroup.
        groups = grid((n / 2).div_ceil(rpw / 2) as u64, max_dim)?;
        rp.follow_in_plan(&device, pos_word, 1, groups);
    }
    let with_rope = rope.is_some();
    let factors = rope.is_some_and(|r| r.factors.is_some());
    Launch {
        key: PipelineKey::new(
            "quant_matvec_wide",
            &[
                format as u32,
                dtype as u32,
                wg as u32,
                tpb as u32,
                sh as u32,
                norm as u32,
                glu as u32,
                res as u32,
                u as u32,
                with_rope as u32,
                factors as u32,
            ],
        ),
        source: Box::new(move || {
            let t = dtype.wgsl();
            let (fields, part, slot) = rope_part(with_rope, factors, t);
            let src = enable.to_string()
                + &format.common_wgsl()
                + &render(
                    WIDE,
                    &[
                        ("T", dtype.wgsl()),
                        ("WG", &wg.to_string()),
                        ("TPB", &tpb.to_string()),
                        ("U", &u.to_string()),
                        ("NW", &nw.to_string()),
                        ("CW", &(na * u * nw).to_string()),
                        ("SH", &sh.to_string()),
                        ("NORM", &norm.to_string()),
                        ("GLU", &glu.to_string()),
                        ("RES", &res.to_string()),
                        ("ROPE", &with_rope.to_string()),
                        ("ROPE_FIELDS", &fields),
                        ("P_SLOT", &slot),
                        ("ROPE_PART", &part),
                        ("LOAD", &load_wgsl(na, u, nw)),
                        ("COMPUTE", &compute_wgsl(format, na, u, nw)),
                    ],
                );
            if with_rope {
                crate::ops::elementwise::with_special(src + ROPE_COMMON)
            } else {
                src
            }
        }),
        tensors: &tensors,
        params: Some(params),
        groups,
    }
    .run_with(&device, Checks::Unchecked)?;
    Ok(true)
}

/// load_step's body: block i of row a into v[(a U + i) NW ..], straight-line (constant
/// indices keep v in registers).
fn load_wgsl(na: usize, u: usize, nw: usize) -> String {
    let mut s = String::new();
    for a in 0..na {
        for i in 0..u {
            let base = (a * u + i) * nw;
            s += &format!("    if (b0 + {i}u * TPB < p.blocks) {{\n");
            s += &format!("        let s = (h{a} + (b0 + {i}u * TPB) * BLOCK_H) >> 1u;\n");
            for q in 0..nw {
                s += &format!("        v[{}] = w[s + {q}u];\n", base + q);
            }
            s += "    }\n";
        }
    }
    s
}

/// The step's math: each loaded block decoded unit by unit (quant_common's units: the same
/// values, positions and expression forms as its `decode`), unit c into accumulator component c.
fn compute_wgsl(format: QuantFormat, na: usize, u: usize, nw: usize) -> String {
    const C: [&str; 4] = ["x", "y", "z", "w"];
    let mut s = String::new();
    for a in 0..na {
        for i in 0..u {
            let b = (a * u + i) * nw;
            let cw = |q: usize| format!("cur[{}]", b + q);
            s += "            {\n";
            s += &format!("                let b = b0 + {i}u * TPB;\n");
            s += "                if (b < p.blocks) {\n";
            let line = |c: usize, ua: String, pa: usize, ub: String, pb: usize| {
                format!(
                    "                    acc{a}.{} += dot({ua}, xval(b, {pa}u)) + dot({ub}, xval(b, {pb}u));\n",
                    C[c]
                )
            };
            match format {
                QuantFormat::Q4_0 | QuantFormat::Q8_0 => {
                    // Block at an odd halfword: its fields sit 16 bits further into the words.
                    s += &format!("                    let o = ((h{a} + b * BLOCK_H) & 1u) == 1u;\n");
                    s += &format!(
                        "                    let d = half_to_f32(select({0} & 0xffffu, {0} >> 16u, o));\n",
                        cw(0)
                    );
                    // Quant word q (at block halfword 1 + 2q).
                    let words = if format == QuantFormat::Q4_0 { 4 } else { 8 };
                    for q in 0..words {
                        s += &format!(
                            "                    let q{q} = select(({} >> 16u) | ({} << 16u), {}, o);\n",
                            cw(q),
                            cw(q + 1),
                            cw(q + 1)
                        );
                    }
                    for c in 0..4 {
                        s += &if format == QuantFormat::Q4_0 {
                            line(c, format!("d * nib4(q{c}, 0u, 8.0)"), c, format!("d * nib4(q{c}, 4u, 8.0)"), 4 + c)
                        } else {
                            line(
                                c,
                                format!("d * sbyte4(q{})", 2 * c),
                                2 * c,
                                format!("d * sbyte4(q{})", 2 * c + 1),
                                2 * c + 1,
                            )
                        };
                    }
                }
                QuantFormat::Q4_1 => {
                    s += &format!("                    let d = half_to_f32({} & 0xffffu);\n", cw(0));
                    s += &format!("                    let m = half_to_f32({} >> 16u);\n", cw(0));
                    for c in 0..4 {
                        s += &line(
                            c,
                            format!("d * nib4({}, 0u, 0.0) + m", cw(1 + c)),
                            c,
                            format!("d * nib4({}, 4u, 0.0) + m", cw(1 + c)),
                            4 + c,
                        );
                    }
                }
                _ => unreachable!("{format} has no wide kernel"),
            }
            debug_assert!(nw == block_words(format));
            s += "                }\n            }\n";
        }
    }
    s
}
