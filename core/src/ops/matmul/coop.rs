//! f16 on cooperative matrices (tensor cores), where the device has wgpu's experimental
//! cooperative-matrix feature with a 16x16x16 f16 configuration and one subgroup size
//! (`shaders/matmul_coop.wgsl`). Anything else (other dtypes, explicit tilings, small or vector
//! products, adapters without the feature, `KILN_NO_COOP=1`) runs the tiled kernel.

use super::{Problem, COMMON};
use crate::device::Device;
use crate::exec::Launch;
use crate::pipeline::{render, Checks};
use crate::tensor::Tensor;
use crate::Result;
use std::sync::OnceLock;

const COOP_TEMPLATE: &str = include_str!("../../../../shaders/matmul_coop.wgsl");

/// A tiling of the cooperative-matrix kernels (`shaders/matmul_coop.wgsl`, and conv's
/// `shaders/conv_coop.wgsl`): `warps_m` x `warps_n` subgroups, each owning `tm` x `tn` 16x16
/// accumulators, walking K in steps of `bk` (a multiple of 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoopTiles {
    pub(crate) warps_m: u32,
    pub(crate) warps_n: u32,
    pub(crate) tm: u32,
    pub(crate) tn: u32,
    pub(crate) bk: u32,
    /// The subgroup size (invocations per subgroup).
    pub(crate) sg: u32,
    /// Accumulator type: "f32" where the hardware has f16 x f16 -> f32, else "f16".
    pub(crate) acc: &'static str,
}

impl CoopTiles {
    pub(crate) fn bm(self) -> u32 {
        self.warps_m * self.tm * 16
    }
    pub(crate) fn bn(self) -> u32 {
        self.warps_n * self.tn * 16
    }
    pub(crate) fn threads(self) -> u32 {
        self.warps_m * self.warps_n * self.sg
    }
    /// The A and B tiles (f16, rows padded by 8 halves against bank conflicts) and one 16x16
    /// accumulator scratch per subgroup.
    pub(crate) fn shared_bytes(self) -> u32 {
        let acc_bytes = if self.acc == "f32" { 4 } else { 2 };
        (self.bm() * (self.bk + 8) + self.bk * (self.bn() + 8)) * 2 + self.warps_m * self.warps_n * 256 * acc_bytes
    }
    pub(crate) fn fits(self, limits: &wgpu::Limits) -> bool {
        self.threads() <= limits.max_compute_workgroup_size_x
            && self.threads() <= limits.max_compute_invocations_per_workgroup
            && self.shared_bytes() <= limits.max_compute_workgroup_storage_size
    }
}

/// The accumulator type the device's cooperative matrices offer for 16x16x16 f16 products:
/// f32 where there is an f16 x f16 -> f32 configuration, else f16; None without one.
pub fn coop_accumulator(device: &Device) -> Option<&'static str> {
    if !(device.has_cooperative_matrix() && device.has_subgroups() && device.has_f16()) {
        return None;
    }
    use wgpu::CooperativeScalarType as S;
    let has = |cr: S| {
        device
            .coop_props
            .iter()
            .any(|p| p.m_size == 16 && p.n_size == 16 && p.k_size == 16 && p.ab_type == S::F16 && p.cr_type == cr)
    };
    if has(S::F32) {
        Some("f32")
    } else if has(S::F16) {
        Some("f16")
    } else {
        None
    }
}

/// Whether `matmul` of f16 `m` x `k` by `k` x `n` runs on cooperative matrices on `device`.
pub fn uses_cooperative_matrix(device: &Device, m: usize, n: usize, k: usize) -> bool {
    pick(device, m, n, k).is_some()
}

/// The (large, small) cooperative-matrix tilings for subgroup size `sg` and accumulator `acc`.
fn coop_tilings(sg: u32, acc: &'static str) -> (CoopTiles, CoopTiles) {
    (
        CoopTiles { warps_m: 2, warps_n: 2, tm: 4, tn: 4, bk: 32, sg, acc },
        CoopTiles { warps_m: 2, warps_n: 2, tm: 2, tn: 2, bk: 32, sg, acc },
    )
}

