//! A CLIP folder's JSON files as transformers writes them: config.json (`CLIPConfig`, with
//! text_config and vision_config) and preprocessor_config.json (`CLIPImageProcessor`).
//! Everything the towers or the preprocessing do not implement is refused by name.

use crate::error::{corrupt, ModelError, Result};
use serde::Deserialize;
use std::path::Path;

/// What one tower of a CLIPModel shares with the other: a pre-norm transformer.
#[derive(Debug, Clone, Deserialize)]
pub struct TowerConfig {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    // Text tower only.
    #[serde(default = "default_vocab")]
    pub vocab_size: usize,
    #[serde(default = "default_positions")]
    pub max_position_embeddings: usize,
    /// transformers pools the text tower at the first position of this id; with the value 2 of
    /// configs older than its PR #24773, at the largest id of the row instead.
    #[serde(default = "default_eos")]
    pub eos_token_id: i64,
    // Vision tower only.
    #[serde(default = "default_image")]
    pub image_size: usize,
    #[serde(default = "default_patch")]
    pub patch_size: usize,
    #[serde(default = "default_channels")]
    pub num_channels: usize,
}

fn default_act() -> String {
    "quick_gelu".into()
}
fn default_eps() -> f64 {
    1e-5
}
fn default_vocab() -> usize {
    49408
}
fn default_positions() -> usize {
    77
}
fn default_eos() -> i64 {
    49407
}
fn default_image() -> usize {
    224
}
fn default_patch() -> usize {
    32
}
fn default_channels() -> usize {
    3
}

/// The MLP's activation: CLIP's own `quick_gelu` (x * sigmoid(1.702 x), OpenAI's checkpoints)
/// or the exact `gelu` (OpenCLIP's LAION checkpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    QuickGelu,
    Gelu,
}

impl TowerConfig {
    /// `tower` is "text_config" or "vision_config", for messages.
    pub fn check(&self, path: &Path, tower: &str, vision: bool) -> Result<Activation> {
        let mut sizes = vec![("hidden_size", self.hidden_size), ("intermediate_size", self.intermediate_size)];
        sizes.push(("num_attention_heads", self.num_attention_heads));
        if vision {
            sizes.extend([("image_size", self.image_size), ("patch_size", self.patch_size)]);
        } else {
            sizes.extend([("vocab_size", self.vocab_size), ("max_position_embeddings", self.max_position_embeddings)]);
        }
        for (field, v) in sizes {
            if v == 0 {
                return Err(corrupt(path, format!("{tower}.{field} is 0; it must be at least 1")));
            }
        }
        let eps = self.layer_norm_eps;
        if !(eps.is_finite() && eps > 0.0 && (eps as f32) > 0.0) {
            return Err(corrupt(path, format!("{tower}.layer_norm_eps {eps} must be a positive finite f32")));
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(ModelError::Unsupported(format!(
                "{}: {tower}.hidden_size {} is not a multiple of num_attention_heads {}",
                path.display(),
                self.hidden_size,
                self.num_attention_heads
            )));
        }
        if vision {
            if self.num_channels != 3 {
                return Err(ModelError::Unsupported(format!(
                    "{}: {tower}.num_channels {}; kiln's CLIP takes RGB images (3)",
                    path.display(),
                    self.num_channels
                )));
            }
            // The class token and grid² patches, and the image's pixels, must be countable.
            if self.grid().checked_mul(self.grid()).is_none_or(|t| t >= 1 << 24)
                || self.image_size.checked_mul(self.image_size).is_none_or(|p| p >= 1 << 28)
            {
                return Err(ModelError::Unsupported(format!(
                    "{}: {tower}.image_size {} with patch_size {}: past kiln's limits (2^24 patches, 2^28 pixels)",
                    path.display(),
                    self.image_size,
                    self.patch_size
                )));
            }
            if !self.image_size.is_multiple_of(self.patch_size) {
                return Err(ModelError::Unsupported(format!(
                    "{}: {tower}.image_size {} is not a multiple of patch_size {}",
                    path.display(),
                    self.image_size,
                    self.patch_size
                )));
            }
        }
        match self.hidden_act.as_str() {
            "quick_gelu" => Ok(Activation::QuickGelu),
            "gelu" => Ok(Activation::Gelu),
            other => Err(ModelError::Unsupported(format!(
                "{}: {tower}.hidden_act {other:?}; kiln's CLIP runs \"quick_gelu\" and \"gelu\"",
                path.display()
            ))),
        }
    }

