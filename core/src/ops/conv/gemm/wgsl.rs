//! The WGSL pieces of the GEMM kernels: the tile loads of a K step (shared with the
//! cooperative-matrix kernel) and the float kernel's register blocks.

use super::GemmTiles;
use crate::dtype::DType;
use std::sync::OnceLock;

const LANES: [&str; 4] = ["x", "y", "z", "w"];

/// How a kernel stores its tiles in workgroup memory: the element type, and the stores of a
/// weight value `v` at (`mm`, `kk`) and of a patch value `v` at (`kk`, `bc`).
pub(in crate::ops::conv) struct TileLayout {
    pub ty: &'static str,
    pub store_a: &'static str,
    pub store_b: &'static str,
}

/// `KILN_CONV_PREFETCH=0` turns off the register prefetch of the next K step (for tuning).
pub(in crate::ops::conv) fn prefetch() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    *P.get_or_init(|| std::env::var("KILN_CONV_PREFETCH").map_or(true, |v| v != "0"))
}

/// The tile loads of one K step for `bm` x `bn` x `bk` tiles and `nt` threads: (declarations
/// and first fetch, the loop's copy into workgroup memory, the fetch of the next step). With
/// `prefetch`, each thread holds its share of the next step in registers: the loop stores them,
/// and after the barrier reads the following step from global memory while this step's
/// products run. Without, the loop reads global memory straight into the tiles.
///
/// With `by_tap` (K ordered (ky, kx, c), see [`super::GemmLaunch::by_tap`]), each fetch of a step
/// first decodes the step's tap once (`step_of`), and every element is one load off it.
pub(in crate::ops::conv) fn tile_loads(
    l: &TileLayout,
    bm: u32,
    bn: u32,
    bk: u32,
    nt: u32,
    prefetch: bool,
    by_tap: bool,
) -> [String; 3] {
    let ty = l.ty;
    // The step variable each section's fetches read: the first fetch, the prefetch of the next
    // step, the loop's own fetch.
    let step = |kb: &str| match kb {
        "0u" => "st0",
        "k0" => "stl",
        _ => "stn",
    };
    let wt_at = |kb: &str| {
        if by_tap {
            format!("wt[wbase + gr * p.k + {}.woff + kk * p.khw]", step(kb))
        } else {
            "wt[wbase + gr * p.k + gk]".to_string()
        }
    };
    let rb = nt / bn;
    let na = (bm * bk).div_ceil(nt);
    let nb = bk / rb;
    let a_at = |i: u32, kb: &str| {
        let guard = if (i + 1) * nt > bm * bk { format!("l < {}u && ", bm * bk) } else { String::new() };
        format!(
            "        {{
            let l = lid + {}u;
            let mm = l / BK;
            let kk = l % BK;
            let gr = row0 + mm;
            let gk = {kb} + kk;
            var v = {ty}(0);
            if ({guard}gr < p.m && gk < p.k) {{
                v = {ty}({});
            }}
",
            i * nt,
            wt_at(kb)
        )
    };
    let b_at = |j: u32, kb: &str| {
        format!(
            "        {{
            let kk = br + {}u;
            let v = {ty}({});
",
            j * rb,
            if by_tap { format!("patch_step({}, kk)", step(kb)) } else { format!("patch_at({kb} + kk, col)") }
        )
    };
    let (mut decl, mut load, mut next) = (String::new(), String::new(), String::new());
    if by_tap {
        if prefetch {
            decl += "    let st0 = step_of(0u, col);\n";
            next += "        let stn = step_of(k0 + BK, col);\n";
        } else {
            load += "        let stl = step_of(k0, col);\n";
        }
    }
    let a_store = |i: u32| {
        let guard = if (i + 1) * nt > bm * bk { format!("if (l < {}u) {{ ", bm * bk) } else { "{ ".into() };
        format!(
            "            {guard}{} }}
        }}
",
            l.store_a
        )
    };
    for i in 0..na {
        if prefetch {
            decl += &format!(
                "    var ra{i} = {ty}(0);
"
            );
            let fetch = |kb: &str| {
                a_at(i, kb)
                    + &format!(
                        "            ra{i} = v;
        }}
"
                    )
            };
            next += &fetch("k0 + BK");
            decl += &fetch("0u").replace(
                "
        ",
                "
    ",
            );
            load += &format!(
                "        {{
            let l = lid + {}u;
            let mm = l / BK;
            let kk = l % BK;
            let v = ra{i};
",
                i * nt
            );
            load += &a_store(i);
        } else {
            load += &a_at(i, "k0");
            load += &a_store(i);
        }
    }
    for j in 0..nb {
        if prefetch {
            decl += &format!(
                "    var rb{j} = {ty}(0);
"
            );
            let fetch = |kb: &str| {
                b_at(j, kb)
                    + &format!(
                        "            rb{j} = v;
        }}
"
                    )
            };
            next += &fetch("k0 + BK");
            decl += &fetch("0u").replace(
                "
        ",
                "
    ",
            );
            load += &format!(
                "        {{
            let kk = br + {}u;
            let v = rb{j};
            {}
        }}