/// `KILN_COOP_TILES=warps_m,warps_n,tm,tn,bk` (tuning), read once: None where unset or malformed.
fn env_tiles() -> Option<[u32; 5]> {
    static T: OnceLock<Option<[u32; 5]>> = OnceLock::new();
    *T.get_or_init(|| {
        let [warps_m, warps_n, tm, tn, bk] = crate::env::env_u32s("KILN_COOP_TILES")?;
        (bk % 16 == 0 && bk > 0 && warps_m * warps_n * tm * tn > 0).then_some([warps_m, warps_n, tm, tn, bk])
    })
}

/// Whether vec4-aligned tiles are stored into workgroup memory as vec4s rather than one f16 at a
/// time: `KILN_COOP_VEC=1` (tuning; off by default: 164.9-166.6 -> 165.6 TFLOP/s at 4096^3 on the
/// H100, no gain, as the staging stores are ~0.07 of the kernel's 0.83 ms, see `part`).
fn vec_tiles() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| std::env::var("KILN_COOP_VEC").is_ok_and(|v| v == "1"))
}

/// Whether rows whose length is a multiple of 8 are read 8 halves at a time (one 16-byte
/// vec4<u32> read, unpacked into two vec4<f16> workgroup stores): on unless `KILN_COOP_WIDE=0`.
/// Measured on the H100 at 4096^3: 166 -> 257 TFLOP/s (twice each, same run), as the split
/// predicted (the global reads were the exposed part: loads and staging alone 0.55 -> 0.42 ms).
/// Tiles of u32 read by `coopLoad` as f16 fail the NVIDIA driver's compile, hence the unpacking.
fn wide_loads() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| std::env::var("KILN_COOP_WIDE").map_or(true, |v| v != "0"))
}

/// Timing-only variants that drop a part of the kernel (results are wrong): `KILN_COOP_PART=
/// noload` (the global reads after the first K step), `nomath` (the cooperative products),
/// `mathonly` (no global reads nor workgroup stores). Splits the kernel's time between loads,
/// staging and math: at 4096^3 on the H100 0.83 ms whole, 0.35 without the global reads, 0.55
/// without the products, 0.28 products and barriers alone (483 TFLOP/s): the global reads are
/// what one K step of register prefetch leaves exposed.
fn part() -> &'static str {
    static P: OnceLock<String> = OnceLock::new();
    P.get_or_init(|| std::env::var("KILN_COOP_PART").unwrap_or_default())
}

/// The cooperative-matrix tiling for an f16 `m` x `k` by `k` x `n` product on `device`, or None
/// where the tiled kernel runs it.
pub(super) fn pick(device: &Device, m: usize, n: usize, k: usize) -> Option<CoopTiles> {
    let acc = coop_accumulator(device)?;
    let sg = device.subgroup_size.filter(|s| (8..=128).contains(s))?;
    // Below one 16x16x16 step the tensor-core tiles are mostly padding.
    if m < 16 || n < 16 || k < 16 {
        return None;
    }
    // 128x128 tiles of 2x2 subgroups, each owning 4x4 accumulators (every A/B fragment used four
    // times), with the next K step prefetched into registers: 158 TFLOP/s at 4096^3 on an H200
    // (2x4 subgroups of 4x2 without prefetch: 72; 2x4 of 4x2 with prefetch: 105).
    let (large, small) = coop_tilings(sg, acc);
    let mut wanted = if m >= 512 && n >= 512 { large } else { small };
    if let Some([warps_m, warps_n, tm, tn, bk]) = env_tiles() {
        wanted = CoopTiles { warps_m, warps_n, tm, tn, bk, ..wanted };
    }
    [wanted, small].into_iter().find(|t| t.fits(device.limits()))
}

