//! Shared test helpers: seeded random inputs, tolerance checks, output poisoning.
#![allow(dead_code)]

use kiln_core::{dtype::f64_to_bytes, DType, Tensor};

/// SplitMix64: a tiny seeded generator so tests need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }
}

/// Random values of `dtype` in [lo, hi] (rounded to the dtype), uploaded, and the host copy.
pub fn rand_tensor(rng: &mut Rng, shape: &[usize], dtype: DType, lo: f64, hi: f64) -> (Tensor, Vec<f64>) {
    let n: usize = shape.iter().product();
    let vals: Vec<f64> = (0..n)
        .map(|_| match dtype {
            DType::I32 | DType::U32 => rng.int(lo as i64, hi as i64) as f64,
            DType::Bool => rng.int(0, 1) as f64,
            _ => kiln_core::reference::round_to(dtype, rng.uniform(lo, hi)),
        })
        .collect();
    let t = Tensor::from_bytes(&f64_to_bytes(dtype, &vals), shape, dtype).unwrap();
    (t, vals)
}

/// Asserts |got - want| <= atol + rtol * |want| elementwise (NaN never passes unless both NaN).
#[track_caller]
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length {} vs reference {}", got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= atol + rtol * w.abs();
        assert!(ok, "{what}: element {i}: got {g}, reference {w} (atol {atol}, rtol {rtol})");
    }
}

/// Tolerance for results of a given dtype: (atol, rtol).
pub fn tol(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (1e-5, 1e-5),
        DType::F16 => (2e-3, 2e-3),
        _ => (0.0, 0.0),
    }
}

/// Turns on output poisoning for the default device (every new tensor starts as 0xFF bytes).
pub fn poison() {
    kiln_core::device().unwrap().set_poison_allocations(true);
}

/// Shapes every op family is tried on: empty, one element, primes, more than one workgroup.
pub const AWKWARD: &[&[usize]] = &[&[0], &[1], &[7], &[13, 17], &[3, 1, 257], &[2, 0, 3], &[1031]];

pub fn has_f16() -> bool {
    kiln_core::device().unwrap().has_f16()
}

pub fn float_dtypes() -> Vec<DType> {
    if has_f16() {
        vec![DType::F32, DType::F16]
    } else {
        vec![DType::F32]
    }
}

/// Every invocation runs `p.n` dependent steps (lavapipe ends a shader's loops after 65535
/// iterations in all, so long work is made of many invocations rather than one long loop). The
/// runaway work of the timeout tests.
pub const SPIN: &str = "
struct P { n: u32 }
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    var acc = o[id.x];
    for (var i = 0u; i < p.n; i++) { acc = fract(acc * 1.618034 + f32(i & 7u) * 0.1) + 5.0; }
    o[id.x] = acc;
}";

/// `groups` workgroups of [`SPIN`] at `steps` steps, dispatched on the current device.
pub fn spin(groups: u32, steps: u32) -> Tensor {
    let k = kiln_core::Kernel::new(SPIN, "main").unwrap();
    let o = kiln_core::ops::zeros(&[groups as usize * 64], DType::F32).unwrap();
    k.dispatch(&[&o], Some(&steps.to_le_bytes()), [groups, 1, 1]).unwrap();
    o
}

/// Workgroups of `spin(_, steps)` that run about `target` on this machine now, timed on 50 of
/// them on the current device. A fixed count measured once went stale: 1000 workgroups were
/// ~5 s on a loaded machine and finished inside a 1.5 s timeout on an idle one.
pub fn spin_groups_for(target: std::time::Duration, steps: u32) -> u32 {
    let t = std::time::Instant::now();
    spin(50, steps).to_vec::<f32>().unwrap();
    let per_group = t.elapsed().as_secs_f64() / 50.0;
    ((target.as_secs_f64() / per_group).ceil() as u32).clamp(200, 20_000)
}

/// Parses and validates a generated WGSL source (every capability: which variants run is the
/// adapter's choice) and writes it as SPIR-V, panicking with `what` and naga's message: the
/// check of kernel variants an adapter here cannot run (lavapipe has no cooperative matrices).
#[track_caller]
pub fn assert_wgsl_compiles(what: &str, src: &str) {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    naga::back::spv::write_vec(&module, &info, &Default::default(), None).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// A tensor of `dt` holding `vals` (rounded to `dt` by `f64_to_bytes`).
pub fn upload(vals: &[f64], shape: &[usize], dt: DType) -> Tensor {
    Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(dt, vals), shape, dt).unwrap()
}

/// Every dtype this device runs (f16 only where it has it).
pub fn all_dtypes() -> Vec<DType> {
    DType::ALL.into_iter().filter(|d| *d != DType::F16 || has_f16()).collect()
}

/// Values that exercise an order: one of `special` (values of `dt`), a small integer (so ties are
/// common and their order shows) or a uniform value in [-100, 100), each equally likely, rounded
/// to `dt` (integers floored, u32 made non-negative, bool 0/1).
pub fn awkward_values(rng: &mut Rng, dt: DType, n: usize, special: &[f64]) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let v = match rng.int(0, 2) {
                0 => special[rng.int(0, special.len() as i64 - 1) as usize],
                1 => rng.int(-3, 3) as f64,
                _ => rng.uniform(-100.0, 100.0),
            };
            let v = match dt {
                DType::U32 => v.abs().floor(),
                DType::I32 => v.floor(),
                DType::Bool => (v != 0.0) as u8 as f64,
                _ => v,
            };
            kiln_core::reference::round_to(dt, v)
        })
        .collect()
}

/// Bit-exact equality of values read back as f64 (the sign of zero counts; any NaN matches any
/// NaN, as f16 and f32 NaNs read back as some f64 NaN).
#[track_caller]
pub fn assert_same(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        assert!(ok, "{what}: element {i}: got {g:?}, reference {w:?}");
    }
}
