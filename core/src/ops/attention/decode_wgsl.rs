//! The split-KV (decode) kernels' WGSL: the vec4 kernel's unrolled parts built here, and the
//! templates of the scalar split kernel, the combine passes and the one-pass merge.

use super::geometry::{ScoreOptions, ATTENTION_COMMON, SPLIT_TARGET_GROUPS, WG};
use crate::dtype::DType;
use crate::exec::enables;
use crate::pipeline::render;

pub(super) const SPLIT: &str = include_str!("../../../../shaders/flash_attention_split.wgsl");
pub(super) const COMBINE: &str = include_str!("../../../../shaders/flash_attention_combine.wgsl");
pub(super) const COMBINE_SERIAL: &str = include_str!("../../../../shaders/flash_attention_combine_serial.wgsl");
pub(super) const DECODE: &str = include_str!("../../../../shaders/flash_attention_decode.wgsl");
pub(super) const DECODE_MERGE: &str = include_str!("../../../../shaders/flash_attention_decode_merge.wgsl");
/// One row's merge of split-KV partials, shared by COMBINE and DECODE_MERGE (the same bits).
pub(super) const MERGE_ROW: &str = include_str!("../../../../shaders/flash_attention_merge_row.wgsl");

/// The split-KV kernel with vec4 loads, q and the score's loads unrolled over D and p v over a
/// thread's keys (see the shader's header).
/// `one_pass`: the row's last workgroup merges the splits (`flash_attention_decode_merge.wgsl`,
/// bound after `part`: `out`, then the counters); else `combine` runs after it.
#[allow(clippy::too_many_arguments)]
pub(super) fn decode_source(
    dtype: DType,
    dp: usize,
    dvp: usize,
    has_mask: bool,
    coalesced: bool,
    hoist: bool,
    one_pass: bool,
    opts: ScoreOptions,
) -> String {
    use std::fmt::Write;
    let t = dtype.wgsl();
    let (mut load_q, mut score_pre, mut score, mut scratch) =
        (String::new(), String::new(), String::new(), String::new());
    if coalesced {
        // Key (lid + r WG) / DP = lid / DP + r WG / DP of the step, dims vec4 lid % DP.
        let _ = writeln!(load_q, "    let qv = vec4<f32>(q[qb + lid % DP]) * p.scale;");
        let _ = writeln!(scratch, "var<workgroup> sc: array<f32, {}>;", WG * (dp + 1));
        let _ = writeln!(score_pre, "        let kblk = (koff + j0 * p.d) / 4u;");
        for r in 0..dp {
            let (key, at) = (r * WG / dp, r * WG);
            if hoist {
                let _ = writeln!(
                    score_pre,
                    "        let k{r} = k[kblk + min(lid + {at}u, n * DP - 1u)];\n        \
                     if (lid / DP + {key}u < n) {{ sc[(lid / DP + {key}u) * (DP + 1u) + lid % DP] = \
                     dot(qv, vec4<f32>(k{r})); }}"
                );
            } else {
                let _ = writeln!(
                    score_pre,
                    "        {{ let key = lid / DP + {key}u; if (key < n) {{ sc[key * (DP + 1u) + lid % DP] = \
                     dot(qv, vec4<f32>(k[kblk + lid + {at}u])); }} }}"
                );
            }
        }
        score_pre.push_str("        workgroupBarrier();\n");
        score.push_str("            let sb = lid * (DP + 1u);\n");
        for c in 0..dp {
            let (op, eq) = if c == 0 { ("var ", "=") } else { ("", "+=") };
            let _ = writeln!(score, "            {op}sd {eq} sc[sb + {c}u];");
        }
    } else {
        for c in 0..dp {
            let _ = writeln!(load_q, "    let q{c} = vec4<f32>(q[qb + {c}u]) * p.scale;");
        }
        score.push_str("            let kb = (koff + (j0 + lid) * p.d) / 4u;\n");
        for c in 0..dp {
            let (op, eq) = if c == 0 { ("var ", "=") } else { ("", "+=") };
            let _ = writeln!(score, "            {op}sd {eq} dot(q{c}, vec4<f32>(k[kb + {c}u]));");
        }
    }
    score.push_str("            s = sd;\n");
    score.push_str(&opts.softcap_wgsl("s", 1.0, "            "));
    if has_mask {
        score.push_str("            s += f32(mask[moff + i * p.msq + (j0 + lid) * p.msk]);\n");
    }
    let groups = 64 / dvp;
    let mut pv = String::new();
    let steps = 64usize.div_ceil(groups);
    if hoist {
        // Every load first, unconditionally (a step's last valid row stands in past `n`), so
        // they are all in flight at once: loads inside the guards went out one round trip
        // after another. The same sums in the same order as with the guards around the loads.
        for jj in 0..steps {
            let _ =
                writeln!(pv, "            let v{jj} = v[(voff + (j0 + min(g + {jj}u * G, n - 1u)) * p.dv) / 4u + c];");
        }
    }
    for jj in 0..steps {
        let load = if hoist { format!("v{jj}") } else { "v[(voff + (j0 + kj) * p.dv) / 4u + c]".to_string() };
        let _ = writeln!(
            pv,
            "            {{ let kj = g + {jj}u * G; if (kj < n) {{ acc = fma(vec4<f32>(probs[kj]), \
             vec4<f32>({load}), acc); }} }}"
        );
    }
    let part_slot = if has_mask { 4 } else { 3 };
    let ending = if one_pass {
        render(
            DECODE_MERGE,
            &[
                ("T", t),
                ("OUT_SLOT", &(part_slot + 1).to_string()),
                ("CNT_SLOT", &(part_slot + 2).to_string()),
                ("MAXS", &SPLIT_TARGET_GROUPS.to_string()),
            ],
        ) + &render(MERGE_ROW, &[("T", t)])
    } else {
        "fn put(i: u32, x: f32) { part[i] = x; }\nfn finish(row: u32, lid: u32) {}\n".to_string()
    };
    render(
        DECODE,
        &[
            ("ATTENTION_COMMON", ATTENTION_COMMON),
            ("ENABLE", enables(&[dtype])),
            ("T", t),
            (
                "MASK_BINDING",
                &if has_mask {
                    format!("@group(0) @binding(3) var<storage, read> mask: array<{t}>;")
                } else {
                    String::new()
                },
            ),
            ("PART_SLOT", &part_slot.to_string()),
            ("PART_ELEM", if one_pass { "atomic<u32>" } else { "f32" }),
            ("P_SLOT", &(part_slot + if one_pass { 3 } else { 1 }).to_string()),
            ("ENDING", &ending),
            ("DP", &dp.to_string()),
            ("DVP", &dvp.to_string()),
            ("LOAD_Q", &load_q),
            ("SCORE_SCRATCH", &scratch),
            ("SCORE_PRE", &score_pre),
            ("SCORE", &score),
            ("PV", &pv),
            ("WINDOW", &opts.window_wgsl("jbeg", "nk", "    ")),
        ],
    )
}
