//! The split-KV path (decode: few queries against a long cache): a workgroup per (query row,
//! key range), the splits merged by each row's last workgroup (the vec4 kernel) or by a combine
//! pass (`combine`); its WGSL in `decode_wgsl.rs`.

use super::decode_wgsl::{decode_source, COMBINE, COMBINE_SERIAL, MERGE_ROW, SPLIT};
use super::geometry::{Geometry, ATTENTION_COMMON, FLASH_MAX_D, SPLIT_TARGET_GROUPS, WG};
use super::knobs::{decode_fusion, decode_knobs};
use crate::device::Binding;
use crate::dtype::DType;
use crate::exec::{enables, grid, Launch, Params};
use crate::ops::elementwise::with_special;
use crate::pipeline::render;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// Split-KV: below this many splits a row the combine walks them serially (less setup than the
/// parallel merge's weights and reductions).
const SERIAL_COMBINE_BELOW: usize = 8;

/// Keys per split of the split-KV path: enough splits for about `SPLIT_TARGET_GROUPS`
/// workgroups, a multiple of the kernel's `kc` keys per step. A function of the shape alone, so
/// every device sums in the same order. `KILN_DECODE_CHUNK` overrides it (tuning; at most
/// `SPLIT_TARGET_GROUPS` splits a row, which the combine kernel's weights array holds).
/// `cap` (where given) bounds the keys of one split: a multiple of `kc`, from
/// [`split_keys_cap`].
pub(super) fn split_chunk(rows: usize, lk: usize, kc: usize, cap: Option<usize>) -> usize {
    let chunk = if let Some(c) = decode_knobs().chunk {
        c.max(lk.div_ceil(SPLIT_TARGET_GROUPS)).div_ceil(kc).max(1) * kc
    } else {
        let splits = SPLIT_TARGET_GROUPS.div_ceil(rows).clamp(1, lk.div_ceil(kc).max(1));
        lk.div_ceil(splits).div_ceil(kc).max(1) * kc
    };
    cap.map_or(chunk, |c| chunk.min(c))
}

/// The most keys one split-KV workgroup may walk on `device` (None: any): on CPU adapters,
/// llvmpipe's loop limiter (core/src/loop_budget.rs) counts every loop pass of the split
/// kernels' invocation, so a split's keys are bounded there (and the splits grow in number).
/// Counted per step of `kc` keys, generously: the step loop, the K tile's copy, the score's
/// loop over D (once per key at most), Dv's per-thread loops over the step's keys, the
/// per-step reductions.
pub(super) fn split_keys_cap(device: &crate::device::Device, kc: usize, d: usize, dv: usize) -> Option<usize> {
    let wg = WG;
    let per_step = 16 + 2 * kc * (d + 1) / wg.min(kc * 4) + (d * kc).div_ceil(4 * wg) + dv.div_ceil(wg) * (kc + 4);
    let fixed = 2 * (d.div_ceil(wg) + dv.div_ceil(wg)) + 8;
    crate::loop_budget::steps_per_dispatch(device, per_step as u64, fixed as u64).map(|s| s as usize * kc)
}

