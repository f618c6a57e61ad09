//! The plain tiled kernel (`shaders/matmul.wgsl`) for every dtype: the register-block code it is
//! generated with for a [`MatmulTiles`], and its launch.

use super::{MatmulTiles, Problem, COMMON};
use crate::device::Device;
use crate::dtype::DType;
use crate::exec::{enables, Launch};
use crate::pipeline::{render, Checks};
use crate::tensor::Tensor;
use crate::Result;

const TEMPLATE: &str = include_str!("../../../../shaders/matmul.wgsl");

const LANES: [&str; 4] = ["x", "y", "z", "w"];

/// The unrolled register-block code: accumulator declarations, the per-k update, the store.
fn generate(t: MatmulTiles, dtype: DType) -> (String, String, String) {
    let float = dtype.is_float();
    let acc_t = if float { "f32" } else { dtype.wgsl() };
    let (cm, cn) = (t.tm / 4, t.tn / 4);
    let mut decl = String::new();
    let mut inner = String::new();
    let mut store = String::new();
    for c in 0..cm {
        for r in 0..4 {
            for j in 0..cn {
                decl += &format!("    var acc_{c}_{r}_{j} = vec4<{acc_t}>(0);\n");
            }
        }
    }
    let unroll = t.unrolled();
    let steps: Vec<String> = if unroll { (0..t.bk).map(|k| format!("{k}u")).collect() } else { vec!["kk".into()] };
    for kk in &steps {
        inner += "            {\n";
        for c in 0..cm {
            inner += &format!("            let a{c} = As[{kk} * (BM / 4u) + {c}u * WGY + ty];\n");
        }
        for j in 0..cn {
            inner += &format!("            let b{j} = Bs[{kk} * (BN / 4u) + {j}u * WGX + tx];\n");
        }
        for c in 0..cm {
            for (r, lane) in LANES.iter().enumerate() {
                for j in 0..cn {
                    if float {
                        inner += &format!(
                            "            acc_{c}_{r}_{j} = fma(vec4<f32>(a{c}.{lane}), b{j}, acc_{c}_{r}_{j});\n"
                        );
                    } else {
                        inner += &format!("            acc_{c}_{r}_{j} += a{c}.{lane} * b{j};\n");
                    }
                }
            }
        }
        inner += "            }\n";
    }
    let out_t = dtype.wgsl();
    for c in 0..cm {
        for r in 0..4 {
            store += &format!("    {{\n        let row = row0 + ({c}u * WGY + ty) * 4u + {r}u;\n        if (row < p.m) {{\n            let base = coff + row * p.n;\n");
            for j in 0..cn {
                for (s, lane) in LANES.iter().enumerate() {
                    store += &format!(
                        "            {{ let col = col0 + ({j}u * WGX + tx) * 4u + {s}u; if (col < p.n) {{ c[base + col] = {out_t}(acc_{c}_{r}_{j}.{lane}); }} }}\n"
                    );
                }
            }
            store += "        }\n    }\n";
        }
    }
    (decl, inner, store)
}