/// The cooperative-matrix code of one tiling: accumulator declarations, the products of one K
/// step (`va`, `vb`: the tiles are arrays of vec4<f16>), the store through workgroup memory.
/// `write(i, j)` gives the lines that write element `e` of accumulator (i, j) (row `row`
/// known): matmul writes C, conv its NCHW output with the bias.
pub(crate) fn cooperative_code(
    t: CoopTiles,
    va: bool,
    vb: bool,
    write: impl Fn(u32, u32) -> String,
) -> (String, String, String) {
    let acc = t.acc;
    let mut decl = String::new();
    let mut inner = String::new();
    let mut store = String::new();
    for i in 0..t.tm {
        for j in 0..t.tn {
            decl += &format!("    var acc_{i}_{j} = coop_mat16x16<{acc}, C>();\n");
        }
    }
    for i in 0..t.tm {
        inner += &if va {
            format!("            let a{i} = coopLoadT<coop_mat16x16<f16, A>>(&As[(wr + {i}u * 16u) * SA4 + kk / 4u], SA4);\n")
        } else {
            format!("            let a{i} = coopLoadT<coop_mat16x16<f16, A>>(&As[(wr + {i}u * 16u) * SA + kk], SA);\n")
        };
    }
    for j in 0..t.tn {
        inner += &if vb {
            format!(
                "            let b{j} = coopLoadT<coop_mat16x16<f16, B>>(&Bs[kk * SB4 + wc / 4u + {}u], SB4);\n",
                j * 4
            )
        } else {
            format!("            let b{j} = coopLoadT<coop_mat16x16<f16, B>>(&Bs[kk * SB + wc + {j}u * 16u], SB);\n")
        };
    }
    for i in 0..t.tm {
        for j in 0..t.tn {
            inner += &format!("            acc_{i}_{j} = coopMultiplyAdd(a{i}, b{j}, acc_{i}_{j});\n");
        }
    }
    for i in 0..t.tm {
        for j in 0..t.tn {
            store += &format!(
                "    coopStoreT(acc_{i}_{j}, &Cs[sg * 256u], 16u);
    workgroupBarrier();
    for (var e = lane; e < 256u; e += SG) {{
        let row = row0 + wr + {i}u * 16u + e / 16u;
{}    }}
    workgroupBarrier();
",
                write(i, j)
            );
        }
    }
    (decl, inner, store)
}

/// Matmul's write of one accumulator element into C.
fn write_c(_i: u32, j: u32) -> String {
    format!(
        "        let col = col0 + wc + {j}u * 16u + e % 16u;
        if (row < p.m && col < p.n) {{
            c[coff + row * p.n + col] = f16(Cs[sg * 256u + e]);
        }}
"
    )
}

