//! The cooperative-matrix flash kernel's WGSL (`shaders/flash_attention_coop.wgsl`): one
//! configuration (`CoopAttn`) and the code blocks built for it, in the scalar and vec4 workgroup
//! layouts. Which configuration runs, and its launch: `coop.rs`.
//!
//! Over ~500 lines on purpose: one kernel generator, whose code blocks only make sense together.

use super::{ATTENTION_COMMON, FLASH_PARAMS};
use crate::pipeline::render;
use std::fmt::Write;

const TEMPLATE: &str = include_str!("../../../../shaders/flash_attention_coop.wgsl");

/// One configuration of the kernel: the subgroup size, the keys per tile, the head sizes and the
/// subgroups per workgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CoopAttn {
    pub(super) sg: usize,
    pub(super) bc: usize,
    pub(super) d: usize,
    pub(super) dv: usize,
    pub(super) nsg: usize,
    /// Workgroup tiles as vec4 arrays (`coop::vec_layout`).
    pub(super) vec: bool,
    /// Scores computed and read in two halves of the tile, K and V sharing one tile (`coop::halves_wanted`;
    /// needs `vec`).
    pub(super) halves: bool,
}

impl CoopAttn {
    pub(super) fn shared_bytes_halves(sg_count: usize, bc: usize, d: usize, dv: usize) -> usize {
        bc * (d.max(dv) + 8) * 2 + sg_count * 16 * (bc / 2 + 4) * 4 + sg_count * 16 * (bc + 8) * 2 + 16
    }

    pub(super) fn shared_bytes(sg_count: usize, bc: usize, d: usize, dv: usize) -> usize {
        // K and V tiles, the score and P scratch, and the `grew` flag's 16 bytes (at exactly the
        // 48 KiB limit without them, D = 80 hung the H100).
        bc * (d + 8) * 2 + bc * (dv + 8) * 2 + sg_count * 16 * (bc + 4) * 4 + sg_count * 16 * (bc + 8) * 2 + 16
    }
}

/// The kernel's WGSL for one configuration (the tests validate it through naga everywhere).
/// Workgroup memory: K and V tiles, f32 scores, f16 Q / P.
const SMEM_SEPARATE: &str = "var<workgroup> Ks: array<{{H_ELEM}}, {{KS_LEN}}>; // [BC][SK]
var<workgroup> Vs: array<{{H_ELEM}}, {{VS_LEN}}>; // [BC][SV]
var<workgroup> Ss: array<{{F_ELEM}}, {{SS_LEN}}>; // [NSG][16][SS]: scores, then accumulators on their way out
var<workgroup> Ps: array<{{H_ELEM}}, {{PS_LEN}}>; // [NSG][16][SP]: Q on its way in, then P";
/// Workgroup memory with the scores in two halves: one tile for K, then V; half a tile of f32
/// scores; f16 Q / P.
const SMEM_HALVES: &str = "var<workgroup> Ks: array<{{H_ELEM}}, {{KS_LEN}}>; // [BC][SK]: K, then V ([BC][SV])
var<workgroup> Ss: array<{{F_ELEM}}, {{SS_LEN}}>; // [NSG][16][SS]: half a tile's scores, accumulators
var<workgroup> Ps: array<{{H_ELEM}}, {{PS_LEN}}>; // [NSG][16][SP]: Q on its way in, then P";

/// What differs between the two workgroup layouts besides the generated code blocks.
struct Layout {
    smem: &'static str,
    after_scores: String,
    /// The score scratch's row stride in f32s.
    ss: usize,
    h_elem: &'static str,
    f_elem: &'static str,
    /// KS_LEN, VS_LEN, SS_LEN, PS_LEN: the workgroup arrays' lengths in elements.
    lens: [usize; 4],
}

/// The code blocks, in the order of `BLOCKS`.
const BLOCKS: [&str; 13] = [
    "LOAD_Q",
    "ACC_DECL",
    "FETCH_DECL",
    "FETCH",
    "STORE_KV",
    "SOFTMAX_MAX",
    "SOFTMAX_P",
    "SCORES",
    "REDUCE_MAX",
    "REDUCE_SUM",
    "RESCALE",
    "PV",
    "STORE",
];

