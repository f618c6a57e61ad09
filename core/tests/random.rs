mod common;
use common::*;
use kiln_core::reference::random as cpu;
use kiln_core::{ops, DType, ErrorCode};

const SHAPES: &[&[usize]] = &[&[0], &[1], &[2], &[3], &[7], &[13, 17], &[3, 1, 257], &[2, 0, 3], &[1031], &[4099]];

#[test]
fn uniform_f32_is_bit_exact_with_the_reference() {
    poison();
    for &seed in &[0u64, 1, 42, 0xDEAD_BEEF_0123_4567, u64::MAX] {
        for shape in SHAPES {
            for &(lo, hi) in &[(0.0, 1.0), (-3.0, 5.5), (1e-3, 2e-3), (-1.0, -0.999), (2.0, 2.0), (-1e6, 1e6)] {
                let t = ops::random_uniform(shape, DType::F32, seed, lo, hi).unwrap();
                assert_eq!(t.shape(), *shape);
                let n: usize = shape.iter().product();
                let got = t.to_vec::<f32>().unwrap();
                let want = cpu::uniform(n, DType::F32, seed, lo, hi);
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        (w as f32).to_bits(),
                        "seed {seed} {shape:?} [{lo}, {hi}) element {i}: {g} vs {w}"
                    );
                    if lo < hi {
                        assert!((g as f64) >= (lo as f32) as f64 && (g as f64) < hi, "{g} outside [{lo}, {hi})");
                    } else {
                        assert_eq!(g as f64, lo);
                    }
                }
            }
        }
    }
}

#[test]
fn uniform_unit_interval_is_the_raw_philox_bits() {
    // With [0, 1) the values are exactly (w >> 8) * 2^-24: check the words themselves.
    let t = ops::random_uniform(&[4 * 257 + 3], DType::F32, 7, 0.0, 1.0).unwrap();
    let got = t.to_vec::<f32>().unwrap();
    for (i, g) in got.iter().enumerate() {
        let w = cpu::bits(7, i);
        assert_eq!(*g as f64, (w >> 8) as f64 / 16777216.0, "element {i}");
    }
}

#[test]
fn uniform_f16_matches_reference() {
    if !has_f16() {
        assert_eq!(ops::random_uniform(&[4], DType::F16, 1, 0.0, 1.0).unwrap_err().code(), ErrorCode::Unsupported);
        return;
    }
    poison();
    for shape in SHAPES {
        for &(lo, hi) in &[(0.0, 1.0), (-3.0, 5.5)] {
            let t = ops::random_uniform(shape, DType::F16, 3, lo, hi).unwrap();
            let got = t.to_f64_vec().unwrap();
            let n: usize = shape.iter().product();
            let want = cpu::uniform(n, DType::F16, 3, lo, hi);
            // The f32 -> f16 rounding may go either way on some GPUs: one f16 ulp.
            let ulp = (hi.abs().max(lo.abs())) * 2f64.powi(-10);
            assert_close(&format!("uniform f16 {shape:?} [{lo}, {hi})"), &got, &want, ulp, 0.0);
            assert!(got.iter().all(|&g| g >= lo && g < hi), "f16 uniform outside [{lo}, {hi})");
        }
    }
}

#[test]
fn normal_matches_reference_within_tolerance() {
    poison();
    for dt in float_dtypes() {
        for &seed in &[0u64, 5, u64::MAX - 1] {
            for shape in SHAPES {
                for &(mean, std) in &[(0.0, 1.0), (3.0, 0.5), (-2.0, 10.0), (1.5, 0.0)] {
                    let t = ops::random_normal(shape, dt, seed, mean, std).unwrap();
                    assert_eq!(t.shape(), *shape);
                    let n: usize = shape.iter().product();
                    let got = t.to_f64_vec().unwrap();
                    let want = cpu::normal(n, dt, seed, mean, std);
                    // log / sin / cos differ by ulps between GPUs.
                    let (atol, rtol) =
                        if dt == DType::F32 { (2e-5 * (std + 1.0), 1e-5) } else { (2e-3 * (std + 1.0), 2e-3) };
                    assert_close(
                        &format!("normal {dt} seed {seed} {shape:?} ({mean}, {std})"),
                        &got,
                        &want,
                        atol,
                        rtol,
                    );
                }
            }
        }
    }
}

fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

