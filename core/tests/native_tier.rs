//! The native kernel tier (core/src/native/, shaders/native/): the probe and the tier choice on
//! whatever adapter runs the tests (lavapipe: the WGSL tier), the SPIR-V passthrough path through
//! a plain kernel (any adapter with passthrough shaders, lavapipe included), and the native f16
//! matmul on ragged shapes against the CPU reference (only where the tier is available: an
//! adapter with 16x16x16 f16 -> f32 cooperative matrices, e.g. the H100; prints a skip line
//! elsewhere).

mod common;
use common::*;
use kiln_core::native::Tier;
use kiln_core::ops;
use kiln_core::reference::matmul as cpu;
use kiln_core::{DType, Tensor};

fn native_matmul_available() -> bool {
    kiln_core::device().unwrap().native_caps().matmul_f16()
}

#[test]
fn probe_picks_the_tier_it_reports() {
    let dev = kiln_core::device().unwrap();
    let c = dev.native_caps();
    eprintln!(
        "adapter {}: passthrough {}, coop f16 16x16x16 -> f32 {}, shapes {:?}; NV cooperative matrix 2 {}: {:?}",
        dev.info().name,
        c.passthrough,
        c.coop_f16_16x16x16_f32,
        c.coop_shapes,
        c.cm2_note,
        c.cm2
    );
    let cm2_tilings: Vec<&str> = ops::native_tilings()
        .into_iter()
        .filter(|t| t.starts_with("cm2_") && ops::native_tiling_available(&dev, t))
        .collect();
    eprintln!("cm2 tilings this device runs: {cm2_tilings:?}");
    let big = ops::matmul_tier(&dev, DType::F16, 4096, 4096, 4096);
    // Native exactly where the probe allows it, for this large aligned product.
    assert_eq!(big == Tier::Native, c.matmul_f16(), "tier {big:?} against the probe {c:?}");
    // Never native: other dtypes, and products below one 16x16x16 step.
    assert_eq!(ops::matmul_tier(&dev, DType::F32, 4096, 4096, 4096), Tier::Wgsl);
    assert_eq!(ops::matmul_tier(&dev, DType::F16, 1, 4096, 4096), Tier::Wgsl);
    if std::env::var("KILN_NATIVE_TILES").is_err() {
        // Outside the measured class (small, or K / N not multiples of 8): the WGSL tier;
        // from 128x128 NV cooperative matrix 2's 128x128 tiling (cm2_m) where it runs.
        assert_eq!(ops::matmul_tier(&dev, DType::F16, 100, 256, 256), Tier::Wgsl);
        let mid = ops::native_tiling_available(&dev, "cm2_m");
        assert_eq!(ops::native_tiling_for(&dev, 256, 256, 256), mid.then_some("cm2_m"));
        // K not a multiple of 8: only NV cooperative matrix 2's clamped loads take it (its
        // default tile, cm2_l32: the fastest measured on the H200).
        let ragged = ops::matmul_tier(&dev, DType::F16, 4096, 4096, 4095);
        let cm2 = ops::native_tiling_available(&dev, "cm2_l32");
        assert_eq!(ragged == Tier::Native, cm2, "ragged K: tier {ragged:?}, cm2_l32 runs: {cm2}");
        if cm2 {
            assert_eq!(ops::native_tiling_for(&dev, 4096, 4096, 4096), Some("cm2_l32"));
        }
    }
    // The extension is on exactly where the device was opened with it, and then some tiling of
    // shaders/native/matmul_f16_cm2.comp must fit the driver's flexible configurations (if none
    // does, kernels.txt's tiles miss every configuration the probe printed above).
    assert_eq!(c.cm2.is_some(), c.cm2_note == "on", "{c:?}");
    if c.cm2.is_some() && c.matmul_f16() {
        assert!(!cm2_tilings.is_empty(), "NV cooperative matrix 2 is on but no cm2 tiling fits: {:?}", c.cm2);
    }
    if std::env::var("KILN_NATIVE_CM2").is_ok_and(|v| v == "0") {
        assert!(c.cm2.is_none() && c.cm2_note.contains("KILN_NATIVE_CM2=0"), "{c:?}");
    }
    // Mesa's lavapipe has no cooperative matrices: the WGSL tier, with its exact results.
    if dev.info().name.contains("llvmpipe") {
        assert!(!c.coop_f16_16x16x16_f32 && big == Tier::Wgsl, "lavapipe must run the WGSL tier: {c:?}");
        assert!(c.cm2.is_none() && cm2_tilings.is_empty(), "lavapipe has no NV cooperative matrix 2: {c:?}");
    }
    if std::env::var("KILN_NATIVE_KERNELS").is_ok_and(|v| v == "0") {
        assert!(!c.passthrough && big == Tier::Wgsl, "KILN_NATIVE_KERNELS=0 leaves the tier on: {c:?}");
    }
}

