mod common;
use common::*;
use kiln_core::dtype::f64_to_bytes;
use kiln_core::reference::movement as cpu;
use kiln_core::{ops, DType, ErrorCode, Tensor};

/// Every dtype this adapter can move.
fn dtypes() -> Vec<DType> {
    DType::ALL.into_iter().filter(|d| *d != DType::F16 || has_f16()).collect()
}

fn rand_any(rng: &mut Rng, shape: &[usize], dt: DType) -> (Tensor, Vec<f64>) {
    match dt {
        DType::U32 => rand_tensor(rng, shape, dt, 0.0, 4e9),
        DType::I32 => rand_tensor(rng, shape, dt, -2e9, 2e9),
        _ => rand_tensor(rng, shape, dt, -100.0, 100.0),
    }
}

/// Movement is exact: the output bytes must equal the reference values encoded in the dtype.
#[track_caller]
fn assert_bytes(what: &str, got: &Tensor, want: &[f64], want_shape: &[usize]) {
    assert_eq!(got.shape(), want_shape, "{what}: shape");
    let g = got.to_bytes().unwrap();
    let w = f64_to_bytes(got.dtype(), want);
    if g != w {
        let gv = got.to_f64_vec().unwrap();
        let bad = gv.iter().zip(want).position(|(a, b)| a.to_bits() != b.to_bits()).unwrap_or(0);
        panic!("{what}: element {bad} of {}: got {}, reference {}", want.len(), gv[bad], want[bad]);
    }
}

fn idx_tensor(v: &[i64], dt: DType) -> Tensor {
    match dt {
        DType::I32 => Tensor::from_slice(&v.iter().map(|&x| x as i32).collect::<Vec<_>>(), &[v.len()]).unwrap(),
        _ => Tensor::from_slice(&v.iter().map(|&x| x as u32).collect::<Vec<_>>(), &[v.len()]).unwrap(),
    }
}

