//! CLIP on Kiln against transformers: a small randomly initialised CLIPModel with ViT-B/32's
//! structure (2 layers, width 32, 64-pixel images of 2 x 2 patches of 32), CLIP's BPE tokenizer,
//! and CLIPImageProcessorPil's preprocessing of six images rendered with numpy, all made by
//! tests/reference/make_clip_reference.py with PyTorch and Pillow (the outputs are committed).

use kiln_models::{ClipModel, Image, ImageEmbedder, ModelError};
use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::compare;

/// Per embedding: cosine at least 0.9999 and max |difference| at most 1e-4, the encoders' f32
/// tolerance (tests/encoders.rs): both sides compute in f32 and differ in summation order only.
/// A wrong part moves the output far more: a wrong image mean moves these references by more
/// than 1e-2 (the script asserts it).
const TOLERANCE: (f64, f64) = (0.9999, 1e-4);

/// The preprocessing's pixel values against CLIPImageProcessorPil's: the resize reproduces
/// Pillow's integer arithmetic, so the u8 pixels are equal and only the f32 rescale and
/// normalisation may round differently (a few ulps of values up to ~2.2). One u8 step is
/// 1 / 255 / 0.26 = 0.015.
const PIXEL_TOLERANCE: f32 = 1e-5;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/clip")
}

fn model_dir() -> PathBuf {
    dir().join("model")
}

fn reference() -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("reference.json")).unwrap()).unwrap()
}

fn npy<T: npyz::Deserialize>(name: &str) -> (Vec<T>, Vec<u64>) {
    let bytes = std::fs::read(dir().join(name)).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = f.shape().to_vec();
    (f.into_vec::<T>().unwrap(), shape)
}

/// The reference images: (pixels, height, width) each.
fn images() -> Vec<(Vec<u8>, usize, usize)> {
    let (flat, _) = npy::<u8>("images.npy");
    let mut at = 0;
    reference()["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let (h, w) = (s[0].as_u64().unwrap() as usize, s[1].as_u64().unwrap() as usize);
            let px = flat[at..at + h * w * 3].to_vec();
            at += h * w * 3;
            (px, h, w)
        })
        .collect()
}

fn views(imgs: &[(Vec<u8>, usize, usize)]) -> Vec<Image<'_>> {
    imgs.iter().map(|(p, h, w)| Image { pixels: p, height: *h, width: *w }).collect()
}

fn texts() -> Vec<String> {
    serde_json::from_value(reference()["texts"].clone()).unwrap()
}

fn assert_close(what: &str, got: &[f32], want: &[f32], dim: usize) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (cos, maxd)) in compare(got, want, dim).into_iter().enumerate() {
        println!("{what} {i}: cosine {cos:.8}, max |diff| {maxd:.3e}");
        assert!(cos >= TOLERANCE.0 && maxd <= TOLERANCE.1, "{what} {i}: cosine {cos}, max |diff| {maxd}");
    }
}

fn l2(rows: &[f32], dim: usize) -> Vec<f32> {
    rows.chunks(dim)
        .flat_map(|r| {
            let n = r.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt().max(1e-12);
            r.iter().map(move |&x| (x as f64 / n) as f32)
        })
        .collect()
}

#[test]
fn preprocessing_matches_clip_image_processor() {
    let model = ImageEmbedder::load(model_dir()).unwrap();
    let imgs = images();
    let (want, shape) = npy::<f32>("pixel_values.npy");
    assert_eq!(shape, [imgs.len() as u64, 3, 64, 64]);
    let got = model.pixel_values(&views(&imgs)).unwrap();
    let per = 3 * 64 * 64;
    let names = reference()["images"].clone();
    for (i, (g, w)) in got.chunks(per).zip(want.chunks(per)).enumerate() {
        let maxd = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        println!("pixel_values {}: max |diff| {maxd:.3e}", names[i]);
        assert!(maxd <= PIXEL_TOLERANCE, "image {}: max |diff| {maxd}", names[i]);
    }
}

#[test]
fn image_and_text_embeddings_match_transformers() {
    let model = ClipModel::load(model_dir()).unwrap();
    let imgs = images();
    let (want, shape) = npy::<f32>("image_embeds.npy");
    let dim = shape[1] as usize;
    assert_eq!(model.dim(), dim);
    let got = model.encode_image(&views(&imgs), false).unwrap();
    assert_eq!((got.rows, got.dim), (imgs.len(), dim));
    assert_close("image", &got.data, &want, dim);
    // Normalised: the reference's rows over their norms.
    let unit = model.encode_image(&views(&imgs), true).unwrap();
    assert_close("image (normalised)", &unit.data, &l2(&want, dim), dim);
    // The vision tower alone gives the same bits.
    let alone = ImageEmbedder::load(model_dir()).unwrap().encode(&views(&imgs), false).unwrap();
    assert_eq!(alone.data, got.data);

    let texts = texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids: Vec<Vec<u32>> = serde_json::from_value(reference()["token_ids"].clone()).unwrap();
    assert_eq!(model.tokenize(&refs).unwrap(), ids);
    let (want, _) = npy::<f32>("text_embeds.npy");
    let got = model.encode_text(&refs, false).unwrap();
    assert_close("text", &got.data, &want, dim);
    let unit = model.encode_text(&refs, true).unwrap();
    assert_close("text (normalised)", &unit.data, &l2(&want, dim), dim);
    // One text at a time (no padding) gives the same embedding as in the padded batch.
    let one = model.encode_text(&refs[..1], false).unwrap();
    assert_close("text alone", &one.data, &want[..dim], dim);
}