pub(super) fn split_kv(
    g: &Geometry,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<(&Tensor, &[usize])>,
    out: &Tensor,
) -> Result<()> {
    let device = q.device().clone();
    let dtype = q.dtype();
    // K rows of D + 1 floats in workgroup memory, q's row beside them, up to 64 keys a step.
    let limit = device.limits().max_compute_workgroup_storage_size as usize;
    // The vec4 kernel: D and Dv multiples of 4, q's row and a thread's dims in registers.
    let vec = g.d.is_multiple_of(4)
        && g.dv.is_multiple_of(4)
        && (4..=FLASH_MAX_D).contains(&g.d)
        && (4..=FLASH_MAX_D).contains(&g.dv);
    let kc = [64usize, 32, 16, 8, 4, 2, 1]
        .into_iter()
        .find(|kc| vec || (kc * (g.d + 1) + (g.d + 1) + 64 + kc) * 4 <= limit)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("attention: D {} is more than workgroup memory holds for a mask", g.d))
        })?;
    let cap = split_keys_cap(&device, kc, g.d, g.dv);
    let chunk = split_chunk(g.rows, g.lk, kc, cap);
    let nsplit = g.lk.div_ceil(chunk).max(1);
    if cap.is_some() && nsplit > SPLIT_TARGET_GROUPS {
        return Err(Error::InvalidArgument(format!(
            "attention: {} keys are more than this CPU adapter's split-KV kernel takes ({} splits of {chunk}: \
             llvmpipe's loop limiter bounds each split)",
            g.lk, SPLIT_TARGET_GROUPS
        )));
    }
    let part_len = crate::shape::mul(g.rows * nsplit, g.dv + 2, "attention partials")?;
    let part = Tensor::empty_on(&device, &[part_len], DType::F32)?;
    let (msq, msk) = mask.map_or((0, 0), |(_, s)| (s[s.len() - 2], s[s.len() - 1]));
    let params = Params::new().u32(g.lq);
    let lk_word = params.len();
    let params = params
        .u32(g.lk)
        .u32(g.d)
        .u32(g.dv)
        .u32(g.rows)
        .u32(nsplit)
        .u32(chunk)
        .u32(g.causal as u32)
        .f32(g.scale)
        .u32(msq)
        .u32(msk)
        .u32(g.batch_shape.len());
    let params = g.batch_params(params, mask.map(|(_, s)| s));
    let dvt = g.dv.div_ceil(WG).max(1);
    let ds = g.d + 1;
    let has_mask = mask.is_some();
    let groups = (g.rows * nsplit) as u64;
    if vec {
        let mut tensors = vec![q, k, v];
        tensors.extend(mask.map(|(m, _)| m));
        tensors.push(&part);
        let (dp, dvp) = (g.d / 4, g.dv / 4);
        // Coalesced score loads need a step's 64 rows to split evenly into vec4s per thread, and
        // their DP + 1 products a key (padded against bank conflicts) in workgroup memory.
        // Measured on the H100 (8x8x1x64, 4096 keys, loads issued before their guards): block
        // loads 1657 -> 2043 GB/s in f32, but 1377 -> 1056 in f16, which keeps a row per thread.
        let knobs = decode_knobs();
        let block_default = dtype == DType::F32;
        let coalesced = WG.is_multiple_of(dp) && dp <= 32 && knobs.block_loads.unwrap_or(block_default);
        let hoist = knobs.hoist;
        let one_pass = decode_fusion() && knobs.part.is_empty();
        let mut spec =
            vec![dtype as u32, dp as u32, dvp as u32, has_mask as u32, coalesced as u32, hoist as u32, one_pass as u32];
        if !g.opts.is_off() {
            // 0 is neither a valid cap nor a valid window.
            spec.extend([g.opts.softcap.map_or(0, f32::to_bits), g.opts.window.map_or(0, |w| w as u32)]);
        }
        let key = crate::pipeline::PipelineKey::new("flash_attention_decode", &spec);
        let opts = g.opts;
        let source = move || with_special(decode_source(dtype, dp, dvp, has_mask, coalesced, hoist, one_pass, opts));
        let groups = grid(groups, device.limits().max_compute_workgroups_per_dimension)?;
        if crate::device::capture::capturing(&device) {
            if !one_pass || g.causal || has_mask {
                crate::device::capture::refuse(&device, "split-KV attention off its one-pass, unmasked kernel");
            } else {
                // A plan attends to one more key a position on, while the splits stay as they
                // are (`split_chunk` gives the same chunk and count); else capture again.
                let (rows, lk, kv_rows) = (g.rows, g.lk, g.kv_rows);
                crate::device::capture::follow(
                    &device,
                    Box::new(move |delta, w| {
                        let lk2 = lk.checked_add(delta).filter(|&l| l <= kv_rows)?;
                        let chunk2 = split_chunk(rows, lk2, kc, cap);
                        if chunk2 != chunk || lk2.div_ceil(chunk2).max(1) != nsplit {
                            return None;
                        }
                        w[lk_word] = lk2 as u32;
                        Some(groups)
                    }),
                );
            }
        }
        if !one_pass {
            Launch { key, source: Box::new(source), tensors: &tensors, params: Some(params), groups }.run(&device)?;
            return combine(g, &part, nsplit, out);
        }
        // One dispatch: the last workgroup of each row merges it (the shader's header); the
        // counters are the device's self-resetting ones, one per row.
        let counters = device.self_resetting_counters(g.rows)?;
        tensors.push(out);
        let mut bindings: Vec<Binding<'_>> =
            tensors.iter().enumerate().map(|(i, t)| Binding { slot: i as u32, buffer: t.raw(), size: None }).collect();
        bindings.push(Binding { slot: tensors.len() as u32, buffer: &counters, size: None });
        let pipe = device.pipeline_typed(key, crate::pipeline::Checks::Bounded, source)?;
        return device.dispatch(&pipe, &bindings, Some((bindings.len() as u32, params.bytes())), groups, None);
    }
    crate::device::capture::refuse(&device, "split-KV attention off its one-pass, unmasked kernel");
    let tensors = [q, k, v, mask.map_or(q, |(m, _)| m), &part];
    let opts = g.opts;
    Launch {
        key: format!("flash_attention_split:{dtype}:{kc}:{ds}:{dvt}:{has_mask}{}", opts.key()),
        source: Box::new(move || {
            with_special(render(
                SPLIT,
                &[
                    ("ATTENTION_COMMON", ATTENTION_COMMON),
                    ("ENABLE", enables(&[dtype])),
                    ("T", dtype.wgsl()),
                    ("KC", &kc.to_string()),
                    ("DS", &ds.to_string()),
                    ("DVT", &dvt.to_string()),
                    ("HAS_MASK", if has_mask { "true" } else { "false" }),
                    ("WINDOW", &opts.window_wgsl("jbeg", "nk", "    ")),
                    ("SOFTCAP", &opts.softcap_wgsl("s", 1.0, "            ")),
                ],
            ))
        }),
        tensors: &tensors,
        params: Some(params),
        groups: grid(groups, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)?;
    combine(g, &part, nsplit, out)
}