    /// Patches per side of the image.
    pub fn grid(&self) -> usize {
        self.image_size / self.patch_size
    }
}

/// config.json of a transformers `CLIPModel`.
#[derive(Debug, Clone, Deserialize)]
pub struct ClipConfig {
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub architectures: Vec<String>,
    pub projection_dim: usize,
    pub text_config: TowerConfig,
    pub vision_config: TowerConfig,
}

impl ClipConfig {
    /// Refuses what is not a CLIPModel (SigLIP, CLIPSeg, X-CLIP, ... are other model types).
    pub fn check(&self, path: &Path) -> Result<(Activation, Activation)> {
        if self.model_type.as_deref() != Some("clip") {
            return Err(ModelError::Unsupported(format!(
                "{}: model_type {:?}, architectures {:?}; kiln's CLIP loads transformers' CLIPModel (model_type \"clip\")",
                path.display(),
                self.model_type,
                self.architectures
            )));
        }
        if self.projection_dim == 0 {
            return Err(corrupt(path, "projection_dim is 0; it must be at least 1"));
        }
        Ok((
            self.text_config.check(path, "text_config", false)?,
            self.vision_config.check(path, "vision_config", true)?,
        ))
    }
}

/// A size as image processors write it: a dict, or a bare int (the feature extractors of
/// transformers 4.x, openai/clip-vit-base-patch32's `"size": 224, "crop_size": 224`), which
/// transformers reads as `{"shortest_edge": n}` for `size` and `{"height": n, "width": n}`
/// for `crop_size` (CLIP's `default_to_square=False`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Size {
    Int(usize),
    Dict(SizeDict),
}

impl Size {
    fn resize(&self) -> SizeDict {
        match self {
            Size::Int(n) => SizeDict { shortest_edge: Some(*n), longest_edge: None, height: None, width: None },
            Size::Dict(d) => d.clone(),
        }
    }

    fn crop(&self) -> SizeDict {
        match self {
            Size::Int(n) => SizeDict { shortest_edge: None, longest_edge: None, height: Some(*n), width: Some(*n) },
            Size::Dict(d) => d.clone(),
        }
    }
}

/// `{"shortest_edge": n}` or `{"height": h, "width": w}`.
#[derive(Debug, Clone, Deserialize)]
pub struct SizeDict {
    #[serde(default)]
    pub shortest_edge: Option<usize>,
    #[serde(default)]
    pub longest_edge: Option<usize>,
    #[serde(default)]
    pub height: Option<usize>,
    #[serde(default)]
    pub width: Option<usize>,
}

/// preprocessor_config.json of a `CLIPImageProcessor`.
#[derive(Debug, Clone, Deserialize)]
pub struct PreprocessorConfig {
    #[serde(default)]
    pub image_processor_type: Option<String>,
    /// transformers 4.x folders name a feature extractor instead ("CLIPFeatureExtractor").
    #[serde(default)]
    pub feature_extractor_type: Option<String>,
    #[serde(default = "yes")]
    pub do_resize: bool,
    pub size: Option<Size>,
    /// PIL's resampling filter number (3 = BICUBIC).
    #[serde(default = "bicubic")]
    pub resample: u32,
    #[serde(default = "yes")]
    pub do_center_crop: bool,
    pub crop_size: Option<Size>,
    #[serde(default = "yes")]
    pub do_rescale: bool,
    #[serde(default = "rescale")]
    pub rescale_factor: f64,
    #[serde(default = "yes")]
    pub do_normalize: bool,
    #[serde(default)]
    pub image_mean: Option<Vec<f64>>,
    #[serde(default)]
    pub image_std: Option<Vec<f64>>,
    #[serde(default)]
    pub do_pad: Option<bool>,
}

fn yes() -> bool {
    true
}
fn bicubic() -> u32 {
    3
}
fn rescale() -> f64 {
    1.0 / 255.0
}

/// OpenAI's CLIP mean and std (transformers' OPENAI_CLIP_MEAN / OPENAI_CLIP_STD), the
/// processor's defaults.
const OPENAI_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
const OPENAI_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];

