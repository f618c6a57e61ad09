//! The cooperative product's WGSL generator: per GGUF format the raw-word fetch and the decode
//! from registers, the kernel for a tiling and an epilogue (SwiGLU, residual, split-K partial
//! sums) from `shaders/quant_coop.wgsl`, and the split-K sum.

use super::Tiling;
use crate::ops::matmul::coop::{cooperative_code, CoopTiles};
use crate::ops::quant_format::QuantFormat;
use crate::pipeline::render;

const TEMPLATE: &str = include_str!("../../../../shaders/quant_coop.wgsl");
const SPLIT_SUM: &str = include_str!("../../../../shaders/quant_coop_split_sum.wgsl");

/// The raw-word fetch and the decode from registers of one unit (unit `u` of 32-value group
/// `gb` of the W row at halfword `hrow`), per format: the same values as quant_common's
/// `decode`, which reads the words where it decodes them. `Raw` holds what the fetch loaded.
pub(super) fn fetch_unpack(format: QuantFormat) -> (&'static str, &'static str) {
    match format {
        // 9 halfwords: d at hb, the unit's 4 nibble bytes at hb + 1 + 2u (odd when hb is even).
        QuantFormat::Q4_0 => (
            "alias Raw = vec4<u32>;
fn fetch(hrow: u32, gb: u32, u: u32, ok: bool) -> Raw {
    if (!ok) {
        return vec4<u32>(0u);
    }
    let hb = hrow + gb * BLOCK_H;
    let i = (hb + 1u + 2u * u) >> 1u;
    return vec4<u32>(w[hb >> 1u], w[i], w[min(i + 1u, p.last)], 0u);
}",
            "fn unpack(r: Raw, hrow: u32, gb: u32, u: u32) -> Unit {
    let odd = ((hrow + gb * BLOCK_H) & 1u) == 1u;
    let d = half_to_f32(select(r.x & 0xffffu, r.x >> 16u, odd));
    let q = select((r.y >> 16u) | (r.z << 16u), r.y, odd);
    var un: Unit;
    un.a = d * (nibbles(q, 0u) - 8.0);
    un.b = d * (nibbles(q, 4u) - 8.0);
    un.pa = 4u * u;
    un.pb = 16u + 4u * u;
    return un;
}",
        ),
        // 10 halfwords, word-aligned: d and m in the first word, the unit's nibbles in word 1 + u.
        QuantFormat::Q4_1 => (
            "alias Raw = vec4<u32>;
fn fetch(hrow: u32, gb: u32, u: u32, ok: bool) -> Raw {
    if (!ok) {
        return vec4<u32>(0u);
    }
    let i = (hrow + gb * BLOCK_H) >> 1u;
    return vec4<u32>(w[i], w[i + 1u + u], 0u, 0u);
}",
            "fn unpack(r: Raw, hrow: u32, gb: u32, u: u32) -> Unit {
    let d = half_to_f32(r.x & 0xffffu);
    let m = half_to_f32(r.x >> 16u);
    var un: Unit;
    un.a = d * nibbles(r.y, 0u) + m;
    un.b = d * nibbles(r.y, 4u) + m;
    un.pa = 4u * u;
    un.pb = 16u + 4u * u;
    return un;
}",
        ),
        // 17 halfwords: d at hb, the unit's 8 bytes at hb + 1 + 4u (odd when hb is even).
        QuantFormat::Q8_0 => (
            "alias Raw = vec4<u32>;
fn fetch(hrow: u32, gb: u32, u: u32, ok: bool) -> Raw {
    if (!ok) {
        return vec4<u32>(0u);
    }
    let hb = hrow + gb * BLOCK_H;
    let i = (hb + 1u + 4u * u) >> 1u;
    return vec4<u32>(w[hb >> 1u], w[i], w[i + 1u], w[min(i + 2u, p.last)]);
}",
            "fn unpack(r: Raw, hrow: u32, gb: u32, u: u32) -> Unit {
    let odd = ((hrow + gb * BLOCK_H) & 1u) == 1u;
    let d = half_to_f32(select(r.x & 0xffffu, r.x >> 16u, odd));
    let qa = select((r.y >> 16u) | (r.z << 16u), r.y, odd);
    let qb = select((r.z >> 16u) | (r.w << 16u), r.z, odd);
    var un: Unit;
    un.a = d * sbytes(qa);
    un.b = d * sbytes(qb);
    un.pa = 8u * u;
    un.pb = 8u * u + 4u;
    return un;
}",
        ),
        // 144-byte super-blocks (word-aligned, as are rows of them): d | dmin in word 0, the 12
        // bytes of 6-bit scales and mins in words 1..3 (what scale_min_k4 reads), and the
        // unit's 8 nibble bytes, words 4 + 8 (s / 2) + 2u and the next, for group s = gb % 8.
        QuantFormat::Q4_K => (
            "struct Raw {
    a: vec4<u32>,
    b: vec2<u32>,
}
fn fetch(hrow: u32, gb: u32, u: u32, ok: bool) -> Raw {
    var r: Raw;
    if (!ok) {
        return r;
    }
    let i = (hrow + (gb / GPB) * BLOCK_H) >> 1u;
    let q = i + 4u + 8u * ((gb % GPB) / 2u) + 2u * u;
    r.a = vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
    r.b = vec2<u32>(w[q], w[q + 1u]);
    return r;
}",
            "fn unpack(r: Raw, hrow: u32, gb: u32, u: u32) -> Unit {
    let s = gb % GPB;
    let sm = scale_min_k4_words(r.a.y, r.a.z, r.a.w, s);
    let d1 = half_to_f32(r.a.x & 0xffffu) * f32(sm.x);
    let m1 = half_to_f32(r.a.x >> 16u) * f32(sm.y);
    let sh = (s % 2u) * 4u;
    var un: Unit;
    un.a = d1 * nibbles(r.b.x, sh) - m1;
    un.b = d1 * nibbles(r.b.y, sh) - m1;
    un.pa = 8u * u;
    un.pb = 8u * u + 4u;
    return un;
}",
        ),
        // 210-byte super-blocks (every other one starts at an odd halfword): the unit's 8 low
        // nibble bytes (halfword 32n + 16 (g % 2) + 4u) and 8 high-bit bytes (64 + 16n + 4u)
        // as three words each (the two they span when the start is odd), the word holding its
        // signed scale byte (192 + 8n + 2g + u / 2) and the one holding d (halfword 104), for
        // group s = gb % 8 = 4n + g.
        QuantFormat::Q6_K => (
            "struct Raw {
    a: vec4<u32>,
    b: vec4<u32>,
}
fn fetch(hrow: u32, gb: u32, u: u32, ok: bool) -> Raw {
    var r: Raw;
    if (!ok) {
        return r;
    }
    let hb = hrow + (gb / GPB) * BLOCK_H;
    let s = gb % GPB;
    let n = s / 4u;
    let g = s % 4u;
    let l = (hb + 32u * n + 16u * (g % 2u) + 4u * u) >> 1u;
    let h = (hb + 64u + 16u * n + 4u * u) >> 1u;
    let o = 2u * hb + 192u + 8u * n + 2u * g + u / 2u;
    r.a = vec4<u32>(w[l], w[l + 1u], w[l + 2u], w[h]);
    r.b = vec4<u32>(w[h + 1u], w[min(h + 2u, p.last)], w[o >> 2u], w[(hb + 104u) >> 1u]);
    return r;
}",
            "fn unpack(r: Raw, hrow: u32, gb: u32, u: u32) -> Unit {
    let hb = hrow + (gb / GPB) * BLOCK_H;
    let odd = (hb & 1u) == 1u;
    let s = gb % GPB;
    let n = s / 4u;
    let g = s % 4u;
    let ql0 = select(r.a.x, (r.a.x >> 16u) | (r.a.y << 16u), odd);
    let ql1 = select(r.a.y, (r.a.y >> 16u) | (r.a.z << 16u), odd);
    let qh0 = select(r.a.w, (r.a.w >> 16u) | (r.b.x << 16u), odd);
    let qh1 = select(r.b.x, (r.b.x >> 16u) | (r.b.y << 16u), odd);
    let o = 2u * hb + 192u + 8u * n + 2u * g + u / 2u;
    let sc = (bitcast<i32>(r.b.z >> ((o & 3u) * 8u)) << 24u) >> 24u;
    // d at halfword hb + 104: the high half of its word when that is odd.
    let d = half_to_f32(select(r.b.w & 0xffffu, r.b.w >> 16u, odd));
    let ds = d * f32(sc);
    let sh = (g / 2u) * 4u;
    var un: Unit;
    un.a = ds * (nibbles(ql0, sh) + 16.0 * crumbs(qh0, 2u * g) - 32.0);
    un.b = ds * (nibbles(ql1, sh) + 16.0 * crumbs(qh1, 2u * g) - 32.0);
    un.pa = 8u * u;
    un.pb = 8u * u + 4u;
    return un;
}",
        ),
        // 176-byte super-blocks (word-aligned): Q4_K's d | dmin and scale words, the unit's 8
        // bytes of fifth bits (words 4 + 2u and the next) and 8 nibble bytes (12 + 8 (s / 2) +
        // 2u and the next).
        QuantFormat::Q5_K => (
            "struct Raw {
    a: vec4<u32>,
    b: vec4<u32>,
}
fn fetch(hrow: u32, gb: u32, u: u32, ok: bool) -> Raw {
    var r: Raw;
    if (!ok) {
        return r;
    }
    let i = (hrow + (gb / GPB) * BLOCK_H) >> 1u;
    let h = i + 4u + 2u * u;
    let q = i + 12u + 8u * ((gb % GPB) / 2u) + 2u * u;
    r.a = vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
    r.b = vec4<u32>(w[h], w[h + 1u], w[q], w[q + 1u]);
    return r;
}",
            "fn unpack(r: Raw, hrow: u32, gb: u32, u: u32) -> Unit {
    let s = gb % GPB;
    let sm = scale_min_k4_words(r.a.y, r.a.z, r.a.w, s);
    let d1 = half_to_f32(r.a.x & 0xffffu) * f32(sm.x);
    let m1 = half_to_f32(r.a.x >> 16u) * f32(sm.y);
    let sh = (s % 2u) * 4u;
    var un: Unit;
    un.a = d1 * (nibbles(r.b.z, sh) + 16.0 * byte_bits(r.b.x, s)) - m1;
    un.b = d1 * (nibbles(r.b.w, sh) + 16.0 * byte_bits(r.b.y, s)) - m1;
    un.pa = 8u * u;
    un.pb = 8u * u + 4u;
    return un;
}",
        ),
        // The other formats (Q5_0, Q5_1, Q2_K, Q3_K) fetch nothing ahead: the store decodes
        // the unit where it reads it (quant_common's decode_at), the flag in Raw saying whether
        // it is inside W (else zeros, at positions that cover the group's 32 values).
        _ => (
            "alias Raw = vec4<u32>;
fn fetch(hrow: u32, gb: u32, u: u32, ok: bool) -> Raw {
    return vec4<u32>(u32(ok), 0u, 0u, 0u);
}",
            "fn unpack(r: Raw, hrow: u32, gb: u32, u: u32) -> Unit {
    if (r.x == 0u) {
        var z: Unit;
        z.pa = 8u * u;
        z.pb = 8u * u + 4u;
        return z;
    }
    return decode_at(hrow, gb, u);
}",
        ),
    }
}