fn render_kernel(c: CoopAttn, has_mask: bool, l: Layout, blocks: [String; 13]) -> String {
    let nt = c.sg * c.nsg;
    let numbers = [("SS", l.ss), ("SG", c.sg), ("NSG", c.nsg), ("NT", nt), ("BC", c.bc), ("D", c.d), ("DV", c.dv)]
        .map(|(k, v)| (k, v.to_string()));
    let lens = ["KS_LEN", "VS_LEN", "SS_LEN", "PS_LEN"].into_iter().zip(l.lens.map(|v| v.to_string()));
    let mut vars: Vec<(&str, &str)> = vec![
        ("SMEM", l.smem),
        ("AFTER_SCORES", &l.after_scores),
        ("ATTENTION_COMMON", ATTENTION_COMMON),
        ("FLASH_PARAMS", FLASH_PARAMS),
        ("ENABLE", "enable f16;\nenable wgpu_cooperative_matrix;\n"),
        ("H_ELEM", l.h_elem),
        ("F_ELEM", l.f_elem),
        ("MASK_BINDING", if has_mask { "@group(0) @binding(3) var<storage, read> mask: array<f16>;" } else { "" }),
        ("OUT_SLOT", if has_mask { "4" } else { "3" }),
        ("P_SLOT", if has_mask { "5" } else { "4" }),
    ];
    let lens: Vec<(&str, String)> = lens.collect();
    vars.extend(numbers.iter().chain(lens.iter()).map(|(k, v)| (*k, v.as_str())));
    vars.extend(BLOCKS.iter().zip(blocks.iter()).map(|(k, v)| (*k, v.as_str())));
    render(TEMPLATE, &vars)
}

/// One K or V tile's loading code, shared by both layouts: each invocation's vec4s fetched into
/// registers (`kx0`.., zeros past Lk) and stored into workgroup memory at the top of the next
/// step (the layout's store statement from `store(e, offset, vec4s per row)`).
struct TileFetch<'a> {
    name: &'a str,
    width: usize,
    koff: &'a str,
    bc: usize,
    nt: usize,
}

impl TileFetch<'_> {
    fn emit(
        &self,
        fetch_decl: &mut String,
        fetch: &mut String,
        store_kv: &mut String,
        store: impl Fn(usize, usize, usize) -> String,
    ) {
        let TileFetch { name, width, koff, bc, nt } = *self;
        let per_row = width / 4;
        let total = bc * per_row;
        for e in 0..total.div_ceil(nt) {
            let off = e * nt;
            let guard = if (e + 1) * nt > total { format!("lid + {off}u < {total}u && ") } else { String::new() };
            let _ = writeln!(fetch_decl, "    var {name}x{e} = vec4<f16>(0.0h);");
            let body = format!(
                "        {{
            let kj = j0 + (lid + {off}u) / {per_row}u;
            {name}x{e} = vec4<f16>(0.0h);
            if ({guard}kj < p.lk) {{
                {name}x{e} = {name}[({koff} + kj * {width}u) / 4u + (lid + {off}u) % {per_row}u];
            }}
        }}
"
            );
            *fetch_decl += &body;
            *fetch += &body.replace("\n        ", "\n            ").replacen("        {", "            {", 1);
            let open = if guard.is_empty() { String::new() } else { format!("if (lid + {off}u < {total}u) ") };
            let _ = writeln!(store_kv, "        {open}{{\n{}\n        }}", store(e, off, per_row));
        }
    }
}

/// The row max and sum reductions across the LPR lanes that share a row.
fn lane_reductions(lpr: usize) -> (String, String) {
    let (mut reduce_max, mut reduce_sum) = (String::new(), String::new());
    let mut o = 1;
    while o < lpr {
        let _ = writeln!(reduce_max, "        mx = max(mx, subgroupShuffleXor(mx, {o}u));");
        let _ = writeln!(reduce_sum, "        sum += subgroupShuffleXor(sum, {o}u);");
        o *= 2;
    }
    (reduce_max, reduce_sum)
}