/// The loops that copy one K-step of A and of B into workgroup memory. With `vec_a` (K a
/// multiple of 4) A is read as vec4s along k; with `vec_b` (N a multiple of 4) B as vec4s along n.
fn loads(acc: &str, vec_a: bool, vec_b: bool) -> (String, String) {
    let la = if vec_a {
        format!(
            "        // A tile, vec4 along k: consecutive threads take consecutive k of one row.
        for (var l = lid; l < BM * BK / 4u; l += NT) {{
            let mm = l / (BK / 4u);
            let kq = l % (BK / 4u);
            let gr = row0 + mm;
            let gk = k0 + kq * 4u;
            var v = vec4<{acc}>(0);
            if (gr < p.m && gk < p.k) {{
                v = vec4<{acc}>(a[(aoff + gr * p.k + gk) / 4u]);
            }}
            let i0 = kq * 4u * (BM / 4u) + mm / 4u;
            let lane = mm % 4u;
            As[i0][lane] = v.x;
            As[i0 + BM / 4u][lane] = v.y;
            As[i0 + 2u * (BM / 4u)][lane] = v.z;
            As[i0 + 3u * (BM / 4u)][lane] = v.w;
        }}
"
        )
    } else {
        format!(
            "        // A tile: consecutive threads take consecutive k of one row (coalesced reads).
        for (var l = lid; l < BM * BK; l += NT) {{
            let mm = l / BK;
            let kk = l % BK;
            let gr = row0 + mm;
            let gk = k0 + kk;
            var v = {acc}(0);
            if (gr < p.m && gk < p.k) {{
                v = {acc}(a[aoff + gr * p.k + gk]);
            }}
            As[kk * (BM / 4u) + mm / 4u][mm % 4u] = v;
        }}
"
        )
    };
    let lb = if vec_b {
        format!(
            "        // B tile, vec4 along n.
        for (var l = lid; l < BK * BN / 4u; l += NT) {{
            let kk = l / (BN / 4u);
            let nq = l % (BN / 4u);
            let gk = k0 + kk;
            let gc = col0 + nq * 4u;
            var v = vec4<{acc}>(0);
            if (gk < p.k && gc < p.n) {{
                v = vec4<{acc}>(b[(boff + gk * p.n + gc) / 4u]);
            }}
            Bs[kk * (BN / 4u) + nq] = v;
        }}
"
        )
    } else {
        format!(
            "        // B tile: consecutive threads take consecutive n of one k.
        for (var l = lid; l < BK * BN; l += NT) {{
            let kk = l / BN;
            let nn = l % BN;
            let gk = k0 + kk;
            let gc = col0 + nn;
            var v = {acc}(0);
            if (gk < p.k && gc < p.n) {{
                v = {acc}(b[boff + gk * p.n + gc]);
            }}
            Bs[kk * (BN / 4u) + nn / 4u][nn % 4u] = v;
        }}
"
        )
    };
    (la, lb)
}

/// Runs `a` x `b` into `out` with `tiles`.
pub(super) fn run(
    device: &Device,
    a: &Tensor,
    b: &Tensor,
    out: Tensor,
    tiles: MatmulTiles,
    problem: &Problem<'_>,
) -> Result<Tensor> {
    let dtype = a.dtype();
    let (n, k) = (problem.n, problem.k);
    let (params, groups) = problem.launch(device, tiles.bm, tiles.bn)?;
    let vec_a = k % 4 == 0 && tiles.bk.is_multiple_of(4);
    let vec_b = n.is_multiple_of(4);
    let key =
        format!("matmul:{dtype}:{}x{}x{}:{}x{}:{vec_a}:{vec_b}", tiles.bm, tiles.bn, tiles.bk, tiles.tm, tiles.tn);
    let tensors = [a, b, &out];
    let source = move || {
        let (decl, inner, store) = generate(tiles, dtype);
        let acc = if dtype.is_float() { "f32" } else { dtype.wgsl() };
        let (load_a, load_b) = loads(acc, vec_a, vec_b);
        let t = dtype.wgsl();
        let vt = format!("vec4<{t}>");
        render(
            TEMPLATE,
            &[
                ("ENABLE", enables(&[dtype])),
                ("MATMUL_COMMON", COMMON),
                ("T", t),
                ("A_ELEM", if vec_a { &vt } else { t }),
                ("B_ELEM", if vec_b { &vt } else { t }),
                ("LOAD_A", &load_a),
                ("LOAD_B", &load_b),
                ("ACC", acc),
                ("BM", &tiles.bm.to_string()),
                ("BN", &tiles.bn.to_string()),
                ("BK", &tiles.bk.to_string()),
                ("WGX", &tiles.threads_x().to_string()),
                ("WGY", &tiles.threads_y().to_string()),
                ("AS_LEN", &(tiles.bk * tiles.bm / 4).to_string()),
                ("BS_LEN", &(tiles.bk * tiles.bn / 4).to_string()),
                ("ACC_DECL", &decl),
                (
                    "K_STEPS",
                    &if tiles.unrolled() {
                        inner.clone()
                    } else {
                        format!("        for (var kk = 0u; kk < BK; kk++) {{\n{inner}        }}\n")
                    },
                ),
                ("STORE", &store),
            ],
        )
    };
    // Every index in the kernel is guarded (rows, columns and k against M, N, K; tile
    // indices by construction), and the test-suite runs every tiling on ragged shapes, so
    // naga's per-access bounds clamping is dropped (it costs the inner loop dearly).
    Launch { key, source: Box::new(source), tensors: &tensors, params: Some(params), groups }
        .run_with(device, Checks::Unchecked)?;
    Ok(out)
}