/// The WGSL of one format, x dtype (`t`: "f32" or "f16"), tiling and epilogue.
pub(super) fn source(format: QuantFormat, ty: &str, tiling: Tiling, glu: bool, with_res: bool, split: bool) -> String {
    let c = tiling.coop;
    let (nt, bm, bn, bps) = (c.threads(), c.bm(), c.bn(), tiling.bps());
    // x's tile: BM rows of 8 BPS vec4s; W's: BN rows of BPS blocks of 4 units.
    let row_chunks = 8 * bps;
    let (slots_a, slots_w) = (bm * row_chunks / nt, bn * bps * 4 / nt);
    let mut decl = String::new();
    let mut fetch0 = String::new();
    let mut fetch = String::new();
    let mut store = String::new();
    for i in 0..slots_a {
        decl += &format!("    var ra{i} = vec4<{ty}>(0);\n");
        for (dst, kb) in [(&mut fetch0, "kb0"), (&mut fetch, "b0 + BPS")] {
            *dst += &format!(
                "        {{
            let l = lid + {o}u;
            let gr = row0 + l / {row_chunks}u;
            let gk4 = ({kb}) * 8u + l % {row_chunks}u;
            var v = vec4<{ty}>(0);
            if (gr < p.m && gk4 < k4) {{
                v = x[gr * k4 + gk4];
            }}
            ra{i} = v;
        }}
",
                o = i * nt
            );
        }
        store += &format!(
            "        {{
            let l = lid + {o}u;
            As[(l / {row_chunks}u) * SA4 + l % {row_chunks}u] = vec4<f16>(ra{i});
        }}