pub(super) fn source(c: CoopAttn, has_mask: bool) -> String {
    if c.vec {
        return source_vec(c, has_mask);
    }
    let CoopAttn { sg, bc, d, dv, nsg, .. } = c;
    let (qd, nb, od) = (d / 16, bc / 16, dv / 16);
    let lpr = sg / 16;
    let nt = sg * nsg;
    let mut load_q = String::new();
    for ci in 0..qd {
        let _ = write!(
            load_q,
            "    for (var e = lane; e < 256u; e += SG) {{
        let qr = row0 + e / 16u;
        var x = 0.0h;
        if (qr < p.lq) {{
            x = q[qoff + qr * D + {off}u + e % 16u];
        }}
        Ps[psb + (e / 16u) * SP + e % 16u] = x;
    }}
    workgroupBarrier();
    let qa{ci} = coopLoadT<coop_mat16x16<f16, A>>(&Ps[psb], SP);
    workgroupBarrier();
",
            off = ci * 16
        );
    }
    let mut acc = String::new();
    for ci in 0..od {
        let _ = writeln!(acc, "    var o{ci} = coop_mat16x16<f32, C>();");
    }
    let mut fetch_decl = String::new();
    let mut fetch = String::new();
    let mut store_kv = String::new();
    for (name, width, dst, stride, koff) in [("k", d, "Ks", "SK", "koff"), ("v", dv, "Vs", "SV", "voff")] {
        let tile = TileFetch { name, width, koff, bc, nt };
        tile.emit(&mut fetch_decl, &mut fetch, &mut store_kv, |e, off, per_row| {
            format!(
                "            let o = ((lid + {off}u) / {per_row}u) * {stride} + ((lid + {off}u) % {per_row}u) * 4u;
            {dst}[o] = {name}x{e}.x;
            {dst}[o + 1u] = {name}x{e}.y;
            {dst}[o + 2u] = {name}x{e}.z;
            {dst}[o + 3u] = {name}x{e}.w;"
            )
        });
    }
    // The softmax of one tile's row share: scores read once into registers.
    let cpl = bc / lpr;
    let mut soft_max = String::new();
    let mut soft_p = String::new();
    for t in 0..cpl {
        let col = format!("{}u + part", t * lpr);
        let mask_add = if has_mask {
            format!(" + f32(mask[moff + i * p.msq + (j0 + {col}) * p.msk]) * LOG2E")
        } else {
            String::new()
        };
        let _ = writeln!(
            soft_max,
            "        let ok{t} = {col} < nv;
        var x{t} = LOWEST;
        if (ok{t}) {{
            x{t} = Ss[ssb + rr * SS + {col}] * p.scale2{mask_add};
            mx = max(mx, x{t});
        }}"
        );
        let _ = writeln!(
            soft_p,
            "        let p{t} = select(0.0h, f16(exp2(x{t} - m)), ok{t});
        Ps[psb + rr * SP + {col}] = p{t};
        sum += f32(p{t});"
        );
    }
    let mut scores = String::from("        {\n");
    for j in 0..nb {
        let _ = writeln!(scores, "            var s{j} = coop_mat16x16<f32, C>();");
    }
    for ci in 0..qd {
        for j in 0..nb {
            let _ = writeln!(
                scores,
                "            let kb{ci}_{j} = coopLoad<coop_mat16x16<f16, B>>(&Ks[{}u * SK + {}u], SK);
            s{j} = coopMultiplyAdd(qa{ci}, kb{ci}_{j}, s{j});",
                j * 16,
                ci * 16
            );
        }
    }
    for j in 0..nb {
        let _ = writeln!(scores, "            coopStoreT(s{j}, &Ss[ssb + {}u], SS);", j * 16);
    }
    scores.push_str("        }\n");
    let (reduce_max, reduce_sum) = lane_reductions(lpr);
    let through_scratch = |ci: usize, body: &str, reload: bool| {
        format!(
            "    coopStoreT(o{ci}, &Ss[ssb], SS);
    workgroupBarrier();
    for (var t = 0u; t < 16u / LPR; t++) {{
        let at = ssb + rr * SS + t * LPR + part;
        let col = {}u + t * LPR + part;
{body}
    }}
    workgroupBarrier();
{}",
            ci * 16,
            if reload {
                format!("    o{ci} = coopLoadT<coop_mat16x16<f32, C>>(&Ss[ssb], SS);\n    workgroupBarrier();\n")
            } else {
                String::new()
            }
        )
    };
    let mut rescale = String::new();
    let mut store = String::new();
    for ci in 0..od {
        rescale += &through_scratch(ci, "        Ss[at] = Ss[at] * alpha;", true);
        store += &through_scratch(
            ci,
            "        if (i < p.lq && col < p.dv) {\n            out[obase + col] = f16(Ss[at] * inv);\n        }",
            false,
        );
    }
    let mut pv = String::from("        {\n");
    for j in 0..nb {
        let _ = writeln!(pv, "            let pa{j} = coopLoadT<coop_mat16x16<f16, A>>(&Ps[psb + {}u], SP);", j * 16);
    }
    for ci in 0..od {
        for j in 0..nb {
            let _ = writeln!(
                pv,
                "            let vb{j}_{ci} = coopLoadT<coop_mat16x16<f16, B>>(&Vs[{}u * SV + {}u], SV);
            o{ci} = coopMultiplyAdd(pa{j}, vb{j}_{ci}, o{ci});",
                j * 16,
                ci * 16
            );
        }
    }
    pv.push_str("        }\n");
    render_kernel(
        c,
        has_mask,
        Layout {
            smem: SMEM_SEPARATE,
            after_scores: String::new(),
            ss: bc + 4,
            h_elem: "f16",
            f_elem: "f32",
            lens: [bc * (d + 8), bc * (dv + 8), nsg * 16 * (bc + 4), nsg * 16 * (bc + 8)],
        },
        [
            load_q, acc, fetch_decl, fetch, store_kv, soft_max, soft_p, scores, reduce_max, reduce_sum, rescale, pv,
            store,
        ],
    )
}