#[test]
fn every_kernels_txt_line_is_a_module() {
    let txt = include_str!("../../shaders/native/kernels.txt");
    let listed: Vec<&str> = txt
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(listed, kiln_core::native_kernels::module_names());
}

#[test]
fn spirv_passthrough_runs_a_plain_kernel() {
    let dev = kiln_core::device().unwrap();
    let mut rng = Rng::new(30);
    for n in [0usize, 1, 63, 64, 65, 1031] {
        let av: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
        let bv: Vec<u32> = (0..n).map(|i| if i % 3 == 0 { u32::MAX } else { rng.next_u64() as u32 }).collect();
        let a = Tensor::from_slice(&av, &[n]).unwrap();
        let b = Tensor::from_slice(&bv, &[n]).unwrap();
        let got = kiln_core::native_kernels::plumbing_add(&a, &b);
        if !dev.native_caps().passthrough {
            assert!(got.is_err(), "a passthrough kernel ran without the feature");
            eprintln!("no passthrough shaders on {}: the plumbing kernel is refused, as it must be", dev.info().name);
            return;
        }
        let got = got.unwrap().to_vec::<u32>().unwrap();
        let want: Vec<u32> = av.iter().zip(&bv).map(|(x, y)| x.wrapping_add(*y)).collect();
        assert_eq!(got, want, "n = {n}");
    }
}

/// Integer-valued inputs in [-3, 3]: every partial sum is an integer below 2^24, exact in f32 in
/// any order, so the f16 output must equal the reference's rounding exactly: a check of the
/// indexing (every element, every tile edge) that no summation order can blur.
fn exact_case(rng: &mut Rng, sa: &[usize], sb: &[usize], tiling: &str) {
    let ints = |rng: &mut Rng, n: usize| -> Vec<f64> { (0..n).map(|_| rng.int(-3, 3) as f64).collect() };
    let av = ints(rng, sa.iter().product());
    let bv = ints(rng, sb.iter().product());
    let a = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(DType::F16, &av), sa, DType::F16).unwrap();
    let b = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(DType::F16, &bv), sb, DType::F16).unwrap();
    let c = ops::matmul_native_with(&a, &b, tiling).unwrap_or_else(|e| panic!("{sa:?} x {sb:?} {tiling}: {e}"));
    let (want, shape) = cpu::matmul(&av, sa, &bv, sb).unwrap();
    let want: Vec<f64> = want.iter().map(|&w| kiln_core::reference::round_to(DType::F16, w)).collect();
    assert_eq!(c.shape(), &shape[..]);
    assert_close(&format!("native {tiling} {sa:?} x {sb:?} (exact)"), &c.to_f64_vec().unwrap(), &want, 0.0, 0.0);
}

#[test]
fn native_matmul_ragged_shapes_match_the_reference() {
    if !native_matmul_available() {
        eprintln!("no native f16 matmul on this adapter: skipped (runs where the tier is)");
        return;
    }
    poison();
    let mut rng = Rng::new(3030);
    // (m, n, k): 1, 15, 17, 4097 and non-multiples of every tile (16, 64, 128, 256, BK 16/32),
    // plus aligned ones (K and N multiples of 8: the 16-byte variant) with ragged M.
    let shapes: &[(usize, usize, usize)] = &[
        (1, 1, 1),
        (1, 4097, 17),
        (15, 17, 1),
        (17, 15, 4097),
        (4097, 15, 33),
        (129, 257, 72),
        (200, 136, 40),
        (257, 264, 264),
        (64, 64, 8),
        (130, 520, 4096),
        (0, 16, 16),
        (16, 16, 0),
    ];
    let dev = kiln_core::device().unwrap();
    for tiling in ops::native_tilings() {
        if !ops::native_tiling_available(&dev, tiling) {
            eprintln!("native tiling {tiling}: not on this device ({}), skipped", dev.native_caps().cm2_note);
            continue;
        }
        for &(m, n, k) in shapes {
            exact_case(&mut rng, &[m, k], &[k, n], tiling);
        }
        // Batched, with broadcast batch dimensions (A [3, 1], B [1, 2]) and a ragged tail.
        exact_case(&mut rng, &[3, 1, 33, 24], &[1, 2, 24, 40], tiling);
        exact_case(&mut rng, &[2, 17, 19], &[2, 19, 23], tiling);
        // Batched with K a multiple of 64 and N of 8: the cm2 kernels' unclamped interior tiles
        // (whole tiles inside M x N, at batch offsets) next to clamped edge tiles, broadcast too.
        exact_case(&mut rng, &[2, 300, 128], &[2, 128, 264], tiling);
        exact_case(&mut rng, &[3, 1, 260, 64], &[1, 2, 64, 520], tiling);
        // One A for every batch of B (conv2d 1x1's w @ x[n]), ragged M and N, K below BK.
        exact_case(&mut rng, &[136, 24], &[3, 24, 200], tiling);
    }
}

