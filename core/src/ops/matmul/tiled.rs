//! The plain tiled kernel (`shaders/matmul.wgsl`) for every dtype: the register-block code it is
//! generated with for a [`MatmulTiles`], and its launch.

use super::{MatmulKernel, MatmulTiles, Problem, COMMON};
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
            inner += &format!("            let a{c} = As[ao + {kk} * (BM / 4u) + {c}u * WGY + ty];\n");
        }
        for j in 0..cn {
            inner += &format!("            let b{j} = Bs[bo + {kk} * (BN / 4u) + {j}u * WGX + tx];\n");
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
    // A dispatch after the first of a split K (core/src/loop_budget.rs) goes on from the partial
    // sums the previous one stored: exact for f32 and the integers (C holds the accumulator's
    // own type; f16 is split as f32, see `super::matmul_impl`).
    decl += "    if (p.kbegin > 0u) {\n";
    for c in 0..cm {
        for r in 0..4 {
            decl += &format!("        {{\n        let row = row0 + ({c}u * WGY + ty) * 4u + {r}u;\n        if (row < p.m) {{\n            let base = coff + row * p.n;\n");
            for j in 0..cn {
                for (s, lane) in LANES.iter().enumerate() {
                    decl += &format!(
                        "            {{ let col = col0 + ({j}u * WGX + tx) * 4u + {s}u; if (col < p.n) {{ acc_{c}_{r}_{j}.{lane} = {acc_t}(c[base + col]); }} }}\n"
                    );
                }
            }
            decl += "        }\n        }\n";
        }
    }
    decl += "    }\n";
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

/// How the kernel stages its tiles (see [`super::MatmulKernel`]).
#[derive(Clone, Copy)]
struct Staging {
    /// A read as 4 rows x 4 k per task and stored as 4 vec4s along m (a register transpose),
    /// instead of one vec4 along k stored as 4 scalars; needs `vec_a`.
    quad_a: bool,
    /// Two copies of each tile: the next K step is fetched into registers before this one's
    /// arithmetic and stored into the other copy after it, one barrier per step.
    double: bool,
}

/// One operand's copy into workgroup memory, as tasks numbered 0..`tasks`: `fetch` reads task
/// `l` of the K step at `k0` into registers named with `{t}` (a slot), `store` writes them into
/// the tile copy at offset `o`.
struct Loader {
    tasks: u32,
    /// Registers per slot, as WGSL declarations with `{t}` for the slot.
    decl: String,
    fetch: String,
    store: String,
}

fn loader_a(acc: &str, t: MatmulTiles, vec_a: bool, quad_a: bool) -> Loader {
    let z4 = format!("vec4<{acc}>(0)");
    if vec_a && quad_a {
        // Task l: rows 4 mq .. 4 mq + 3 at k 4 kq .. 4 kq + 3, kq fastest (four neighbouring
        // threads read 64 contiguous bytes of a row), stored as 4 whole vec4s along m.
        let mut fetch = String::from(
            "            let kq = l % (BK / 4u);\n            let mq = l / (BK / 4u);\n            let gk = k0 + kq * 4u;\n",
        );
        for i in 0..4 {
            fetch += &format!(
                "            ra{{t}}_{i} = {z4};\n            if (row0 + mq * 4u + {i}u < p.m && gk < p.k) {{\n                ra{{t}}_{i} = vec4<{acc}>(a[(aoff + (row0 + mq * 4u + {i}u) * p.k + gk) / 4u]);\n            }}\n"
            );
        }
        let mut store = String::from("            let kq = l % (BK / 4u);\n            let mq = l / (BK / 4u);\n");
        for (kk, lane) in LANES.iter().enumerate() {
            store += &format!(
                "            As[o + (kq * 4u + {kk}u) * (BM / 4u) + mq] = vec4<{acc}>(ra{{t}}_0.{lane}, ra{{t}}_1.{lane}, ra{{t}}_2.{lane}, ra{{t}}_3.{lane});\n"
            );
        }
        let decl = (0..4).map(|i| format!("    var ra{{t}}_{i} = {z4};\n")).collect();
        Loader { tasks: t.bm * t.bk / 16, decl, fetch, store }
    } else if vec_a {
        // Task l: one vec4 along k of row mm (consecutive threads, consecutive k), stored
        // transposed one scalar at a time.
        Loader {
            tasks: t.bm * t.bk / 4,
            decl: format!("    var ra{{t}} = {z4};\n"),
            fetch: format!(
                "            let gr = row0 + l / (BK / 4u);\n            let gk = k0 + (l % (BK / 4u)) * 4u;\n            ra{{t}} = {z4};\n            if (gr < p.m && gk < p.k) {{\n                ra{{t}} = vec4<{acc}>(a[(aoff + gr * p.k + gk) / 4u]);\n            }}\n"
            ),
            store: "            let mm = l / (BK / 4u);\n            let i0 = o + (l % (BK / 4u)) * 4u * (BM / 4u) + mm / 4u;\n            let lane = mm % 4u;\n            As[i0][lane] = ra{t}.x;\n            As[i0 + BM / 4u][lane] = ra{t}.y;\n            As[i0 + 2u * (BM / 4u)][lane] = ra{t}.z;\n            As[i0 + 3u * (BM / 4u)][lane] = ra{t}.w;\n".into(),
        }
    } else {
        Loader {
            tasks: t.bm * t.bk,
            decl: format!("    var ra{{t}} = {acc}(0);\n"),
            fetch: format!(
                "            let gr = row0 + l / BK;\n            let gk = k0 + l % BK;\n            ra{{t}} = {acc}(0);\n            if (gr < p.m && gk < p.k) {{\n                ra{{t}} = {acc}(a[aoff + gr * p.k + gk]);\n            }}\n"
            ),
            store: "            let mm = l / BK;\n            As[o + (l % BK) * (BM / 4u) + mm / 4u][mm % 4u] = ra{t};\n".into(),
        }
    }
}

fn loader_b(acc: &str, t: MatmulTiles, vec_b: bool) -> Loader {
    if vec_b {
        Loader {
            tasks: t.bk * t.bn / 4,
            decl: format!("    var rb{{t}} = vec4<{acc}>(0);\n"),
            fetch: format!(
                "            let gk = k0 + l / (BN / 4u);\n            let gc = col0 + (l % (BN / 4u)) * 4u;\n            rb{{t}} = vec4<{acc}>(0);\n            if (gk < p.k && gc < p.n) {{\n                rb{{t}} = vec4<{acc}>(b[(boff + gk * p.n + gc) / 4u]);\n            }}\n"
            ),
            store: "            Bs[o + l] = rb{t};\n".into(),
        }
    } else {
        Loader {
            tasks: t.bk * t.bn,
            decl: format!("    var rb{{t}} = {acc}(0);\n"),
            fetch: format!(
                "            let gk = k0 + l / BN;\n            let gc = col0 + l % BN;\n            rb{{t}} = {acc}(0);\n            if (gk < p.k && gc < p.n) {{\n                rb{{t}} = {acc}(b[boff + gk * p.n + gc]);\n            }}\n"
            ),
            store: "            let nn = l % BN;\n            Bs[o + (l / BN) * (BN / 4u) + nn / 4u][nn % 4u] = rb{t};\n".into(),
        }
    }
}

/// Registers (4-byte words) one thread holds to prefetch a K step with `double` staging.
fn prefetch_words(t: MatmulTiles, vec_a: bool, vec_b: bool, quad_a: bool) -> u32 {
    let nt = t.threads_x() * t.threads_y();
    let (a, b) = (loader_a("f32", t, vec_a, quad_a), loader_b("f32", t, vec_b));
    let wa = if vec_a && quad_a {
        16
    } else if vec_a {
        4
    } else {
        1
    };
    let wb = if vec_b { 4 } else { 1 };
    a.tasks.div_ceil(nt) * wa + b.tasks.div_ceil(nt) * wb
}

/// Double staging is used where its prefetch registers stay few (the big tilings: 24 words for
/// HUGE) and two copies of the tiles fit the adapter's workgroup memory.
fn double_fits(t: MatmulTiles, vec_a: bool, vec_b: bool, quad_a: bool, limits: &wgpu::Limits) -> bool {
    prefetch_words(t, vec_a, vec_b, quad_a) <= 32 && 2 * t.shared_bytes() <= limits.max_compute_workgroup_storage_size
}

/// The main loop over K: with single staging a runtime loop of loads and stores, two barriers
/// per step; with double staging unrolled fetches into registers around the arithmetic.
fn main_loop(acc: &str, t: MatmulTiles, vec_a: bool, vec_b: bool, st: Staging, k_steps: &str) -> String {
    let la = loader_a(acc, t, vec_a, st.quad_a);
    let lb = loader_b(acc, t, vec_b);
    let slot = |code: &str, i: u32| code.replace("{t}", &i.to_string());
    if !st.double {
        let one = |l: &Loader, tile: &str| {
            format!(
                "{}        for (var l = lid; l < {}u; l += NT) {{\n        {{\n{}        }}\n        {{\n{}        }}\n        }}\n",
                slot(&l.decl, 0).replace("    var", "        var"),
                l.tasks,
                slot(&l.fetch, 0),
                slot(&l.store, 0).replace("o + ", &format!("{tile} + "))
            )
        };
        return format!(
            "    let ao = 0u;\n    let bo = 0u;\n    for (var k0 = p.kbegin; k0 < p.kend; k0 += BK) {{\n        {{\n{}        }}\n        {{\n{}        }}\n        workgroupBarrier();\n{k_steps}\n        workgroupBarrier();\n    }}\n",
            one(&la, "0u"),
            one(&lb, "0u")
        );
    }
    let nt = t.threads_x() * t.threads_y();
    let mut decl = String::new();
    let mut fetch = String::new();
    // The stores into the copy at `oa` (A) and `ob` (B), indented by `ind`.
    let stores = |oa: &str, ob: &str, ind: &str| {
        let mut s = String::new();
        for (l, o) in [(&la, oa), (&lb, ob)] {
            for i in 0..l.tasks.div_ceil(nt) {
                s += &guarded(l, i, nt, &slot(&l.store, i).replace("o + ", &format!("{o} + ")));
            }
        }
        indent(&s, ind)
    };
    for l in [&la, &lb] {
        for i in 0..l.tasks.div_ceil(nt) {
            decl += &slot(&l.decl, i);
            fetch += &guarded(l, i, nt, &slot(&l.fetch, i));
        }
    }
    format!(
        "{decl}    var k0 = p.kbegin;\n{}{}    workgroupBarrier();\n    var cur = 0u;\n    for (; k0 < p.kend; k0 += BK) {{\n        let ao = cur * AS_LEN;\n        let bo = cur * BS_LEN;\n        let more = k0 + BK < p.kend;\n        if (more) {{\n            let k0 = k0 + BK;\n{}        }}\n{k_steps}\n        if (more) {{\n{}        }}\n        cur = 1u - cur;\n        workgroupBarrier();\n    }}\n",
        indent(&fetch, ""),
        stores("0u", "0u", ""),
        indent(&fetch, "    "),
        stores("(AS_LEN - ao)", "(BS_LEN - bo)", "    ")
    )
}

/// Loop passes (core/src/loop_budget.rs) one invocation makes per K step: the K loop's own,
/// the tile copies' strided loops (single staging; double staging spells them out) and the
/// k steps' loop where it is not unrolled.
fn loop_passes_per_step(t: MatmulTiles, vec_a: bool, vec_b: bool, st: Staging) -> u64 {
    use crate::loop_budget::strided_passes;
    let nt = (t.threads_x() * t.threads_y()) as u64;
    let copies = if st.double {
        0
    } else {
        strided_passes(loader_a("f32", t, vec_a, st.quad_a).tasks as u64, nt)
            + strided_passes(loader_b("f32", t, vec_b).tasks as u64, nt)
    };
    let k_steps = if t.unrolled() { 0 } else { t.bk as u64 + 1 };
    1 + copies + k_steps
}

/// `body` for slot `i` of `l` (task lid + i NT), guarded where the slot passes the last task.
fn guarded(l: &Loader, i: u32, nt: u32, body: &str) -> String {
    let guard = if (i + 1) * nt <= l.tasks { String::new() } else { format!("if (lid + {}u < {}u) ", i * nt, l.tasks) };
    format!("    {guard}{{\n        let l = lid + {}u;\n{body}    }}\n", i * nt)
}

fn indent(s: &str, ind: &str) -> String {
    s.lines().map(|l| format!("{ind}{l}\n")).collect()
}

/// Runs `a` x `b` into `out` with `tiles`, K split over dispatches of `split_steps` K steps
/// where given, else where the adapter's loop limiter needs it.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    device: &Device,
    a: &Tensor,
    b: &Tensor,
    out: Tensor,
    tiles: MatmulTiles,
    kernel: MatmulKernel,
    problem: &Problem<'_>,
    split_steps: Option<u64>,
) -> Result<Tensor> {
    let dtype = a.dtype();
    let (n, k) = (problem.n, problem.k);
    let vec_a = k % 4 == 0 && tiles.bk.is_multiple_of(4);
    let vec_b = n.is_multiple_of(4);
    let quad_a = kernel.quad_a && vec_a;
    let double = kernel.double_staging && double_fits(tiles, vec_a, vec_b, quad_a, device.limits());
    let st = Staging { quad_a, double };
    let key = format!(
        "matmul:{dtype}:{}x{}x{}:{}x{}:{vec_a}:{vec_b}:{quad_a}:{double}",
        tiles.bm, tiles.bn, tiles.bk, tiles.tm, tiles.tn
    );
    let tensors = [a, b, &out];
    let per_step = loop_passes_per_step(tiles, vec_a, vec_b, st);
    let max_steps = split_steps.or_else(|| crate::loop_budget::steps_per_dispatch(device, per_step, 0));
    let kranges = crate::loop_budget::chunks(k, tiles.bk as usize, max_steps);
    if kranges.len() > 1 && dtype == DType::F16 {
        // Split K carries the partial sums in C: in f16 they would be rounded between
        // dispatches, so the product runs in f32 (the f16 kernel widens on load and
        // accumulates in f32 too) and is rounded once at the end, as the f16 kernel does.
        let (a32, b32) = (crate::ops::cast(a, DType::F32)?, crate::ops::cast(b, DType::F32)?);
        let out32 = Tensor::empty_on(a.device(), out.shape(), DType::F32)?;
        let c32 = run(device, &a32, &b32, out32, tiles, kernel, problem, split_steps)?;
        return crate::ops::cast(&c32, DType::F16);
    }
    let source = move || {
        let (decl, inner, store) = generate(tiles, dtype);
        let acc = if dtype.is_float() { "f32" } else { dtype.wgsl() };
        let k_steps = if tiles.unrolled() {
            inner.clone()
        } else {
            format!("        for (var kk = 0u; kk < BK; kk++) {{\n{inner}        }}\n")
        };
        let main = main_loop(acc, tiles, vec_a, vec_b, st, &k_steps);
        let copies = if double { 2 } else { 1 };
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
                ("MAIN_LOOP", &main),
                ("ACC", acc),
                ("BM", &tiles.bm.to_string()),
                ("BN", &tiles.bn.to_string()),
                ("BK", &tiles.bk.to_string()),
                ("WGX", &tiles.threads_x().to_string()),
                ("WGY", &tiles.threads_y().to_string()),
                ("AS_LEN", &(tiles.bk * tiles.bm / 4).to_string()),
                ("BS_LEN", &(tiles.bk * tiles.bn / 4).to_string()),
                ("AS_TOTAL", &(copies * tiles.bk * tiles.bm / 4).to_string()),
                ("BS_TOTAL", &(copies * tiles.bk * tiles.bn / 4).to_string()),
                ("ACC_DECL", &decl),
                ("STORE", &store),
            ],
        )
    };
    // Every index in the kernel is guarded (rows, columns and k against M, N, K; tile
    // indices by construction), and the test-suite runs every tiling on ragged shapes, so
    // naga's per-access bounds clamping is dropped (it costs the inner loop dearly).
    for krange in kranges {
        let (params, groups) = problem.launch_k(device, tiles.bm, tiles.bn, krange)?;
        Launch { key: key.clone(), source: Box::new(source), tensors: &tensors, params: Some(params), groups }
            .run_with(device, Checks::Unchecked)?;
    }
    Ok(out)
}