/// The kernel's WGSL with its workgroup tiles as vec4 arrays: K and V stored as the vec4s they
/// were fetched as, each invocation's scores read as vec4<f32> and its P written as vec4<f16>
/// (a quarter of the workgroup-memory instructions of the scalar layout), and the cooperative
/// loads and stores given vec4 pointers with strides in vec4 units.
fn source_vec(c: CoopAttn, has_mask: bool) -> String {
    let CoopAttn { sg, bc, d, dv, nsg, halves, .. } = c;
    let ss = if halves { bc / 2 + 4 } else { bc + 4 };
    let (qd, nb, od) = (d / 16, bc / 16, dv / 16);
    let lpr = sg / 16;
    let nt = sg * nsg;
    let comps = ["x", "y", "z", "w"];
    let mut load_q = String::new();
    for ci in 0..qd {
        let _ = write!(
            load_q,
            "    for (var e = lane; e < 64u; e += SG) {{
        let qr = row0 + e / 4u;
        var x = vec4<f16>(0.0h);
        if (qr < p.lq) {{
            let b = qoff + qr * D + {off}u + (e % 4u) * 4u;
            x = vec4<f16>(q[b], q[b + 1u], q[b + 2u], q[b + 3u]);
        }}
        Ps[psb4 + (e / 4u) * SP4 + e % 4u] = x;
    }}
    workgroupBarrier();
    let qa{ci} = coopLoadT<coop_mat16x16<f16, A>>(&Ps[psb4], SP4);
    workgroupBarrier();
",
            off = ci * 16
        );
    }
    let mut acc = String::new();
    for ci in 0..od {
        let _ = writeln!(acc, "    var o{ci} = coop_mat16x16<f32, C>();");
    }
    let mut fetch_decl = String::new();
    let mut fetch = String::new();
    let mut store_kv = String::new();
    // With the scores in halves, V goes into K's tile once the second half's scores are out
    // (AFTER_SCORES), and its next tile is fetched then.
    let mut fetch_v = String::new();
    let mut store_v = String::new();
    let v_dst = if halves { "Ks" } else { "Vs" };
    for (name, width, dst, stride, koff) in [("k", d, "Ks", "SK4", "koff"), ("v", dv, v_dst, "SV4", "voff")] {
        let (fetch, store_kv) =
            if halves && name == "v" { (&mut fetch_v, &mut store_v) } else { (&mut fetch, &mut store_kv) };
        let tile = TileFetch { name, width, koff, bc, nt };
        tile.emit(&mut fetch_decl, fetch, store_kv, |e, off, per_row| {
            format!("            {dst}[((lid + {off}u) / {per_row}u) * {stride} + (lid + {off}u) % {per_row}u] = {name}x{e};")
        });
    }
    // Each invocation takes CPH consecutive columns of its row's tile (of each half, with the
    // scores in halves), as CPH / 4 vec4s.
    let nh = if halves { 2 } else { 1 };
    let (hw, nbh) = (bc / nh, nb / nh);
    let cph = hw / lpr;
    let nvh4 = cph / 4;
    let mut reads = vec![String::new(); nh];
    let mut soft_p = String::new();
    for (h, read) in reads.iter_mut().enumerate() {
        let (nv, mx) = if halves && h == 0 { ("nv0", "mxh") } else { ("nv", "mx") };
        for u in 0..nvh4 {
            let _ = writeln!(read, "        let sv{h}_{u} = Ss[ssb4 + rr * SS4 + part * {nvh4}u + {u}u];");
            let mut ps = Vec::new();
            for (ci, comp) in comps.iter().enumerate() {
                let t = h * cph + u * 4 + ci;
                let col = format!("(part * {cph}u + {}u)", h * hw + u * 4 + ci);
                let mask_add = if has_mask {
                    format!(" + f32(mask[moff + i * p.msq + (j0 + {col}) * p.msk]) * LOG2E")
                } else {
                    String::new()
                };
                let _ = writeln!(
                    read,
                    "        let ok{t} = {col} < {nv};
        var x{t} = LOWEST;
        if (ok{t}) {{
            x{t} = sv{h}_{u}.{comp} * p.scale2{mask_add};
            {mx} = max({mx}, x{t});
        }}"
                );
                let _ = writeln!(
                    soft_p,
                    "        let p{t} = select(0.0h, f16(exp2(x{t} - m)), ok{t});
        sum += f32(p{t});"
                );
                ps.push(format!("p{t}"));
            }
            let _ = writeln!(
                soft_p,
                "        Ps[psb4 + rr * SP4 + {}u + part * {nvh4}u + {u}u] = vec4<f16>({});",
                h * hw / 4,
                ps.join(", ")
            );
        }
    }
    let products = |h: usize| {
        let mut sc = String::from("        {\n");
        for j in h * nbh..(h + 1) * nbh {
            let _ = writeln!(sc, "            var s{j} = coop_mat16x16<f32, C>();");
        }
        for ci in 0..qd {
            for j in h * nbh..(h + 1) * nbh {
                let _ = writeln!(
                    sc,
                    "            let kb{ci}_{j} = coopLoad<coop_mat16x16<f16, B>>(&Ks[{}u * SK4 + {}u], SK4);
            s{j} = coopMultiplyAdd(qa{ci}, kb{ci}_{j}, s{j});",
                    j * 16,
                    ci * 4
                );
            }
        }
        for j in h * nbh..(h + 1) * nbh {
            let _ = writeln!(sc, "            coopStoreT(s{j}, &Ss[ssb4 + {}u], SS4);", (j - h * nbh) * 4);
        }
        sc.push_str("        }\n");
        sc
    };
    // In halves: the first half's scores are read into registers (their maximum in mxh) before
    // the second half overwrites the scratch.
    let (scores, soft_max) = if halves {
        (
            format!(
                "{}        workgroupBarrier();
        let nv0 = select(0u, nk - j0, nk > j0);
        var mxh = LOWEST;
{}        workgroupBarrier();
{}",
                products(0),
                reads[0],
                products(1)
            ),
            format!("        mx = max(mx, mxh);\n{}", reads[1]),
        )
    } else {
        (products(0), reads[0].clone())
    };
    let after_scores = if halves {
        format!("{store_v}        if (j0 + BC < nk_block) {{\n            let j0 = j0 + BC;\n{fetch_v}        }}\n")
    } else {
        String::new()
    };
    let (reduce_max, reduce_sum) = lane_reductions(lpr);
    // An accumulator's 16 x 16 through the scratch: each invocation takes 4 / LPR vec4s of its row.
    let through_scratch = |ci: usize, body: &str, reload: bool| {
        format!(
            "    coopStoreT(o{ci}, &Ss[ssb4], SS4);
    workgroupBarrier();
    for (var t = 0u; t < 4u / LPR; t++) {{
        let u = t * LPR + part;
        let at = ssb4 + rr * SS4 + u;
        let col = {}u + u * 4u;
{body}
    }}
    workgroupBarrier();
{}",
            ci * 16,
            if reload {
                format!("    o{ci} = coopLoadT<coop_mat16x16<f32, C>>(&Ss[ssb4], SS4);\n    workgroupBarrier();\n")
            } else {
                String::new()
            }
        )
    };
    let mut out_body = String::from("        let y = Ss[at] * inv;\n        if (i < p.lq) {\n");
    for (ci, comp) in comps.iter().enumerate() {
        let _ =
            writeln!(out_body, "            if (col + {ci}u < p.dv) {{ out[obase + col + {ci}u] = f16(y.{comp}); }}");
    }
    out_body.push_str("        }");
    let mut rescale = String::new();
    let mut store = String::new();
    for ci in 0..od {
        rescale += &through_scratch(ci, "        Ss[at] = Ss[at] * alpha;", true);
        store += &through_scratch(ci, &out_body, false);
    }
    let mut pv = String::from("        {\n");
    for j in 0..nb {
        let _ = writeln!(pv, "            let pa{j} = coopLoadT<coop_mat16x16<f16, A>>(&Ps[psb4 + {}u], SP4);", j * 4);
    }
    for ci in 0..od {
        for j in 0..nb {
            let _ = writeln!(
                pv,
                "            let vb{j}_{ci} = coopLoadT<coop_mat16x16<f16, B>>(&{v_dst}[{}u * SV4 + {}u], SV4);
            o{ci} = coopMultiplyAdd(pa{j}, vb{j}_{ci}, o{ci});",
                j * 16,
                ci * 4
            );
        }
    }
    pv.push_str("        }\n");
    render_kernel(
        c,
        has_mask,
        Layout {
            smem: if halves { SMEM_HALVES } else { SMEM_SEPARATE },
            after_scores,
            ss,
            h_elem: "vec4<f16>",
            f_elem: "vec4<f32>",
            lens: [
                bc * (if halves { d.max(dv) } else { d } + 8) / 4,
                bc * (dv + 8) / 4,
                nsg * 16 * ss / 4,
                nsg * 16 * (bc + 8) / 4,
            ],
        },
        [
            load_q, acc, fetch_decl, fetch, store_kv, soft_max, soft_p, scores, reduce_max, reduce_sum, rescale, pv,
            store,
        ],
    )
}

/// The kernel's WGSL for subgroup size `sg`, `bc` keys per tile, head sizes `d`, `dv`, `nsg`
/// subgroups (tests validate it through naga on every machine).
/// `halves` (scores in two halves, K and V in one tile) implies `vec`.
#[allow(clippy::too_many_arguments)]
pub fn source_for_tests(
    sg: usize,
    bc: usize,
    d: usize,
    dv: usize,
    nsg: usize,
    has_mask: bool,
    vec: bool,
    halves: bool,
) -> String {
    source(CoopAttn { sg, bc, d, dv, nsg, vec: vec || halves, halves }, has_mask)
}