",
            o = i * nt
        );
    }
    let upr = 4 * bps; // units per W row per step
    for i in 0..slots_w {
        decl += &format!("    var rw{i}: Raw;\n");
        for (dst, kb) in [(&mut fetch0, "kb0"), (&mut fetch, "b0 + BPS")] {
            *dst += &format!(
                "        {{
            let l = lid + {o}u;
            let gn = w_row(col0, l / {upr}u);
            let gb = ({kb}) + (l / 4u) % BPS;
            rw{i} = fetch(gn.x * p.row_h, gb, uu, gn.y == 1u && gb < p.blocks);
        }}
",
                o = i * nt
            );
        }
        store += &format!(
            "        {{
            let l = lid + {o}u;
            let bb = (l / 4u) % BPS;
            let un = unpack(rw{i}, w_row(col0, l / {upr}u).x * p.row_h, b0 + bb, uu);
            let o = (l / {upr}u) * SA4 + bb * 8u;
            Ws[o + un.pa / 4u] = vec4<f16>(un.a);
            Ws[o + un.pb / 4u] = vec4<f16>(un.b);
        }}
",
            o = i * nt
        );
    }
    let fetch_decl = format!("{decl}    {{\n{fetch0}    }}\n");
    // A split stores f32 partial sums, the epilogue left to the split sum.
    let (acc_decl, out_store) =
        if split { store_code(c, "f32", false, false) } else { store_code(c, ty, glu, with_res) };
    let mut inner = String::new();
    for i in 0..c.tm {
        inner += &format!(
            "            let a{i} = coopLoadT<coop_mat16x16<f16, A>>(&As[(wr + {i}u * 16u) * SA4 + kk / 4u], SA4);\n"
        );
    }
    // B[k][n] = Ws[n][k]: a column-major load.
    for j in 0..c.tn {
        inner += &format!(
            "            let b{j} = coopLoad<coop_mat16x16<f16, B>>(&Ws[(wc + {j}u * 16u) * SA4 + kk / 4u], SA4);\n"
        );
    }
    for i in 0..c.tm {
        for j in 0..c.tn {
            inner += &format!("            acc_{i}_{j} = coopMultiplyAdd(a{i}, b{j}, acc_{i}_{j});\n");
        }
    }
    let (fetch_fn, unpack_fn) = fetch_unpack(format);
    let w_row = if glu {
        "fn w_row(c0: u32, r: u32) -> vec2<u32> {
    let o = c0 + (r / 32u) * 16u + r % 16u;
    return vec2<u32>(o + select(0u, p.n_out, r % 32u >= 16u), u32(o < p.n_out));
}"
    } else {
        "fn w_row(c0: u32, r: u32) -> vec2<u32> {
    let o = c0 + r;
    return vec2<u32>(o, u32(o < p.n));
}"
    };
    let sa = (c.bk + 8) as usize;
    render(
        TEMPLATE,
        &[
            ("ENABLE", "enable f16;\nenable wgpu_cooperative_matrix;\n"),
            ("QUANT_COMMON", &format.common_wgsl()),
            ("T", ty),
            ("OUT_T", if split { "f32" } else { ty }),
            ("BM", &bm.to_string()),
            ("BN", &bn.to_string()),
            ("BPS", &bps.to_string()),
            ("WARPS_N", &c.warps_n.to_string()),
            ("WTM", &(c.tm * 16).to_string()),
            ("WTN", &(c.tn * 16).to_string()),
            ("SG", &c.sg.to_string()),
            ("NT", &nt.to_string()),
            ("AS_LEN", &(bm as usize * sa / 4).to_string()),
            ("WS_LEN", &(bn as usize * sa / 4).to_string()),
            ("CS_LEN", &(c.warps_m * c.warps_n * 256 * if glu { 2 } else { 1 }).to_string()),
            ("OUT_BN", &(bn / if glu { 2 } else { 1 }).to_string()),
            ("W_ROW_FN", w_row),
            (
                "RES_AND_PARAMS",
                // An unused binding would leave the pipeline's layout: the residual is bound only
                // where the kernel reads it.
                &if with_res && !split {
                    format!(
                        "@group(0) @binding(3) var<storage, read> res: array<{ty}>;\n\
                         @group(0) @binding(4) var<uniform> p: Params;"
                    )
                } else {
                    "@group(0) @binding(3) var<uniform> p: Params;".to_string()
                },
            ),
            ("FETCH_FN", fetch_fn),
            ("UNPACK_FN", unpack_fn),
            ("ACC_DECL", &acc_decl),
            ("FETCH_DECL", &fetch_decl),
            ("STORE_TILES", &store),
            ("FETCH_NEXT", &fetch),
            ("INNER", &inner),
            ("STORE", &out_store),
        ],
    )
}