",
                j * rb,
                l.store_b
            );
        } else {
            load += &b_at(j, "k0");
            load += &format!(
                "            {}
        }}
",
                l.store_b
            );
        }
    }
    [decl, load, next]
}

/// The register-block code: accumulator declarations, the k steps, the NCHW store.
pub(super) fn generate(t: GemmTiles, dtype: DType, has_bias: bool) -> (String, String, String) {
    let (cm, cn) = (t.tm / 4, t.tn / 4);
    let mut decl = String::new();
    let mut inner = String::new();
    let mut store = String::new();
    for c in 0..cm {
        for r in 0..4 {
            for j in 0..cn {
                decl += &format!("    var acc_{c}_{r}_{j} = vec4<f32>(0);\n");
            }
        }
    }
    for kk in 0..t.bk {
        inner += "        {\n";
        for c in 0..cm {
            inner += &format!("            let a{c} = As[{kk}u * (BM / 4u) + {c}u * WGY + ty];\n");
        }
        for j in 0..cn {
            inner += &format!("            let b{j} = Bs[{kk}u * (BN / 4u) + {j}u * WGX + tx];\n");
        }
        for c in 0..cm {
            for (r, lane) in LANES.iter().enumerate() {
                for j in 0..cn {
                    inner +=
                        &format!("            acc_{c}_{r}_{j} = fma(vec4<f32>(a{c}.{lane}), b{j}, acc_{c}_{r}_{j});\n");
                }
            }
        }
        inner += "        }\n";
    }
    for j in 0..cn {
        for s in 0..4 {
            store += &format!("    let o_{j}_{s} = out_col(col0 + ({j}u * WGX + tx) * 4u + {s}u);\n");
        }
    }
    let out_t = dtype.wgsl();
    for c in 0..cm {
        for r in 0..4 {
            store += &format!(
                "    {{\n        let row = row0 + ({c}u * WGY + ty) * 4u + {r}u;\n        if (row < p.m) {{\n            let oc = tile.grp * p.m + row;\n            let ob = oc * p.ohw;\n"
            );
            store += if has_bias { "            let bv = f32(bias[oc]);\n" } else { "" };
            for j in 0..cn {
                for (s, lane) in LANES.iter().enumerate() {
                    let v = if has_bias {
                        format!("acc_{c}_{r}_{j}.{lane} + bv")
                    } else {
                        format!("acc_{c}_{r}_{j}.{lane}")
                    };
                    store += &format!(
                        "            if (o_{j}_{s} != 0xffffffffu) {{ out[o_{j}_{s} + ob] = {out_t}({v}); }}\n"
                    );
                }
            }
            store += "        }\n    }\n";
        }
    }
    (decl, inner, store)
}