#[test]
fn reshape_is_zero_copy() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let y = ops::reshape(&x, &[3, -1]).unwrap();
    assert_eq!(y.shape(), &[3, 2]);
    assert!(y.shares_buffer(&x));
    assert_eq!(y.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    assert_eq!(ops::reshape(&x, &[4, -1]).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::reshape(&x, &[-1, -1]).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn permute_matches_reference_up_to_rank_8() {
    poison();
    let mut rng = Rng::new(11);
    let cases: &[(&[usize], &[isize])] = &[
        (&[], &[]),
        (&[0], &[0]),
        (&[1], &[-1]),
        (&[7], &[0]),
        (&[13, 17], &[1, 0]),
        (&[67, 131], &[-1, -2]),
        (&[3, 1, 257], &[2, 0, 1]),
        (&[2, 0, 3], &[1, 2, 0]),
        (&[2, 3, 5, 7], &[3, 1, 0, 2]),
        (&[2, 3, 1, 2, 5], &[4, 2, 0, 3, 1]),
        (&[2, 1, 3, 2, 1, 2, 3, 2], &[7, 0, 5, 2, 6, 1, 4, 3]),
        (&[3, 2, 2, 1, 2, 3, 2, 2], &[-1, -3, 1, 2, -8, -2, 3, 4]),
        (&[2, 3, 2, 2, 3, 2, 2, 3], &[0, 1, 2, 3, 4, 5, 6, 7]),
    ];
    for dt in dtypes() {
        for (shape, axes) in cases {
            let (x, xv) = rand_any(&mut rng, shape, dt);
            let y = ops::permute(&x, axes).unwrap();
            let (want, ws) = cpu::permute(&xv, shape, axes).unwrap();
            assert_bytes(&format!("permute {dt} {shape:?} {axes:?}"), &y, &want, &ws);
            assert!(!y.shares_buffer(&x));
        }
    }
}

#[test]
fn transpose_matches_reference() {
    poison();
    let mut rng = Rng::new(12);
    let cases: &[(&[usize], isize, isize)] = &[
        (&[13, 17], 0, 1),
        (&[3, 1, 257], -1, 0),
        (&[2, 0, 3], 0, 2),
        (&[5, 7, 3], 1, 1),
        (&[1031, 3], -2, -1),
        (&[1], 0, -1),
    ];
    for dt in dtypes() {
        for &(shape, a, b) in cases {
            let (x, xv) = rand_any(&mut rng, shape, dt);
            let y = ops::transpose(&x, a, b).unwrap();
            let mut axes: Vec<isize> = (0..shape.len() as isize).collect();
            let (na, nb) =
                ((a + shape.len() as isize) as usize % shape.len(), (b + shape.len() as isize) as usize % shape.len());
            axes.swap(na, nb);
            let (want, ws) = cpu::permute(&xv, shape, &axes).unwrap();
            assert_bytes(&format!("transpose {dt} {shape:?} {a} {b}"), &y, &want, &ws);
        }
    }
}

#[test]
fn permute_moves_bits_unchanged() {
    // A signalling NaN with a payload and negative zero must come through untouched.
    let bits: Vec<u32> = vec![0x7FA0_0001, 0x8000_0000, 0xFFC1_2345, 0x3F80_0000, 0x0000_0001, 0x7F80_0000];
    let x = Tensor::from_bytes(bytemuck::cast_slice(&bits), &[2, 3], DType::F32).unwrap();
    let y = ops::transpose(&x, 0, 1).unwrap();
    let got: Vec<u32> = bytemuck::cast_slice(&y.to_bytes().unwrap()).to_vec();
    assert_eq!(got, vec![bits[0], bits[3], bits[1], bits[4], bits[2], bits[5]]);
}

#[test]
fn permute_errors() {
    let x = Tensor::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    assert_eq!(ops::permute(&x, &[0]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::permute(&x, &[0, 0]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::permute(&x, &[1, -2, 0]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::permute(&x, &[0, 2]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::permute(&x, &[1, -1]).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::transpose(&x, 0, 2).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::transpose(&x, -3, 0).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn slice_follows_numpy() {
    poison();
    let mut rng = Rng::new(13);
    let shapes: &[&[usize]] =
        &[&[0], &[1], &[7], &[13, 17], &[3, 1, 257], &[2, 0, 3], &[1031], &[2, 3, 2, 2, 3, 2, 2, 3]];
    let ranges: &[(isize, isize, isize)] = &[
        (0, isize::MAX, 1),
        (1, 5, 1),
        (-3, -1, 1),
        (-100, 100, 3),
        (2, 1, 1),
        (5, 5, 1),
        (0, -1, 2),
        (3, 1000, 7),
        (-1, isize::MAX, 1),
        (isize::MIN, 2, 1),
        (100, 200, 1),
    ];
    for dt in dtypes() {
        for shape in shapes {
            let (x, xv) = rand_any(&mut rng, shape, dt);
            for axis in -(shape.len() as isize)..shape.len() as isize {
                for &(s, e, st) in ranges {
                    let y = ops::slice(&x, axis, s, e, st).unwrap();
                    let (want, ws) = cpu::slice(&xv, shape, axis, s, e, st).unwrap();
                    assert_bytes(&format!("slice {dt} {shape:?} axis {axis} [{s}:{e}:{st}]"), &y, &want, &ws);
                }
            }
        }
    }
    assert_eq!(cpu::slice_positions(10, -3, isize::MAX, 1), vec![7, 8, 9]);
    assert_eq!(cpu::slice_positions(10, 1, 8, 3), vec![1, 4, 7]);
}

#[test]
fn slice_errors() {
    let x = Tensor::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    assert_eq!(ops::slice(&x, 0, 0, 2, 0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::slice(&x, 0, 0, 2, -1).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::slice(&x, 2, 0, 2, 1).unwrap_err().code(), ErrorCode::InvalidArgument);
    let s = Tensor::from_slice(&[1i32], &[]).unwrap();
    assert_eq!(ops::slice(&s, 0, 0, 1, 1).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn concat_matches_reference() {
    poison();
    let mut rng = Rng::new(14);
    let cases: &[(&[&[usize]], isize)] = &[
        (&[&[0]], 0),
        (&[&[1]], 0),
        (&[&[7], &[0], &[13]], 0),
        (&[&[3], &[5], &[1], &[2]], -1),
        (&[&[13, 17], &[13, 2], &[13, 0], &[13, 1]], 1),
        (&[&[13, 17], &[2, 17], &[1, 17]], 0),
        (&[&[3, 1, 257], &[3, 2, 257]], -2),
        (&[&[2, 0, 3], &[2, 5, 3]], 1),
        (&[&[2, 0, 3], &[2, 0, 3]], 0),
        (&[&[2, 3, 5], &[2, 3, 1], &[2, 3, 7]], 2),
        (&[&[1031], &[257]], 0),
        (&[&[2, 1, 2, 1, 2, 1, 2, 3], &[2, 1, 2, 1, 2, 1, 2, 2]], -1),
    ];
    for dt in dtypes() {
        for (shapes, axis) in cases {
            let parts: Vec<(Tensor, Vec<f64>)> = shapes.iter().map(|s| rand_any(&mut rng, s, dt)).collect();
            let ts: Vec<&Tensor> = parts.iter().map(|p| &p.0).collect();
            let y = ops::concat(&ts, *axis).unwrap();
            let refs: Vec<(&[f64], &[usize])> = parts.iter().zip(shapes.iter()).map(|(p, s)| (&p.1[..], *s)).collect();
            let (want, ws) = cpu::concat(&refs, *axis).unwrap();
            assert_bytes(&format!("concat {dt} {shapes:?} axis {axis}"), &y, &want, &ws);
        }
    }
}

#[test]
fn concat_errors() {
    let a = Tensor::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&[0.0f32; 4], &[2, 2]).unwrap();
    let i = Tensor::from_slice(&[0i32; 6], &[2, 3]).unwrap();
    let r1 = Tensor::from_slice(&[0.0f32; 6], &[6]).unwrap();
    let s = Tensor::from_slice(&[0.0f32], &[]).unwrap();
    assert_eq!(ops::concat(&[], 0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::concat(&[&a, &b], 0).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::concat(&[&a, &r1], 0).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::concat(&[&a, &i], 0).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::concat(&[&a, &a], 2).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::concat(&[&s, &s], 0).unwrap_err().code(), ErrorCode::InvalidArgument);
    // b fits along axis 1.
    assert_eq!(ops::concat(&[&a, &b], 1).unwrap().shape(), &[2, 5]);
}

#[test]
fn index_select_matches_numpy_take() {
    poison();
    let mut rng = Rng::new(15);
    let shapes: &[&[usize]] = &[&[1], &[7], &[13, 17], &[3, 1, 257], &[2, 0, 3], &[1031], &[2, 3, 1, 2, 3, 1, 2, 2]];
    for dt in dtypes() {
        for idt in [DType::I32, DType::U32] {
            for shape in shapes {
                let (x, xv) = rand_any(&mut rng, shape, dt);
                for axis in [0isize, -1, shape.len() as isize / 2] {
                    let n = shape[axis.rem_euclid(shape.len() as isize) as usize] as i64;
                    for m in [0usize, 1, 5, 300] {
                        let idx: Vec<i64> = (0..m)
                            .map(|_| if idt == DType::I32 { rng.int(-n - 2, n + 2) } else { rng.int(0, n + 2) })
                            .collect();
                        let it = idx_tensor(&idx, idt);
                        let y = ops::index_select(&x, axis, &it).unwrap();
                        let (want, ws) = cpu::index_select(&xv, shape, axis, &idx).unwrap();
                        assert_bytes(&format!("index_select {dt} {idt} {shape:?} axis {axis} m {m}"), &y, &want, &ws);
                    }
                }
            }
        }
    }
}

#[test]
fn gather_matches_torch() {
    poison();
    let mut rng = Rng::new(16);
    let cases: &[(&[usize], isize, &[usize])] = &[
        (&[1], 0, &[1]),
        (&[7], 0, &[13]),
        (&[7], -1, &[0]),
        (&[13, 17], 1, &[13, 40]),
        (&[13, 17], 0, &[5, 3]),
        (&[3, 1, 257], -1, &[2, 1, 300]),
        (&[3, 4, 5], 1, &[3, 0, 5]),
        (&[2, 0, 3], 1, &[2, 4, 3]),
        (&[2, 3, 1, 2, 3, 1, 2, 2], 4, &[2, 2, 1, 2, 5, 1, 1, 2]),
    ];
    for dt in dtypes() {
        for idt in [DType::I32, DType::U32] {
            for &(shape, axis, ishape) in cases {
                let (x, xv) = rand_any(&mut rng, shape, dt);
                let n = shape[axis.rem_euclid(shape.len() as isize) as usize] as i64;
                let lo = if idt == DType::I32 { -n - 2 } else { 0 };
                let idx: Vec<i64> = (0..ishape.iter().product::<usize>()).map(|_| rng.int(lo, n + 1)).collect();
                let it =
                    idx_tensor(&idx, idt).reshape(&ishape.iter().map(|&d| d as isize).collect::<Vec<_>>()).unwrap();
                let y = ops::gather(&x, axis, &it).unwrap();
                let want = cpu::gather(&xv, shape, axis, &idx, ishape).unwrap();
                assert_bytes(&format!("gather {dt} {idt} {shape:?} axis {axis} index {ishape:?}"), &y, &want, ishape);
            }
        }
    }
}

/// Issue 28: `take_along_axis` (core's gather) read -1 as 0. The answers here are numpy's,
/// written out (x = [10, 20, 30], n = 3): `np.take(x, [-1, -3])` and
/// `np.take_along_axis(x, [-1, -3], 0)` are [30, 10]; numpy raises IndexError for -4 and 3,
/// which Kiln reads as 0 (docs/ops-api.md). Embedding ids have no negative form: all zeros.
#[test]
fn negative_and_out_of_range_indices_follow_numpy() {
    let x = Tensor::from_slice(&[10.0f32, 20.0, 30.0], &[3]).unwrap();
    let idx = Tensor::from_slice(&[-1i32, -3, -4, 3, 0, 2], &[6]).unwrap();
    let want = [30.0, 10.0, 0.0, 0.0, 10.0, 30.0];
    assert_eq!(ops::index_select(&x, 0, &idx).unwrap().to_f64_vec().unwrap(), want, "index_select (numpy take)");
    assert_eq!(ops::gather(&x, 0, &idx).unwrap().to_f64_vec().unwrap(), want, "gather (numpy take_along_axis)");
    // u32 indices are never negative: 2^32 - 1 is past the end.
    let uidx = Tensor::from_slice(&[u32::MAX, 2, 3], &[3]).unwrap();
    assert_eq!(ops::gather(&x, 0, &uidx).unwrap().to_f64_vec().unwrap(), [0.0, 30.0, 0.0]);
    assert_eq!(ops::index_select(&x, 0, &uidx).unwrap().to_f64_vec().unwrap(), [0.0, 30.0, 0.0]);
    // 2-D, along axis 1 and axis -1: np.take_along_axis([[1,2,3],[4,5,6]], [[-1,0],[-2,-3]], 1)
    // is [[3,1],[5,4]].
    let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let i2 = Tensor::from_slice(&[-1i32, 0, -2, -3], &[2, 2]).unwrap();
    for axis in [1, -1] {
        assert_eq!(ops::gather(&m, axis, &i2).unwrap().to_f64_vec().unwrap(), [3.0, 1.0, 5.0, 4.0]);
    }
    // Along axis 0 (n = 2): -1 is row 1, -2 row 0, -3 reads 0.
    let i0 = Tensor::from_slice(&[-1i32, -2, 0, -3, 1, -1], &[2, 3]).unwrap();
    assert_eq!(ops::gather(&m, 0, &i0).unwrap().to_f64_vec().unwrap(), [4.0, 2.0, 3.0, 0.0, 5.0, 6.0]);
    // The CPU reference agrees.
    let xv = [10.0, 20.0, 30.0];
    let iv = [-1i64, -3, -4, 3, 0, 2];
    assert_eq!(cpu::gather(&xv, &[3], 0, &iv, &[6]).unwrap(), want);
    assert_eq!(cpu::index_select(&xv, &[3], 0, &iv).unwrap().0, want);
    // Embedding: -1, -n, -n-1 and n are all rows of zeros.
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
    let ids = Tensor::from_slice(&[-1i32, -3, -4, 3, 2], &[5]).unwrap();
    assert_eq!(
        ops::embedding(&w, &ids).unwrap().to_f64_vec().unwrap(),
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 6.0]
    );
    assert_eq!(
        cpu::embedding(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3, 2, &[-1, -3, -4, 3, 2]),
        ops::embedding(&w, &ids).unwrap().to_f64_vec().unwrap()
    );
}

#[test]
fn index_errors() {
    let x = Tensor::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    let i1 = Tensor::from_slice(&[0i32, 1], &[2]).unwrap();
    let i2 = Tensor::from_slice(&[0i32, 1], &[1, 2]).unwrap();
    let f = Tensor::from_slice(&[0.0f32, 1.0], &[2]).unwrap();
    assert_eq!(ops::index_select(&x, 0, &i2).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::index_select(&x, 0, &f).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::index_select(&x, 2, &i1).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::gather(&x, 0, &i1).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::gather(&x, 1, &f.reshape(&[1, 2]).unwrap()).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::gather(&x, -3, &i2).unwrap_err().code(), ErrorCode::InvalidArgument);
    let too_wide = Tensor::from_slice(&[0i32; 8], &[2, 4]).unwrap();
    assert_eq!(ops::gather(&x, 0, &too_wide).unwrap_err().code(), ErrorCode::ShapeMismatch);
    assert_eq!(ops::gather(&x, 1, &too_wide).unwrap().shape(), &[2, 4]);
    assert_eq!(ops::embedding(&x, &f).unwrap_err().code(), ErrorCode::DTypeMismatch);
    assert_eq!(ops::embedding(&x.reshape(&[6]).unwrap(), &i1).unwrap_err().code(), ErrorCode::ShapeMismatch);
    let deep = Tensor::from_slice(&[0i32], &[1; 8]).unwrap();
    assert_eq!(ops::embedding(&x, &deep).unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn embedding_matches_reference() {
    poison();
    let mut rng = Rng::new(17);
    let weights: &[[usize; 2]] = &[[1, 1], [7, 13], [50, 257], [3, 0], [0, 4]];
    let id_shapes: &[&[usize]] = &[&[], &[0], &[1], &[5], &[3, 7], &[2, 1, 3]];
    for dt in dtypes() {
        for idt in [DType::I32, DType::U32] {
            for &[v, d] in weights {
                let (w, wv) = rand_any(&mut rng, &[v, d], dt);
                for ishape in id_shapes {
                    let lo = if idt == DType::I32 { -3 } else { 0 };
                    let ids: Vec<i64> =
                        (0..ishape.iter().product::<usize>()).map(|_| rng.int(lo, v as i64 + 2)).collect();
                    let it =
                        idx_tensor(&ids, idt).reshape(&ishape.iter().map(|&d| d as isize).collect::<Vec<_>>()).unwrap();
                    let y = ops::embedding(&w, &it).unwrap();
                    let mut ws = ishape.to_vec();
                    ws.push(d);
                    assert_bytes(
                        &format!("embedding {dt} {idt} [{v}, {d}] ids {ishape:?}"),
                        &y,
                        &cpu::embedding(&wv, v, d, &ids),
                        &ws,
                    );
                }
            }
        }
    }
}

#[test]
fn rope_matches_reference() {
    poison();
    let mut rng = Rng::new(18);
    let shapes: &[&[usize]] =
        &[&[1, 2], &[7, 2], &[13, 18], &[3, 1, 64], &[2, 0, 8], &[2, 3, 5, 130], &[4, 0], &[1031, 6]];
    for dt in float_dtypes() {
        for shape in shapes {
            for &(pos, base) in &[(0usize, 10000.0f32), (17, 500.0), (3, 1.0)] {
                let (x, xv) = rand_tensor(&mut rng, shape, dt, -2.0, 2.0);
                let y = ops::rope(&x, pos, base).unwrap();
                assert_eq!(y.shape(), *shape);
                let want = cpu::rope(&xv, shape, pos, base as f64);
                // Angles up to ~1000 rad are computed in f32 (and then range-reduced).
                let (atol, rtol) = if dt == DType::F32 { (2e-4, 1e-4) } else { (4e-3, 4e-3) };
                assert_close(
                    &format!("rope {dt} {shape:?} pos {pos} base {base}"),
                    &y.to_f64_vec().unwrap(),
                    &want,
                    atol,
                    rtol,
                );
            }
        }
    }
}

#[test]
fn rope_rotates_the_documented_pairs() {
    // D = 4, L = 1, position 1, base 1: every angle is 1 rad. Pairs are (0, 2) and (1, 3).
    let x = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0], &[1, 4]).unwrap();
    let y = ops::rope(&x, 1, 1.0).unwrap().to_vec::<f32>().unwrap();
    let (s, c) = 1.0f32.sin_cos();
    let want = [c, -s, s, c];
    for (g, w) in y.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{y:?} vs {want:?}");
    }
}

#[test]
fn rope_errors() {
    let x = Tensor::from_slice(&[0.0f32; 6], &[2, 3]).unwrap();
    assert_eq!(ops::rope(&x, 0, 10000.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    let v = Tensor::from_slice(&[0.0f32; 4], &[4]).unwrap();
    assert_eq!(ops::rope(&v, 0, 10000.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    let g = Tensor::from_slice(&[0.0f32; 4], &[1, 4]).unwrap();
    assert_eq!(ops::rope(&g, 0, 0.0).unwrap_err().code(), ErrorCode::InvalidArgument);
    assert_eq!(ops::rope(&g, 0, f32::NAN).unwrap_err().code(), ErrorCode::InvalidArgument);
    let i = Tensor::from_slice(&[0i32; 4], &[1, 4]).unwrap();
    assert_eq!(ops::rope(&i, 0, 10000.0).unwrap_err().code(), ErrorCode::DTypeMismatch);
}

#[test]
fn more_than_65535_workgroups() {
    // 65536 * 256 + 3 output elements need 65537 workgroups of 256.
    let n = 65536 * 256 + 4;
    let x = ops::arange(0.0, n as f64, 1.0, DType::I32).unwrap().reshape(&[1, n as isize]).unwrap();
    let y = ops::slice(&x, 1, 1, isize::MAX, 1).unwrap();
    let v = y.to_vec::<i32>().unwrap();
    assert_eq!(v.len(), n - 1);
    assert!(v.iter().enumerate().all(|(i, &e)| e == i as i32 + 1));
    let z = ops::transpose(&x.reshape(&[n as isize / 5, 5]).unwrap(), 0, 1).unwrap();
    let zv = z.to_vec::<i32>().unwrap();
    let rows = n / 5;
    assert!(zv.iter().enumerate().all(|(i, &e)| e == ((i % rows) * 5 + i / rows) as i32));
}

#[test]
fn repeated_runs_give_identical_bytes() {
    let mut rng = Rng::new(19);
    let (x, _) = rand_any(&mut rng, &[5, 7, 11], DType::F32);
    let idx = idx_tensor(&[3, 0, -1, 9, 2], DType::I32);
    let run = || {
        let mut b = ops::permute(&x, &[2, 0, 1]).unwrap().to_bytes().unwrap();
        b.extend(ops::index_select(&x, 1, &idx).unwrap().to_bytes().unwrap());
        b.extend(ops::concat(&[&x, &x], 1).unwrap().to_bytes().unwrap());
        b.extend(ops::rope(&ops::slice(&x, 2, 0, 10, 1).unwrap(), 4, 10000.0).unwrap().to_bytes().unwrap());
        b
    };
    let first = run();
    for _ in 0..3 {
        assert_eq!(run(), first);
    }
}

#[test]
fn f16_support_is_reported() {
    eprintln!("adapter has f16: {}", has_f16());
    if !has_f16() {
        let x = Tensor::from_slice(&[kiln_core::f16::ONE; 4], &[2, 2]);
        if let Ok(x) = x {
            assert_eq!(ops::transpose(&x, 0, 1).unwrap_err().code(), ErrorCode::Unsupported);
        }
    }
}
