//! ggml's K-format quantizers (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): `quantize_row_q*_K_ref` and the
//! searches for scales they use (`make_qkx2_quants`, `make_q3_quants`, `make_qx_quants`), ported
//! statement by statement as the parent module says.

use super::{f16_at, f16_bits, nearest_int, GROUP_MAX_EPS, QK_K};

/// make_qkx2_quants: codes 0..=nmax for `x` with a scale and a min (returned as (scale,
/// -min)), searched over `nstep + 1` trial scales by weighted squared error (absolute error
/// with `mad`).
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    x: &[f32],
    weights: &[f32],
    nmax: i32,
    l: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    mad: bool,
) -> (f32, f32) {
    let err = |diff: f32| if mad { diff.abs() } else { diff * diff };
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.iter_mut().for_each(|v| *v = 0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let li = nearest_int(iscale * (x[i] - min));
        l[i] = li.clamp(0, nmax) as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    let mut laux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let li = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = li as u8;
            let w = weights[i];
            let lf = li as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let dd = sum_w * sum_l2 - sum_l * sum_l;
        if dd > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / dd;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / dd;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's get_scale_min_k4: group j's 6-bit scale and min from the 12 packed bytes.
pub(crate) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// quantize_row_q4_K_ref (nmax 15) and quantize_row_q5_K_ref (nmax 31), one super-block.
pub(super) fn q45_k(x: &[f32], nmax: i32, out: &mut Vec<u8>) {
    let (rmin, nstep) = if nmax == 15 { (-1.0f32, 20) } else { (-0.5f32, 15) };
    let mut l = [0u8; QK_K];
    let mut mins = [0.0f32; 8];
    let mut scales = [0.0f32; 8];
    let mut weights = [0.0f32; 32];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (s, m) = make_qkx2_quants(xs, &weights, nmax, &mut l[32 * j..32 * j + 32], rmin, 0.1, nstep, false);
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut sc = [0u8; 12];
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            sc[j - 4] |= (ls >> 4) << 6;
            sc[j] |= (lm >> 4) << 6;
        }
    }
    let d16 = f16_bits(max_scale / 63.0);
    let dmin16 = f16_bits(max_min / 63.0);
    let (dh, dminh) = (f16_at(&d16, 0), f16_at(&dmin16, 0));
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, &sc);
        let d = dh * s as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dminh * m as f32;
        for ii in 0..32 {
            let li = nearest_int((x[32 * j + ii] + dm) / d);
            l[32 * j + ii] = li.clamp(0, nmax) as u8;
        }
    }
    out.extend_from_slice(&d16);
    out.extend_from_slice(&dmin16);
    out.extend_from_slice(&sc);
    if nmax == 31 {
        let mut qh = [0u8; 32];
        let mut ql = [0u8; 128];
        let (mut m1, mut m2) = (1u8, 2u8);
        for (c, n) in (0..QK_K).step_by(64).enumerate() {
            for j in 0..32 {
                let mut l1 = l[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                let mut l2 = l[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[32 * c + j] = l1 | (l2 << 4);
            }
            m1 <<= 2;
            m2 <<= 2;
        }
        out.extend_from_slice(&qh);
        out.extend_from_slice(&ql);
    } else {
        for j in (0..QK_K).step_by(64) {
            for i in 0..32 {
                out.push(l[j + i] | (l[j + i + 32] << 4));
            }
        }
    }
}

/// Four 2-bit codes per byte, ggml's order for Q2_K / Q3_K: byte 32c + l holds values
/// 128c + l, + 32, + 64, + 96 (c = 0, 1) in bits 0-1, 2-3, 4-5, 6-7.
fn pack2(l: &[u8; QK_K], out: &mut Vec<u8>) {
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            out.push(l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6));
        }
    }
}

/// quantize_row_q2_K_ref, one super-block: 16 groups of 16, 4-bit scales and mins.
pub(super) fn q2_k(x: &[f32], out: &mut Vec<u8>) {
    let mut l = [0u8; QK_K];
    let mut mins = [0.0f32; 16];
    let mut scales = [0.0f32; 16];
    let mut weights = [0.0f32; 16];
    let q4scale = 15.0f32;
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..16 {
        let xs = &x[16 * j..16 * j + 16];
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = v.abs();
        }
        let (s, m) = make_qkx2_quants(xs, &weights, 3, &mut l[16 * j..16 * j + 16], -0.5, 0.1, 15, true);
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let mut sc = [0u8; 16];
    let mut d16 = f16_bits(0.0);
    if max_scale > 0.0 {
        let iscale = q4scale / max_scale;
        for j in 0..16 {
            sc[j] = nearest_int(iscale * scales[j]) as u8;
        }
        d16 = f16_bits(max_scale / q4scale);
    }
    let mut dmin16 = f16_bits(0.0);
    if max_min > 0.0 {
        let iscale = q4scale / max_min;
        for j in 0..16 {
            sc[j] |= (nearest_int(iscale * mins[j]) << 4) as u8;
        }
        dmin16 = f16_bits(max_min / q4scale);
    }
    let (dh, dminh) = (f16_at(&d16, 0), f16_at(&dmin16, 0));
    for j in 0..16 {
        let d = dh * (sc[j] & 0xF) as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dminh * (sc[j] >> 4) as f32;
        for ii in 0..16 {
            l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
        }
    }
    out.extend_from_slice(&sc);
    pack2(&l, out);
    out.extend_from_slice(&d16);
    out.extend_from_slice(&dmin16);
}