#[test]
fn moments_are_sane() {
    let n = 200_003;
    // Uniform [-2, 4): mean 1, variance 36 / 12 = 3. Standard errors: 0.0039 and 0.006.
    let u = ops::random_uniform(&[n], DType::F32, 99, -2.0, 4.0).unwrap().to_f64_vec().unwrap();
    let (m, v) = moments(&u);
    assert!((m - 1.0).abs() < 0.03, "uniform mean {m}");
    assert!((v - 3.0).abs() < 0.05, "uniform variance {v}");
    assert!(u.iter().all(|&x| (-2.0..4.0).contains(&x)));
    // Normal(3, 2^2): standard errors 0.0045 and 0.013.
    let z = ops::random_normal(&[n], DType::F32, 100, 3.0, 2.0).unwrap().to_f64_vec().unwrap();
    let (m, v) = moments(&z);
    assert!((m - 3.0).abs() < 0.03, "normal mean {m}");
    assert!((v - 4.0).abs() < 0.1, "normal variance {v}");
    let within1 = z.iter().filter(|&&x| (x - 3.0).abs() < 2.0).count() as f64 / n as f64;
    assert!((within1 - 0.6827).abs() < 0.01, "P(|z| < 1) = {within1}");
    // Uniform buckets: 16 equal bins each within 5% of n / 16.
    let mut bins = [0usize; 16];
    for x in &u {
        bins[(((x + 2.0) / 6.0) * 16.0) as usize] += 1;
    }
    for b in bins {
        assert!((b as f64 - n as f64 / 16.0).abs() < 0.05 * n as f64 / 16.0, "bins {bins:?}");
    }
}

#[test]
fn seeds_differ_and_repeat() {
    let a = ops::random_uniform(&[1000], DType::F32, 1, 0.0, 1.0).unwrap().to_bytes().unwrap();
    let b = ops::random_uniform(&[1000], DType::F32, 2, 0.0, 1.0).unwrap().to_bytes().unwrap();
    let c = ops::random_uniform(&[1000], DType::F32, 1 << 32, 0.0, 1.0).unwrap().to_bytes().unwrap();
    let same = a.chunks(4).zip(b.chunks(4)).filter(|(x, y)| x == y).count();
    assert!(same < 5, "seeds 1 and 2 share {same} of 1000 values");
    assert_ne!(a, c, "the high half of the seed must matter");
    for _ in 0..3 {
        assert_eq!(ops::random_uniform(&[1000], DType::F32, 1, 0.0, 1.0).unwrap().to_bytes().unwrap(), a);
    }
    let n1 = ops::random_normal(&[1031], DType::F32, 8, 0.0, 1.0).unwrap().to_bytes().unwrap();
    let n2 = ops::random_normal(&[1031], DType::F32, 9, 0.0, 1.0).unwrap().to_bytes().unwrap();
    assert_ne!(n1, n2);
    for _ in 0..3 {
        assert_eq!(ops::random_normal(&[1031], DType::F32, 8, 0.0, 1.0).unwrap().to_bytes().unwrap(), n1);
    }
    // A prefix of a longer tensor is the shorter tensor (counter-based: element e is fixed).
    let long = ops::random_uniform(&[1003], DType::F32, 1, 0.0, 1.0).unwrap().to_bytes().unwrap();
    assert_eq!(&long[..4000], &a[..]);
}

#[test]
fn more_than_65535_workgroups() {
    // Each workgroup is 64 threads of 4 elements: 65536 * 256 + 9 elements need 65537.
    let n = 65536 * 256 + 9;
    let got = ops::random_uniform(&[n], DType::F32, 12345, -1.0, 1.0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got.len(), n);
    let (lo, span, cap) = cpu::uniform_params(DType::F32, -1.0, 1.0);
    let check = |i: usize| {
        let w = cpu::bits(12345, i);
        let want = (span * (((w >> 8) as f32) * 2f32.powi(-24)) + lo).min(cap);
        assert_eq!(got[i].to_bits(), want.to_bits(), "element {i}");
    };
    for i in (0..n).step_by(997).chain(n - 300..n).chain(65536 * 256 - 8..65536 * 256 + 8) {
        check(i);
    }
}

#[test]
fn errors_for_bad_input() {
    for dt in [DType::I32, DType::U32] {
        assert_eq!(ops::random_uniform(&[3], dt, 0, 0.0, 1.0).unwrap_err().code(), ErrorCode::DTypeMismatch);
        assert_eq!(ops::random_normal(&[3], dt, 0, 0.0, 1.0).unwrap_err().code(), ErrorCode::DTypeMismatch);
    }
    assert_eq!(ops::random_uniform(&[3], DType::F32, 0, 1.0, 0.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::random_uniform(&[3], DType::F32, 0, f64::NAN, 1.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::random_normal(&[3], DType::F32, 0, 0.0, -1.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(
        ops::random_normal(&[3], DType::F32, 0, f64::INFINITY, 1.0).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(ops::random_uniform(&[1; 9], DType::F32, 0, 0.0, 1.0).unwrap_err().code(), ErrorCode::InvalidArgument);
}