/// Register-prefetched tile loads: each invocation holds its share of the next A and B
/// tiles (`w` halves per global read: 4 where the rows are vec4-aligned, else 1) in
/// registers; the K loop stores them into workgroup memory, then reads the following K step
/// from global memory while the cooperative products of this one run. Returns
/// (declarations + first fetch, store A, store B, fetch of the next step).
fn prefetched(t: CoopTiles, wa: u32, wb: u32, vec_tiles: bool) -> (String, String, String, String) {
    let nt = t.threads();
    let (bm, bn, bk) = (t.bm(), t.bn(), t.bk);
    let mut decl = String::new();
    let mut fetch0 = String::new();
    let mut fetch = String::new();
    let mut st_a = String::new();
    let mut st_b = String::new();
    let comps = ["x", "y", "z", "w"];
    // (name, vec, chunks per row, total chunks)
    for (name, w) in [("a", wa), ("b", wb)] {
        let vec = w > 1;
        // Eight halves per global read travel as a vec4<u32>, unpacked into two vec4<f16> stores.
        let ty = match w {
            8 => "vec4<u32>",
            4 => "vec4<f16>",
            _ => "f16",
        };
        let vec_tiles = vec_tiles || w == 8;
        let (row_chunks, total) = if name == "a" { (bk / w, bm * bk / w) } else { (bn / w, bk * bn / w) };
        let count = total.div_ceil(nt);
        for i in 0..count {
            let guard = if (i + 1) * nt > total { format!("l < {total}u && ") } else { String::new() };
            decl += &format!("    var r{name}{i} = {ty}(0);\n");
            for (dst, kb) in [(&mut fetch0, "0u"), (&mut fetch, "k0 + BK")] {
                let cond_load = if name == "a" {
                    let idx =
                        if vec { format!("(aoff + gr * p.k + gk) / {w}u") } else { "aoff + gr * p.k + gk".into() };
                    format!(
                        "let gr = row0 + l / {row_chunks}u;
            let gk = {kb} + (l % {row_chunks}u) * {w}u;
            var v = {ty}(0);
            if ({guard}gr < p.m && gk < p.k) {{
                v = a[{idx}];
            }}"
                    )
                } else {
                    let idx =
                        if vec { format!("(boff + gk * p.n + gc) / {w}u") } else { "boff + gk * p.n + gc".into() };
                    format!(
                        "let gk = {kb} + l / {row_chunks}u;
            let gc = col0 + (l % {row_chunks}u) * {w}u;
            var v = {ty}(0);
            if ({guard}gk < p.k && gc < p.n) {{
                v = b[{idx}];
            }}"
                    )
                };
                *dst += &format!(
                    "        {{
            let l = lid + {}u;
            {cond_load}
            r{name}{i} = v;
        }}
",
                    i * nt
                );
            }
            let (arr, stride, dst) = if name == "a" { ("As", "SA", &mut st_a) } else { ("Bs", "SB", &mut st_b) };
            let close = if guard.is_empty() { "" } else { "}\n" };
            let open = if guard.is_empty() { String::new() } else { format!("if (lid + {}u < {total}u) {{\n", i * nt) };
            let at = if vec && vec_tiles {
                format!("let o4 = (l / {row_chunks}u) * {stride}4 + (l % {row_chunks}u) * {}u;", w / 4)
            } else {
                format!("let o = (l / {row_chunks}u) * {stride} + (l % {row_chunks}u) * {w}u;")
            };
            *dst += &format!("        {{\n        {open}    let l = lid + {}u;\n            {at}\n", i * nt);
            if w == 8 {
                let h = |c: &str| format!("vec2<f16>(unpack2x16float(r{name}{i}.{c}))");
                *dst += &format!("            {arr}[o4] = vec4<f16>({}, {});\n", h("x"), h("y"));
                *dst += &format!("            {arr}[o4 + 1u] = vec4<f16>({}, {});\n", h("z"), h("w"));
            } else if vec && vec_tiles {
                *dst += &format!("            {arr}[o4] = r{name}{i};\n");
            } else if vec {
                for (c, comp) in comps.iter().enumerate() {
                    *dst += &format!("            {arr}[o + {c}u] = r{name}{i}.{comp};\n");
                }
            } else {
                *dst += &format!("            {arr}[o] = r{name}{i};\n");
            }
            *dst += &format!("        {close}}}\n");
        }
    }
    decl += "    {\n    let k0 = 0u;\n";
    decl += &fetch0;
    decl += "    }\n";
    (decl, st_a, st_b, fetch)
}