/// The accumulator declarations and the store of the result through `Cs` with the epilogue:
/// per accumulator (or, under SwiGLU, per gate/up pair: accumulators j and j + 1 hold the
/// gate and up columns of the same 16 outputs) a coopStore into the subgroup's scratch, then
/// each lane writes its elements of y, checked against M and the columns of y.
fn store_code(c: CoopTiles, ty: &str, glu: bool, with_res: bool) -> (String, String) {
    let (decl, _, _) = cooperative_code(c, true, true, |_, _| String::new());
    let cs = if glu { 512 } else { 256 };
    let mut store = String::new();
    let step = if glu { 2 } else { 1 };
    for i in 0..c.tm {
        for j in (0..c.tn).step_by(step) {
            store += &format!("    coopStoreT(acc_{i}_{j}, &Cs[sg * {cs}u], 16u);\n");
            let (col, value) = if glu {
                store += &format!("    coopStoreT(acc_{i}_{}, &Cs[sg * {cs}u + 256u], 16u);\n", j + 1);
                (
                    format!("col0 + wc / 2u + {}u * 16u + e % 16u", j / 2),
                    format!("silu(Cs[sg * {cs}u + e]) * Cs[sg * {cs}u + 256u + e]"),
                )
            } else {
                (format!("col0 + wc + {j}u * 16u + e % 16u"), format!("Cs[sg * {cs}u + e]"))
            };
            // Unrolled over the lane's elements, the residual read for all of them first: a
            // loop that read, added and wrote one element at a time waited out a global read
            // per element.
            let per_lane = 256 / c.sg;
            let mut body = String::new();
            for t in 0..per_lane {
                body += &format!(
                    "        let e{t} = lane + {o}u;\n        let yr{t} = row0 + wr + {i}u * 16u + e{t} / 16u;\n",
                    o = t * c.sg
                );
                let col_t = col.replace("e % 16u", &format!("e{t} % 16u"));
                body += &format!("        let yc{t} = {col_t};\n        let ok{t} = yr{t} < p.m && yc{t} < p.n_out;\n");
                if with_res {
                    body += &format!(
                        "        var r{t} = 0.0;\n        if (ok{t}) {{\n            r{t} = f32(res[yr{t} * p.n_out + yc{t}]);\n        }}\n"
                    );
                }
            }
            for t in 0..per_lane {
                let v = value.replace("+ e]", &format!("+ e{t}]"));
                let r = if with_res { format!(" + r{t}") } else { String::new() };
                body += &format!(
                    "        if (ok{t}) {{\n            out[obase + yr{t} * p.n_out + yc{t}] = {ty}({v}{r});\n        }}\n"
                );
            }
            store += &format!("    workgroupBarrier();\n    {{\n{body}    }}\n    workgroupBarrier();\n");
        }
    }
    (decl, store)
}