#[test]
fn native_matmul_random_values_within_the_f16_tolerance() {
    if !native_matmul_available() {
        eprintln!("no native f16 matmul on this adapter: skipped (runs where the tier is)");
        return;
    }
    poison();
    let mut rng = Rng::new(3031);
    for &(m, n, k) in &[(1000usize, 1000usize, 1000usize), (513, 1031, 777), (4096, 256, 4096), (17, 4097, 4097)] {
        let (a, av) = rand_tensor(&mut rng, &[m, k], DType::F16, -1.0, 1.0);
        let (b, bv) = rand_tensor(&mut rng, &[k, n], DType::F16, -1.0, 1.0);
        let (want, _) = cpu::matmul(&av, &[m, k], &bv, &[k, n]).unwrap();
        for tiling in ops::native_tilings() {
            if !ops::native_tiling_available(&kiln_core::device().unwrap(), tiling) {
                continue;
            }
            let c = ops::matmul_native_with(&a, &b, tiling).unwrap();
            // The stated f16 tolerance (core/tests/matmul.rs's mm_tol): f32 accumulation in the
            // hardware's order, one f16 rounding at the end.
            let (atol, rtol) = (1e-3 + 2e-5 * k as f64, 2e-3);
            let what = format!("native {tiling} matmul {m}x{k} x {k}x{n}");
            assert_close(&what, &c.to_f64_vec().unwrap(), &want, atol, rtol);
        }
    }
}

/// The probe's reading of VK_NV_cooperative_matrix2's structures (`Cm2Caps::from_raw`) and its
/// admission of a tile, on made-up driver answers: the H100-class answer admits the cm2 tiles;
/// each missing feature, a limit below the tile, a granularity that does not divide it, another
/// workgroup size, scope or type refuses them.
#[test]
fn cm2_probe_reads_the_feature_structs() {
    use kiln_core::native::{Cm2Caps, Cm2Flexible};
    let wg = |inv: u32, m: u32, n: u32| Cm2Flexible {
        m_granularity: m,
        n_granularity: n,
        k_granularity: 16,
        types: [0, 0, 1, 1],
        saturating: false,
        scope: 2,
        invocations: inv,
    };
    let flex = vec![wg(128, 32, 16), wg(256, 32, 32)];
    let caps = Cm2Caps::from_raw([1, 1, 1, 1, 1, 1, 1], [1024, 256, 4096], flex.clone());
    assert!(caps.workgroup_scope && caps.flexible_dimensions && caps.tensor_addressing && caps.block_loads);
    assert_eq!(
        (caps.workgroup_scope_max_invocations, caps.flexible_max_dimension, caps.reserved_shared_memory),
        (1024, 256, 4096)
    );
    for (bm, bn, bk) in [(128, 256, 64), (256, 128, 64), (128, 256, 32), (128, 128, 64)] {
        assert!(caps.fits_matmul_f16(bm, bn, bk, 256), "{bm}x{bn} BK {bk}");
    }
    assert!(caps.fits_matmul_f16(64, 64, 32, 128));
    // Features in declaration order: each of the three the kernel uses is required.
    for off in [0usize, 1, 5] {
        let mut f = [1u32; 7];
        f[off] = 0;
        assert!(
            !Cm2Caps::from_raw(f, [1024, 256, 4096], flex.clone()).fits_matmul_f16(128, 128, 64, 256),
            "feature {off}"
        );
    }
    // The others are not.
    assert!(Cm2Caps::from_raw([1, 1, 0, 0, 0, 1, 0], [1024, 256, 0], flex.clone()).fits_matmul_f16(128, 128, 64, 256));
    // Limits: invocations and the largest dimension.
    assert!(!Cm2Caps::from_raw([1; 7], [128, 256, 0], flex.clone()).fits_matmul_f16(128, 128, 64, 256));
    assert!(!Cm2Caps::from_raw([1; 7], [1024, 128, 0], flex.clone()).fits_matmul_f16(128, 256, 64, 256));
    // No configuration of that workgroup size, granularities that do not divide the tile.
    assert!(!caps.fits_matmul_f16(128, 128, 64, 512));
    assert!(!caps.fits_matmul_f16(48, 64, 64, 256));
    assert!(!caps.fits_matmul_f16(128, 128, 40, 256));
    // Subgroup scope, f16 accumulators, saturating: not the kernel's configuration.
    for bad in [
        Cm2Flexible { scope: 3, ..wg(256, 32, 32) },
        Cm2Flexible { types: [0, 0, 0, 0], ..wg(256, 32, 32) },
        Cm2Flexible { saturating: true, ..wg(256, 32, 32) },
        Cm2Flexible { m_granularity: 0, ..wg(256, 32, 32) },
    ] {
        assert!(!Cm2Caps::from_raw([1; 7], [1024, 256, 0], vec![bad]).fits_matmul_f16(128, 128, 64, 256), "{bad:?}");
    }
    assert!(!Cm2Caps::default().fits_matmul_f16(128, 128, 64, 256));
    // The attention kernel: the matmul's features plus reductions (2), conversions (3) and
    // per-element operations (4); its three products' dimensions divided by one configuration.
    assert!(caps.fits_attention_f16(128, 64, 32, 64, 64));
    assert!(caps.fits_attention_f16(128, 64, 64, 128, 128));
    for off in [0usize, 1, 2, 3, 4, 5] {
        let mut f = [1u32; 7];
        f[off] = 0;
        assert!(!Cm2Caps::from_raw(f, [1024, 256, 0], flex.clone()).fits_attention_f16(128, 64, 32, 64, 64), "{off}");
    }
    // M granularity 32 (rows 48: no), N 16 (keys 24 or head size 72: no), K 16 (head size 72: no).
    assert!(!caps.fits_attention_f16(128, 48, 32, 64, 64));
    assert!(!caps.fits_attention_f16(128, 64, 24, 64, 64));
    assert!(!caps.fits_attention_f16(128, 64, 32, 72, 72));
    assert!(!caps.fits_attention_f16(64, 64, 32, 64, 64));
    assert!(!Cm2Caps::from_raw([1; 7], [1024, 64, 0], flex.clone()).fits_attention_f16(128, 64, 32, 128, 128));
}