/// The preprocessing as kiln runs it, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Preprocess {
    /// Resize so that the shorter side is this long (None: no resize).
    pub shortest_edge: Option<usize>,
    /// Center crop to this square side (None: no crop).
    pub crop: Option<usize>,
    pub rescale: Option<f32>,
    /// Per channel (None: no normalisation).
    pub mean_std: Option<([f32; 3], [f32; 3])>,
}

impl PreprocessorConfig {
    /// The steps, for a model whose input is `image_size` square: every image must come out of
    /// them `image_size` x `image_size`, so a configuration that cannot is refused here, not at
    /// the first image.
    pub fn steps(&self, path: &Path, image_size: usize) -> Result<Preprocess> {
        let unsupported = |what: String| ModelError::Unsupported(format!("{}: {what}", path.display()));
        for t in [&self.image_processor_type, &self.feature_extractor_type].into_iter().flatten() {
            if !(t.starts_with("CLIPImageProcessor") || t == "CLIPFeatureExtractor") {
                return Err(unsupported(format!("image processor {t:?}; kiln runs CLIPImageProcessor's steps")));
            }
        }
        if self.do_pad == Some(true) {
            return Err(unsupported("do_pad true; CLIP's processor does not pad".into()));
        }
        let shortest_edge = if self.do_resize {
            if self.resample != 3 {
                return Err(unsupported(format!(
                    "resample {}; kiln resizes with PIL's BICUBIC (3) only",
                    self.resample
                )));
            }
            match &self.size.as_ref().map(Size::resize) {
                Some(SizeDict { shortest_edge: Some(s), longest_edge: None, height: None, width: None }) if *s > 0 => {
                    Some(*s)
                }
                other => {
                    return Err(unsupported(format!(
                    "size {other:?}; kiln resizes to {{\"shortest_edge\": n}} (CLIP's aspect-preserving resize) only"
                )))
                }
            }
        } else {
            None
        };
        let crop = if self.do_center_crop {
            match &self.crop_size.as_ref().map(Size::crop) {
                Some(SizeDict { height: Some(h), width: Some(w), .. }) if h == w && *h > 0 => Some(*h),
                other => return Err(unsupported(format!("crop_size {other:?}; kiln center-crops to a square only"))),
            }
        } else {
            None
        };
        // The tensor the vision tower takes is image_size square: the crop makes it so, or a
        // resize whose shortest edge is it (then only square images fit: checked per image).
        let out = crop.or(shortest_edge);
        if out != Some(image_size) {
            return Err(unsupported(format!(
                "crop_size / size give {out:?}-pixel images; the vision tower takes {image_size} x {image_size}"
            )));
        }
        if let (Some(s), Some(c)) = (shortest_edge, crop) {
            if c > s {
                // transformers would pad the short side with zeros before cropping.
                return Err(unsupported(format!("crop_size {c} larger than size.shortest_edge {s} (padding)")));
            }
        }
        let rescale = self.do_rescale.then_some(self.rescale_factor as f32);
        if rescale.is_some_and(|r| !r.is_finite()) {
            return Err(corrupt(path, format!("rescale_factor {} is not a finite f32", self.rescale_factor)));
        }
        let mean_std = if self.do_normalize {
            let three = |v: &Option<Vec<f64>>, default: [f64; 3], name: &str| -> Result<[f32; 3]> {
                let v = v.clone().unwrap_or(default.to_vec());
                match v.as_slice() {
                    [a, b, c] => Ok([*a as f32, *b as f32, *c as f32]),
                    _ => Err(corrupt(path, format!("{name} has {} values; RGB needs 3", v.len()))),
                }
            };
            let mean = three(&self.image_mean, OPENAI_MEAN, "image_mean")?;
            let std = three(&self.image_std, OPENAI_STD, "image_std")?;
            if let Some(s) = std.iter().find(|s| !(s.is_finite() && **s != 0.0)) {
                return Err(corrupt(path, format!("image_std {s}: every channel's std must be finite and non-zero")));
            }
            if let Some(m) = mean.iter().find(|m| !m.is_finite()) {
                return Err(corrupt(path, format!("image_mean {m} is not finite")));
            }
            Some((mean, std))
        } else {
            None
        };
        Ok(Preprocess { shortest_edge, crop, rescale, mean_std })
    }
}