/// The WGSL of one tiling (also used by the tests to check it through naga): `vec_a`, `vec_b`
/// where A's and B's rows are vec4-aligned, `vec_tiles` to keep them as vec4s in workgroup
/// memory too, `part` a timing-only variant ([`part`]; "" for the kernel).
fn source(t: CoopTiles, wa: u32, wb: u32, vec_tiles: bool, part: &str) -> String {
    // vec4<f16> tiles where the reads are 8 wide, or 4 wide and `vec_tiles`.
    let (va, vb) = (wa == 8 || (wa == 4 && vec_tiles), wb == 8 || (wb == 4 && vec_tiles));
    let elem = |w: u32| match w {
        8 => "vec4<u32>",
        4 => "vec4<f16>",
        _ => "f16",
    };
    let (decl, mut inner, store) = cooperative_code(t, va, vb, write_c);
    let (pre_decl, mut load_a, mut load_b, mut pre_next) = prefetched(t, wa, wb, vec_tiles);
    match part {
        "noload" => pre_next.clear(),
        "nomath" => inner.clear(),
        "mathonly" => {
            pre_next.clear();
            load_a.clear();
            load_b.clear();
        }
        _ => {}
    }
    let warps = t.warps_m * t.warps_n;
    render(
        COOP_TEMPLATE,
        &[
            ("ENABLE", "enable f16;\nenable wgpu_cooperative_matrix;\n"),
            ("MATMUL_COMMON", COMMON),
            ("A_ELEM", elem(wa)),
            ("B_ELEM", elem(wb)),
            ("ACC", t.acc),
            ("BM", &t.bm().to_string()),
            ("BN", &t.bn().to_string()),
            ("BK", &t.bk.to_string()),
            ("WARPS_N", &t.warps_n.to_string()),
            ("WTM", &(t.tm * 16).to_string()),
            ("WTN", &(t.tn * 16).to_string()),
            ("SG", &t.sg.to_string()),
            ("NT", &t.threads().to_string()),
            ("AS_ELEM", if va { "vec4<f16>" } else { "f16" }),
            ("BS_ELEM", if vb { "vec4<f16>" } else { "f16" }),
            ("AS_LEN", &(t.bm() * (t.bk + 8) / if va { 4 } else { 1 }).to_string()),
            ("BS_LEN", &(t.bk * (t.bn() + 8) / if vb { 4 } else { 1 }).to_string()),
            ("CS_LEN", &(warps * 256).to_string()),
            ("LOAD_A", &load_a),
            ("LOAD_B", &load_b),
            ("PREFETCH_DECL", &pre_decl),
            ("PREFETCH_NEXT", &pre_next),
            ("ACC_DECL", &decl),
            ("INNER", &inner),
            ("STORE", &store),
        ],
    )
}

pub(super) fn run(
    device: &Device,
    a: &Tensor,
    b: &Tensor,
    out: Tensor,
    t: CoopTiles,
    problem: &Problem<'_>,
) -> Result<Tensor> {
    let (params, groups) = problem.launch(device, t.bm(), t.bn())?;
    let (k, n) = (problem.k, problem.n);
    let width = |x: usize| {
        if x.is_multiple_of(8) && wide_loads() {
            8
        } else if x.is_multiple_of(4) {
            4
        } else {
            1
        }
    };
    let (wa, wb) = (width(k), width(n));
    let (vec_tiles, part) = (vec_tiles(), part());
    let key = format!(
        "matmul_coop:{}x{}:{}x{}:{}:{}:{}:{wa}:{wb}:{vec_tiles}:{part}",
        t.warps_m, t.warps_n, t.tm, t.tn, t.bk, t.sg, t.acc
    );
    // Every global index is guarded against M, N, K and the workgroup-memory indices are in
    // range by construction; the tests run ragged shapes through this kernel on devices that
    // have it.
    let tensors = [a, b, &out];
    Launch {
        key,
        source: Box::new(move || source(t, wa, wb, vec_tiles, part)),
        tensors: &tensors,
        params: Some(params),
        groups,
    }
    .run_with(device, Checks::Unchecked)?;
    Ok(out)
}

/// The cooperative-matrix kernel's WGSL for a given shape class (tests validate it with naga
/// where no device runs it): `acc` "f32" or "f16", subgroup size `sg`, `large` tiling or not.
#[doc(hidden)]
pub fn coop_source_for_tests(acc: &'static str, sg: u32, large: bool, wa: u32, wb: u32, vec_tiles: bool) -> String {
    let (large_t, small_t) = coop_tilings(sg, acc);
    source(if large { large_t } else { small_t }, wa, wb, vec_tiles, "")
}
