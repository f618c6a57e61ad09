//! CLIPImageProcessor's steps on the GPU, from RGB u8 pixels: resize (shortest edge), center
//! crop, rescale, normalise, as transformers' PIL path does them.
//!
//! The resize is Pillow's own 8-bit resample (libImaging/Resample.c), so that the pixels match
//! PIL's bit for bit rather than approximately: a separable filter whose taps are the bicubic
//! kernel (a = -0.5) widened by the scale when shrinking (the antialias), normalised per output
//! pixel and rounded to 22-bit fixed point; each pass summed in integers, rounded and clamped to
//! u8 before the next, in Pillow 13's order ([`vertical_first`]). The taps are computed here on the host
//! (they depend on the sizes only) as an [out, in] i32 matrix per axis, and each pass is one
//! i32 `matmul` on the GPU (exact: |sum| < 255 * 1.3 * 2^22 < 2^31) followed by `+ 2^21`, `>> 22`
//! and a clamp: Kiln's core ops, no kernel of its own. The matrix is dense (in x out), which
//! costs more multiply-adds than the filter's few taps per pixel but keeps to ops every backend
//! has.
//!
//! The order of the passes changes the rounding of the u8 intermediate (by up to 24/255 at a
//! pixel): Pillow before 13 always ran the horizontal pass first; Pillow 13 runs the vertical one
//! first when the height loses more than twice as many pixels as the width (tall photos), and
//! kiln follows Pillow 13.

use super::config::Preprocess;
use crate::error::{ModelError, Result};
use kiln_core::{ops, DType, Tensor};
use std::sync::Arc;

/// The most pixels a resized image may have, and the most taps one axis's matrix may hold
/// (i32 each: 256 MiB and 1 GiB). A 12000 x 9000 photo resized for CLIP (224) needs 67 K
/// pixels and 3.6 M taps; only extreme aspect ratios (a 1 x 200000 strip would become
/// 12.8 M x 64) come near, and they are refused here rather than failing an allocation.
const MAX_RESIZED_PIXELS: usize = 1 << 26;
const MAX_TAPS: usize = 1 << 28;

/// Pillow's PRECISION_BITS for 8-bit images: 32 - 8 (the pixel) - 2 (the filter's overshoot).
const PRECISION_BITS: u32 = 22;