/// `matmul` itself (whichever tier and tiling it picks here: NV cooperative matrix 2's `cm2_l`
/// for the large products where the device has it, the WGSL tier on lavapipe) gives the
/// reference's exact result on ragged and batched integer-valued products; and a cm2 tiling
/// this device cannot run is refused with Unsupported, never run.
#[test]
fn matmul_default_tier_is_exact_on_ragged_shapes() {
    let dev = kiln_core::device().unwrap();
    poison();
    let mut rng = Rng::new(3032);
    for (sa, sb) in [
        (vec![513usize, 33], vec![33usize, 520]),
        (vec![600, 17], vec![17, 515]),
        (vec![2, 512, 24], vec![2, 24, 513]),
        (vec![17, 15], vec![15, 4097]),
        (vec![136, 24], vec![3, 24, 200]),
    ] {
        let ints = |rng: &mut Rng, n: usize| -> Vec<f64> { (0..n).map(|_| rng.int(-3, 3) as f64).collect() };
        let av = ints(&mut rng, sa.iter().product());
        let bv = ints(&mut rng, sb.iter().product());
        let a = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(DType::F16, &av), &sa, DType::F16).unwrap();
        let b = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(DType::F16, &bv), &sb, DType::F16).unwrap();
        let (m, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
        let path = ops::native_tiling_for(&dev, m, n, k).unwrap_or("wgsl");
        let c = ops::matmul(&a, &b).unwrap();
        let (want, shape) = cpu::matmul(&av, &sa, &bv, &sb).unwrap();
        let want: Vec<f64> = want.iter().map(|&w| kiln_core::reference::round_to(DType::F16, w)).collect();
        assert_eq!(c.shape(), &shape[..]);
        assert_close(&format!("matmul ({path}) {sa:?} x {sb:?} (exact)"), &c.to_f64_vec().unwrap(), &want, 0.0, 0.0);
    }
    let a = Tensor::from_bytes(&[0u8; 2 * 16 * 16], &[16, 16], DType::F16).unwrap();
    for t in ops::native_tilings() {
        if !ops::native_tiling_available(&dev, t) {
            match ops::matmul_native_with(&a, &a, t) {
                Err(kiln_core::Error::Unsupported(_)) => {}
                other => panic!("tiling {t} is not available here, yet matmul_native_with gave {other:?}"),
            }
        }
    }
}