/// A copy of the model folder with `file` edited by `f`, in a fresh temp dir.
fn folder_with(tag: &str, file: &str, f: impl FnOnce(&mut Value)) -> PathBuf {
    let to = std::env::temp_dir().join(format!("kiln-clip-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&to);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(model_dir()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
    let path = to.join(file);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    to
}

fn load_err(dir: &Path) -> String {
    let err = ClipModel::load(dir).err().expect("the folder should be refused");
    let _ = std::fs::remove_dir_all(dir);
    err.to_string()
}

#[test]
fn unsupported_configs_are_refused_by_name() {
    type Edit = Box<dyn FnOnce(&mut Value)>;
    let cases: Vec<(&str, &str, Edit, &str)> = vec![
        ("siglip", "config.json", Box::new(|v| v["model_type"] = "siglip".into()), "model_type"),
        ("act", "config.json", Box::new(|v| v["vision_config"]["hidden_act"] = "relu".into()), "hidden_act \"relu\""),
        (
            "heads",
            "config.json",
            Box::new(|v| v["text_config"]["num_attention_heads"] = 3.into()),
            "num_attention_heads 3",
        ),
        ("patch", "config.json", Box::new(|v| v["vision_config"]["patch_size"] = 30.into()), "patch_size 30"),
        (
            "huge",
            "config.json",
            Box::new(|v| v["vision_config"]["image_size"] = (1u64 << 40).into()),
            "past kiln's limits",
        ),
        ("eps", "config.json", Box::new(|v| v["text_config"]["layer_norm_eps"] = (-1.0).into()), "layer_norm_eps"),
        ("bilinear", "preprocessor_config.json", Box::new(|v| v["resample"] = 2.into()), "resample 2"),
        (
            "siglip-processor",
            "preprocessor_config.json",
            Box::new(|v| v["image_processor_type"] = "SiglipImageProcessor".into()),
            "SiglipImageProcessor",
        ),
        (
            "square",
            "preprocessor_config.json",
            Box::new(|v| v["size"] = serde_json::json!({"height": 64, "width": 64})),
            "shortest_edge",
        ),
        (
            "crop",
            "preprocessor_config.json",
            Box::new(|v| v["crop_size"] = serde_json::json!({"height": 32, "width": 32})),
            "vision tower takes 64",
        ),
        (
            "std",
            "preprocessor_config.json",
            Box::new(|v| v["image_std"] = serde_json::json!([0.2, 0.0, 0.2])),
            "image_std 0",
        ),
    ];
    for (tag, file, edit, needle) in cases {
        let msg = load_err(&folder_with(tag, file, edit));
        assert!(msg.contains(needle), "{tag}: {msg}");
    }
    // transformers 4.x's feature-extractor layout (openai/clip-vit-base-patch32's): bare ints.
    let old = folder_with("fe", "preprocessor_config.json", |v| {
        let o = v.as_object_mut().unwrap();
        o.remove("image_processor_type");
        o.insert("feature_extractor_type".into(), "CLIPFeatureExtractor".into());
        o.insert("size".into(), 64.into());
        o.insert("crop_size".into(), 64.into());
    });
    let imgs = images();
    let want = ImageEmbedder::load(model_dir()).unwrap().pixel_values(&views(&imgs)).unwrap();
    assert_eq!(ImageEmbedder::load(&old).unwrap().pixel_values(&views(&imgs)).unwrap(), want);
    let _ = std::fs::remove_dir_all(&old);
    // Weights of the wrong shape name the weight.
    let msg = load_err(&folder_with("width", "config.json", |v| v["vision_config"]["hidden_size"] = 64.into()));
    assert!(msg.contains("vision_model.") && msg.contains("expected"), "{msg}");
}

#[test]
fn bad_images_are_errors_and_the_model_still_works() {
    let model = ImageEmbedder::load(model_dir()).unwrap();
    let px = vec![7u8; 10 * 10 * 3];
    let bad = [
        (Image { pixels: &px, height: 10, width: 11 }, "needs 330 bytes (height x width x 3, u8), got 300"),
        (Image { pixels: &px[..0], height: 0, width: 10 }, "has none"),
        (Image { pixels: &px, height: usize::MAX, width: 3 }, "too many"),
    ];
    for (img, needle) in bad {
        let msg = model.encode(&[img], false).expect_err("refused").to_string();
        assert!(msg.contains(needle), "{msg}");
        assert!(matches!(model.encode(&[img], false), Err(ModelError::Unsupported(_))));
    }
    // An extreme strip would resize to 12.8 M x 64 pixels: refused, not an allocation failure.
    let long = vec![9u8; 200_000 * 3];
    let msg =
        model.encode(&[Image { pixels: &long, height: 1, width: 200_000 }], false).expect_err("refused").to_string();
    assert!(msg.contains("12800000 x 64, past kiln's limit"), "{msg}");
    // A thin strip (1 x 40) is resized to 64 x 2560 and cropped: it works.
    let strip = vec![200u8; 40 * 3];
    let e = model.encode(&[Image { pixels: &strip, height: 1, width: 40 }], true).unwrap();
    let norm: f32 = e.data.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    // Nothing in, nothing out.
    assert_eq!(model.encode(&[], false).unwrap().rows, 0);
}