/// make_q3_quants with do_rmse: signed codes in [-nmax, nmax) refined by up to 5 passes of
/// coordinate descent, stored + nmax; returns the scale.
fn make_q3_quants(x: &[f32], nmax: i32, l: &mut [i8]) -> f32 {
    let n = x.len();
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.iter_mut().for_each(|v| *v = 0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let li = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l[i] = li as i8;
        let w = x[i] * x[i];
        let lf = li as f32;
        sumlx += w * x[i] * lf;
        suml2 += w * lf * lf;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = x[i] * x[i];
            let li = l[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l[i] as i32 {
                    let nf = new_l as f32;
                    slx += w * x[i] * nf;
                    sl2 += w * nf * nf;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for v in l.iter_mut() {
        *v = (*v as i32 + nmax) as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Q3_K's 6-bit scale `j` (of 16) from its 12 packed bytes, as the signed value - 32.
pub(crate) fn q3_scale(sc: &[u8], j: usize) -> i8 {
    let lo = if j < 8 { sc[j] & 0xF } else { sc[j - 8] >> 4 };
    ((lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i8).wrapping_sub(32)
}

/// quantize_row_q3_K_ref, one super-block: 16 groups of 16, 6-bit signed scales, 3-bit codes.
pub(super) fn q3_k(x: &[f32], out: &mut Vec<u8>) {
    let mut l = [0i8; QK_K];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
    for j in 0..16 {
        scales[j] = make_q3_quants(&x[16 * j..16 * j + 16], 4, &mut l[16 * j..16 * j + 16]);
        let scale = scales[j].abs();
        if scale > amax {
            amax = scale;
            max_scale = scales[j];
        }
    }
    let mut sc = [0u8; 12];
    let mut d16 = f16_bits(0.0);
    if max_scale != 0.0 {
        let iscale = -32.0f32 / max_scale;
        for j in 0..16 {
            // int8_t l = nearest_int(..); l = MAX(-32, MIN(31, l)) + 32;
            let li = ((nearest_int(iscale * scales[j]) as i8).clamp(-32, 31) + 32) as u8;
            if j < 8 {
                sc[j] = li & 0xF;
            } else {
                sc[j - 8] |= (li & 0xF) << 4;
            }
            sc[j % 4 + 8] |= (li >> 4) << (2 * (j / 4));
        }
        d16 = f16_bits(1.0 / iscale);
    }
    let dh = f16_at(&d16, 0);
    for j in 0..16 {
        let d = dh * q3_scale(&sc, j) as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-4, 3) + 4) as i8;
        }
    }
    let mut hmask = [0u8; 32];
    let mut codes = [0u8; QK_K];
    for (j, &v) in l.iter().enumerate() {
        let mut v = v;
        if v > 3 {
            hmask[j % 32] |= 1 << (j / 32);
            v -= 4;
        }
        codes[j] = v as u8;
    }
    out.extend_from_slice(&hmask);
    pack2(&codes, out);
    out.extend_from_slice(&sc);
    out.extend_from_slice(&d16);
}

/// make_qx_quants with rmse_type 1 and no weights (what quantize_row_q6_K_ref calls): codes
/// `nmax + l`, l in [-nmax, nmax), and the scale, searched over 18 trial scales.
fn make_qx_quants(x: &[f32], nmax: i32, l: &mut [i8]) -> f32 {
    let n = x.len();
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.iter_mut().for_each(|v| *v = 0);
        return 0.0;
    }
    let nm = nmax as f32;
    let mut iscale = -nm / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let li = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l[i] = (li + nmax) as i8;
        let w = x[i] * x[i];
        let lf = li as f32;
        sumlx += w * x[i] * lf;
        suml2 += w * lf * lf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nm + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for &v in x {
            let lf = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = v * v;
            sumlx += w * v * lf;
            suml2 += w * lf * lf;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                let li = nearest_int(iscale * x[i]);
                l[i] = (nmax + li.clamp(-nmax, nmax - 1)) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// quantize_row_q6_K_ref, one super-block.
pub(super) fn q6_k(x: &[f32], out: &mut Vec<u8>) {
    let mut l = [0i8; QK_K];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
    for ib in 0..16 {
        let scale = make_qx_quants(&x[16 * ib..16 * ib + 16], 32, &mut l[16 * ib..16 * ib + 16]);
        scales[ib] = scale;
        let abs_scale = scale.abs();
        if abs_scale > max_abs_scale {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        // memset 0, then d = fp16(0): all zero bytes.
        out.extend_from_slice(&[0u8; 210]);
        return;
    }
    let iscale = -128.0f32 / max_scale;
    let d16 = f16_bits(1.0 / iscale);
    let dh = f16_at(&d16, 0);
    let mut sc = [0i8; 16];
    for ib in 0..16 {
        // MIN(127, nearest_int(...)) stored to int8_t.
        sc[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
    }
    for j in 0..16 {
        let d = dh * sc[j] as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let li = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
            l[16 * j + ii] = (li + 32) as i8;
        }
    }
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    for (c, j) in (0..QK_K).step_by(128).enumerate() {
        for i in 0..32 {
            let lv = |o: usize| l[j + i + o] as u8;
            let (q1, q2, q3, q4) = (lv(0) & 0xF, lv(32) & 0xF, lv(64) & 0xF, lv(96) & 0xF);
            ql[64 * c + i] = q1 | (q3 << 4);
            ql[64 * c + i + 32] = q2 | (q4 << 4);
            qh[32 * c + i] = (lv(0) >> 4) | ((lv(32) >> 4) << 2) | ((lv(64) >> 4) << 4) | ((lv(96) >> 4) << 6);
        }
    }
    out.extend_from_slice(&ql);
    out.extend_from_slice(&qh);
    out.extend(sc.iter().map(|&v| v as u8));
    out.extend_from_slice(&d16);
}