/// The second pass of split-KV: the splits' partials of each row merged into `out`.
fn combine(g: &Geometry, part: &Tensor, nsplit: usize, out: &Tensor) -> Result<()> {
    let device = out.device().clone();
    let dtype = out.dtype();
    // Measured on the H100: the parallel merge 14.2 vs 10.2 us at 2 splits (9 rows, 128 keys),
    // 26.4 vs 32.4 at 32 splits, 64.8 vs 66.6 at 16 (64 rows, the whole op's time).
    let serial = match decode_knobs().part.as_str() {
        "nocombine" => return Ok(()),
        "serialcombine" => true,
        "parallelcombine" => false,
        _ => nsplit < SERIAL_COMBINE_BELOW,
    };
    let params = Params::new().u32(g.rows).u32(nsplit).u32(g.dv).u32(0);
    Launch {
        key: format!("flash_attention_combine:{dtype}:{serial}"),
        source: Box::new(move || {
            let (template, maxs) =
                if serial { (COMBINE_SERIAL, String::new()) } else { (COMBINE, SPLIT_TARGET_GROUPS.to_string()) };
            let mut src = render(template, &[("ENABLE", enables(&[dtype])), ("T", dtype.wgsl()), ("MAXS", &maxs)]);
            if !serial {
                src += &render(MERGE_ROW, &[("T", dtype.wgsl())]);
            }
            with_special(src)
        }),
        tensors: &[part, out],
        params: Some(params),
        groups: grid(g.rows as u64, device.limits().max_compute_workgroups_per_dimension)?,
    }
    .run(&device)
}