/// Pillow's `bicubic_filter` (a = -0.5, support 2).
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc` for resizing `in_size` pixels to
/// `out_size` over the whole axis: row `o` of the [out_size, in_size] result holds output pixel
/// o's fixed-point taps at the input pixels they read, zeros elsewhere.
pub fn resize_taps(in_size: usize, out_size: usize) -> Vec<i32> {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    let mut taps = vec![0i32; out_size * in_size];
    let mut w = Vec::new();
    for o in 0..out_size {
        let center = (o as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C's (int) truncates toward zero; a negative start is then clamped to 0 anyway.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64).max(xmin as i64) as usize;
        w.clear();
        w.extend((xmin..xmax).map(|x| bicubic((x as f64 - center + 0.5) * ss)));
        let ww: f64 = w.iter().sum();
        for (i, &k) in w.iter().enumerate() {
            let k = if ww != 0.0 { k / ww } else { k };
            let one = (1u32 << PRECISION_BITS) as f64;
            // (int)(±0.5 + k * 2^22): rounds half away from zero, as the C cast after the offset.
            taps[o * in_size + xmin + i] = if k < 0.0 { (-0.5 + k * one) as i32 } else { (0.5 + k * one) as i32 };
        }
    }
    taps
}

/// transformers' `get_resize_output_image_size(default_to_square=False)`: (height, width) with
/// the shorter side `size` and the longer `int(size * long / short)`.
pub fn resized_size(height: usize, width: usize, size: usize) -> (usize, usize) {
    let (short, long) = if width <= height { (width, height) } else { (height, width) };
    let new_long = ((size * long) as f64 / short as f64) as usize;
    if width <= height {
        (new_long, size)
    } else {
        (size, new_long)
    }
}

/// Pillow 13's `ImagingResampleInner`: the vertical pass first when the height shrinks by more
/// than twice as many pixels as the width (so that the horizontal pass has fewer rows).
pub fn vertical_first(height: usize, width: usize, out_height: usize, out_width: usize) -> bool {
    let dy = height as i64 - out_height as i64;
    dy > 0 && dy > (width as i64 - out_width as i64) * 2
}

/// One pass's rounding: Pillow's `clip8((sum + 2^21) >> 22)`.
fn round_u8(sum: &Tensor) -> Result<Tensor> {
    let shifted = ops::bitwise_right_shift_scalar(
        &ops::add_scalar(sum, (1u32 << (PRECISION_BITS - 1)) as f64)?,
        PRECISION_BITS as f64,
    )?;
    Ok(ops::clip_scalar(&shifted, 0.0, 255.0)?)
}

/// `pixels` (RGB u8, row-major `height` x `width` x 3) uploaded as u32 words (four bytes each,
/// little-endian: a quarter of the upload of one value per byte) and unpacked on the GPU into
/// [3, height, width] i32.
fn upload_rgb(device: &Arc<kiln_core::Device>, pixels: &[u8], height: usize, width: usize) -> Result<Tensor> {
    let n = height * width * 3;
    let words: Vec<u32> = pixels
        .chunks(4)
        .map(|c| {
            let mut b = [0u8; 4];
            b[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(b)
        })
        .collect();
    let nw = words.len();
    let words = Tensor::from_slice_on(device, &words, &[nw, 1])?;
    let bytes: Vec<Tensor> = (0..4)
        .map(|k| Ok(ops::bitwise_and_scalar(&ops::bitwise_right_shift_scalar(&words, (8 * k) as f64)?, 255.0)?))
        .collect::<Result<_>>()?;
    let bytes = ops::concat(&bytes.iter().collect::<Vec<_>>(), 1)?.reshape(&[(nw * 4) as isize])?;
    let rgb = ops::slice(&bytes, 0, 0, n as isize, 1)?.reshape(&[height as isize, width as isize, 3])?;
    Ok(ops::cast(&ops::permute(&rgb, &[2, 0, 1])?, DType::I32)?)
}

/// What the preprocessing gives one image: [3, S, S] f32 pixel values, S the model's
/// image_size (checked: an image that does not come out at that size is an error naming its
/// size).
pub fn pixel_values(pre: &Preprocess, pixels: &[u8], height: usize, width: usize, image_size: usize) -> Result<Tensor> {
    if height == 0 || width == 0 {
        return Err(ModelError::Unsupported(format!("an image of {width} x {height} pixels has none")));
    }
    let n = height.checked_mul(width).and_then(|p| p.checked_mul(3));
    if n != Some(pixels.len()) {
        return Err(ModelError::Unsupported(format!(
            "an RGB image of {width} x {height} needs {} bytes (height x width x 3, u8), got {}",
            n.map_or("too many".into(), |n| n.to_string()),
            pixels.len()
        )));
    }
    let device = kiln_core::device()?;
    let mut x = upload_rgb(&device, pixels, height, width)?; // [3, H, W] i32
    let (mut h, mut w) = (height, width);
    if let Some(size) = pre.shortest_edge {
        let (oh, ow) = resized_size(h, w, size);
        let taps = (ow.checked_mul(w), oh.checked_mul(h));
        if oh.checked_mul(ow).is_none_or(|p| p > MAX_RESIZED_PIXELS)
            || taps.0.is_none_or(|t| t > MAX_TAPS)
            || taps.1.is_none_or(|t| t > MAX_TAPS)
        {
            return Err(ModelError::Unsupported(format!(
                "a {width} x {height} image resized to a shortest edge of {size} would be {ow} x {oh}, past kiln's \
                 limit of {MAX_RESIZED_PIXELS} pixels ({MAX_TAPS} filter taps an axis)"
            )));
        }
        // Pillow returns a copy when the size does not change, and skips a pass whose axis
        // keeps its size.
        let horizontal = |x: &Tensor| -> Result<Tensor> {
            let taps = Tensor::from_slice_on(&device, &resize_taps(w, ow), &[ow, w])?;
            round_u8(&ops::matmul(x, &ops::transpose(&taps, 0, 1)?)?) // [3, rows, OW]
        };
        let vertical = |x: &Tensor| -> Result<Tensor> {
            let taps = Tensor::from_slice_on(&device, &resize_taps(h, oh), &[oh, h])?;
            round_u8(&ops::matmul(&taps, x)?) // [3, OH, cols]
        };
        let first_v = vertical_first(h, w, oh, ow);
        if oh != h && first_v {
            x = vertical(&x)?;
        }
        if ow != w {
            x = horizontal(&x)?;
        }
        if oh != h && !first_v {
            x = vertical(&x)?;
        }
        (h, w) = (oh, ow);
    }
    if let Some(c) = pre.crop {
        if c > h || c > w {
            return Err(ModelError::Unsupported(format!(
                "a {width} x {height} image is {w} x {h} at the crop, smaller than the {c} x {c} crop (transformers pads; kiln does not)"
            )));
        }
        // transformers' center_crop: top = (H - c) // 2, left = (W - c) // 2.
        let (top, left) = ((h - c) / 2, (w - c) / 2);
        x = ops::slice(&x, 1, top as isize, (top + c) as isize, 1)?;
        x = ops::slice(&x, 2, left as isize, (left + c) as isize, 1)?;
        (h, w) = (c, c);
    }
    if (h, w) != (image_size, image_size) {
        return Err(ModelError::Unsupported(format!(
            "a {width} x {height} image comes out of the preprocessing {w} x {h}; the vision tower takes {image_size} x {image_size}"
        )));
    }
    let mut x = ops::cast(&x, DType::F32)?;
    if let Some(r) = pre.rescale {
        x = ops::mul_scalar(&x, r as f64)?;
    }
    if let Some((mean, std)) = pre.mean_std {
        let mean = Tensor::from_slice_on(&device, &mean, &[3, 1, 1])?;
        let std = Tensor::from_slice_on(&device, &std, &[3, 1, 1])?;
        x = ops::div(&ops::sub(&x, &mean)?, &std)?;
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_sum_to_one_and_shrink_with_antialias() {
        for (i, o) in [(97, 101), (200, 85), (64, 64), (30, 64), (130, 17)] {
            let t = resize_taps(i, o);
            for row in t.chunks(i) {
                let s: i64 = row.iter().map(|&k| k as i64).sum();
                // Each tap rounds on its own: the sum is 2^22 within a tap's half unit each.
                assert!((s - (1 << 22)).abs() <= row.iter().filter(|&&k| k != 0).count() as i64, "{i}->{o}: {s}");
            }
            // Shrinking widens the filter: more non-zero taps than the 4 of plain bicubic.
            let nz = t.chunks(i).map(|r| r.iter().filter(|&&k| k != 0).count()).max().unwrap();
            assert!(if o < i { nz > 4 } else { nz <= 4 }, "{i}->{o}: {nz} taps");
        }
        // Same size: the identity (bicubic(0) = 1, zero at the other integers).
        let t = resize_taps(5, 5);
        for (o, row) in t.chunks(5).enumerate() {
            assert_eq!(row.iter().enumerate().map(|(i, &k)| if i == o { k - (1 << 22) } else { k }).max(), Some(0));
        }
    }

    #[test]
    fn pass_order_follows_pillow_13() {
        // Shapes whose order Pillow 13.0 was seen to take (the two orders round differently).
        assert!(vertical_first(554, 271, 457, 224)); // 97 > 2 * 47
        assert!(vertical_first(130, 50, 17, 31));
        assert!(!vertical_first(100, 100, 20, 50)); // 80 > 2 * 50 does not hold
        assert!(!vertical_first(85, 64, 166, 64)); // growing
        assert!(!vertical_first(150, 200, 64, 85));
    }

    #[test]
    fn output_size_follows_transformers() {
        assert_eq!(resized_size(61, 97, 64), (64, 101));
        assert_eq!(resized_size(130, 50, 64), (166, 64));
        assert_eq!(resized_size(480, 640, 224), (224, 298));
        assert_eq!(resized_size(64, 64, 64), (64, 64));
    }
}