/// The kernel's WGSL for `format`, x dtype `ty` ("f32" or "f16"), subgroup size `sg` and tiling
/// `[warps_m, warps_n, tm, tn, blocks per step]` (tests validate it with naga where no device
/// runs it).
#[doc(hidden)]
pub fn quant_coop_source_for_tests(
    format: QuantFormat,
    ty: &str,
    sg: u32,
    tiling: [u32; 5],
    glu: bool,
    res: bool,
) -> String {
    source(format, ty, Tiling::new(tiling, sg), glu, res, false)
}

/// The split-K forms' WGSL (tests validate them with naga): the product storing f32 partial
/// sums, and the sum of the slices with or without the residual.
#[doc(hidden)]
pub fn quant_coop_split_sources_for_tests(
    format: QuantFormat,
    ty: &str,
    sg: u32,
    tiling: [u32; 5],
    res: bool,
) -> (String, String) {
    (source(format, ty, Tiling::new(tiling, sg), false, false, true), split_sum_source(ty, res))
}

/// quant_coop_split_sum.wgsl for y's dtype `ty`, with or without the residual.
pub(super) fn split_sum_source(ty: &str, with_res: bool) -> String {
    let (bindings, store) = if with_res {
        (
            format!(
                "@group(0) @binding(2) var<storage, read> res: array<{ty}>;\n@group(0) @binding(3) var<uniform> p: Params;"
            ),
            format!("    out[i] = {ty}(y + f32(res[i]));"),
        )
    } else {
        ("@group(0) @binding(2) var<uniform> p: Params;".to_string(), format!("    out[i] = {ty}(y);"))
    };
    let enable = if ty == "f16" { "enable f16;\n" } else { "" };
    enable.to_string() + &render(SPLIT_SUM, &[("T", ty), ("RES_AND_PARAMS", &bindings), ("STORE", &store)])
}
