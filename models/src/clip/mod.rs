//! CLIP (transformers' `CLIPModel`: OpenAI's ViT-B/32 and its kin) from a folder as
//! `save_pretrained` writes it: config.json, model.safetensors, tokenizer.json (CLIP's
//! byte-level BPE) and preprocessor_config.json (`CLIPImageProcessor`).
//!
//! [`ClipModel`] embeds images and texts into one space; [`ImageEmbedder`] is its vision tower
//! alone (no tokenizer read). Images are RGB u8 `height x width x 3`, preprocessed on the GPU as
//! transformers' PIL path does it ([`preprocess`]).
//!
//! ```no_run
//! let model = kiln_models::ClipModel::load("build/models/clip-vit-base-patch32")?;
//! let pixels = vec![128u8; 480 * 640 * 3];
//! let image = kiln_models::Image { pixels: &pixels, height: 480, width: 640 };
//! let i = model.encode_image(&[image], true)?;
//! let t = model.encode_text(&["a photo of a cat", "a diagram"], true)?;
//! assert_eq!((i.dim, t.rows), (512, 2));
//! # Ok::<(), kiln_models::ModelError>(())
//! ```

pub mod config;
pub mod preprocess;
mod tower;

use crate::config::read_json;
use crate::error::{corrupt, ModelError, Result};
use crate::files::ModelFiles;
use crate::weights::Checkpoint;
use crate::{pooling, Embeddings};
use config::{ClipConfig, Preprocess, PreprocessorConfig};
use kiln_core::{ops, Tensor};
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};
use tower::{TextTower, VisionTower};

/// One RGB image: `pixels` row-major `height x width x 3` u8 (as numpy's `np.asarray(pil_image)`).
#[derive(Debug, Clone, Copy)]
pub struct Image<'a> {
    pub pixels: &'a [u8],
    pub height: usize,
    pub width: usize,
}

/// Images (or texts) per forward pass.
const BATCH: usize = 32;

/// The vision tower and its preprocessing, shared by [`ClipModel`] and [`ImageEmbedder`].
struct Vision {
    tower: VisionTower,
    preprocess: Preprocess,
}

impl Vision {
    fn load(files: &ModelFiles, config: &ClipConfig, ck: &Checkpoint) -> Result<Vision> {
        let path = files.path("config.json");
        let (_, act) = config.check(&path)?;
        let pre: PreprocessorConfig = read_json(files, "preprocessor_config.json")?;
        let preprocess = pre.steps(&files.path("preprocessor_config.json"), config.vision_config.image_size)?;
        let tower = VisionTower::load(ck, config.vision_config.clone(), act, config.projection_dim)?;
        Ok(Vision { tower, preprocess })
    }

    fn pixel_values(&self, images: &[Image]) -> Result<Tensor> {
        let s = self.tower.config.image_size;
        let each: Vec<Tensor> = images
            .iter()
            .map(|im| preprocess::pixel_values(&self.preprocess, im.pixels, im.height, im.width, s))
            .collect::<Result<_>>()?;
        let each: Vec<Tensor> =
            each.iter().map(|t| t.reshape(&[1, 3, s as isize, s as isize])).collect::<kiln_core::Result<_>>()?;
        Ok(ops::concat(&each.iter().collect::<Vec<_>>(), 0)?)
    }

    fn encode(&self, images: &[Image], normalize: bool) -> Result<Embeddings> {
        let dim = self.tower.projection_dim();
        let mut data = Vec::with_capacity(images.len() * dim);
        for chunk in images.chunks(BATCH) {
            let mut e = self.tower.forward(&self.pixel_values(chunk)?)?;
            if normalize {
                e = pooling::l2_normalize(&e)?;
            }
            data.extend(e.to_vec::<f32>()?);
        }
        Ok(Embeddings { data, rows: images.len(), dim })
    }

    /// The preprocessing alone: [N, 3, S, S] f32, row-major, as CLIPImageProcessor's
    /// pixel_values.
    fn pixel_values_host(&self, images: &[Image]) -> Result<Vec<f32>> {
        if images.is_empty() {
            return Ok(vec![]);
        }
        Ok(self.pixel_values(images)?.to_vec::<f32>()?)
    }
}

fn open(dir: &Path) -> Result<ModelFiles> {
    if !dir.is_dir() {
        return Err(ModelError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "model directory not found"),
        });
    }
    Ok(ModelFiles::Dir(dir.to_path_buf()))
}

fn checkpoint(files: &mut ModelFiles) -> Result<(ClipConfig, Checkpoint)> {
    let config: ClipConfig = read_json(files, "config.json")?;
    config.check(&files.path("config.json"))?;
    let ck_path = files.path("model.safetensors");
    let ck = Checkpoint::new(&ck_path, files.take("model.safetensors", "a .safetensors file")?, "")?;
    Ok((config, ck))
}

/// CLIP's vision tower alone: images to embeddings.
pub struct ImageEmbedder {
    vision: Vision,
}

impl ImageEmbedder {
    /// A CLIPModel folder's config.json, model.safetensors (the vision_model and
    /// visual_projection weights) and preprocessor_config.json.
    pub fn load(dir: impl AsRef<Path>) -> Result<ImageEmbedder> {
        Self::from_files(open(dir.as_ref())?)
    }

    pub fn from_files(mut files: ModelFiles) -> Result<ImageEmbedder> {
        let (config, ck) = checkpoint(&mut files)?;
        Ok(ImageEmbedder { vision: Vision::load(&files, &config, &ck)? })
    }

    /// Embeddings [images, projection_dim], L2-normalised if `normalize`.
    pub fn encode(&self, images: &[Image], normalize: bool) -> Result<Embeddings> {
        self.vision.encode(images, normalize)
    }

    /// What the preprocessing gives `images` (transformers' pixel_values): [N, 3, S, S] f32.
    pub fn pixel_values(&self, images: &[Image]) -> Result<Vec<f32>> {
        self.vision.pixel_values_host(images)
    }

    pub fn dim(&self) -> usize {
        self.vision.tower.projection_dim()
    }

    /// The side of the square images the tower takes (after the preprocessing).
    pub fn image_size(&self) -> usize {
        self.vision.tower.config.image_size
    }
}

/// Both towers: images and texts into one embedding space.
pub struct ClipModel {
    vision: Vision,
    text: TextTower,
    tokenizer: Tokenizer,
    tok_path: PathBuf,
}

impl ClipModel {
    /// A folder as `CLIPModel.save_pretrained` and the processor's `save_pretrained` write it:
    /// config.json, model.safetensors, tokenizer.json, preprocessor_config.json.
    pub fn load(dir: impl AsRef<Path>) -> Result<ClipModel> {
        Self::from_files(open(dir.as_ref())?)
    }

    pub fn from_files(mut files: ModelFiles) -> Result<ClipModel> {
        let (config, ck) = checkpoint(&mut files)?;
        let config_path = files.path("config.json");
        let (text_act, _) = config.check(&config_path)?;
        let vision = Vision::load(&files, &config, &ck)?;
        let tc = config.text_config.clone();
        let tok_path = files.path("tokenizer.json");
        let mut tokenizer = Tokenizer::from_bytes(files.read("tokenizer.json")?)
            .map_err(|e| corrupt(&tok_path, format!("not a tokenizer: {e}")))?;
        // The position table bounds a text: longer ones are cut, <|endoftext|> kept last (the
        // post-processor adds it after truncation), as `tokenizer(..., truncation=True,
        // max_length=77)` does.
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: tc.max_position_embeddings,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(None);
        crate::check_vocab(&tokenizer, &tok_path, &config_path, tc.vocab_size)?;
        let text = TextTower::load(&ck, tc, text_act, config.projection_dim)?;
        Ok(ClipModel { vision, text, tokenizer, tok_path })
    }

    /// Image embeddings [images, projection_dim], L2-normalised if `normalize` (as CLIP
    /// compares them: cosine similarity).
    pub fn encode_image(&self, images: &[Image], normalize: bool) -> Result<Embeddings> {
        self.vision.encode(images, normalize)
    }

    /// What the preprocessing gives `images` (transformers' pixel_values): [N, 3, S, S] f32.
    pub fn pixel_values(&self, images: &[Image]) -> Result<Vec<f32>> {
        self.vision.pixel_values_host(images)
    }

    /// The token ids of each text (with <|startoftext|> and <|endoftext|>, truncated to the
    /// position table).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let inputs: Vec<tokenizers::EncodeInput> = texts.iter().map(|&t| t.into()).collect();
        let enc = self.tokenizer.encode_batch_fast(inputs, true).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let vocab = self.text.config.vocab_size;
        enc.into_iter()
            .map(|e| {
                let ids = e.get_ids().to_vec();
                if let Some(&id) = ids.iter().find(|&&i| i as usize >= vocab) {
                    return Err(corrupt(
                        &self.tok_path,
                        format!("gives token id {id}, past config.json's vocab_size {vocab}"),
                    ));
                }
                if ids.is_empty() {
                    return Err(corrupt(
                        &self.tok_path,
                        "gives no token for a text (no <|startoftext|> / <|endoftext|> post-processor)",
                    ));
                }
                Ok(ids)
            })
            .collect()
    }

    /// Text embeddings [texts, projection_dim], L2-normalised if `normalize`.
    pub fn encode_text(&self, texts: &[&str], normalize: bool) -> Result<Embeddings> {
        let tokens = self.tokenize(texts)?;
        let dim = self.dim();
        let mut data = Vec::with_capacity(texts.len() * dim);
        for chunk in tokens.chunks(BATCH) {
            let (b, l) = (chunk.len(), chunk.iter().map(Vec::len).max().unwrap_or(0));
            // Right padding with id 0: under the causal mask no real token sees it.
            let mut ids = vec![0u32; b * l];
            for (r, t) in chunk.iter().enumerate() {
                ids[r * l..r * l + t.len()].copy_from_slice(t);
            }
            let pooled: Vec<usize> = chunk.iter().map(|t| self.text.pooled_position(t)).collect();
            let mut e = self.text.forward(&ids, b, &pooled)?;
            if normalize {
                e = pooling::l2_normalize(&e)?;
            }
            data.extend(e.to_vec::<f32>()?);
        }
        Ok(Embeddings { data, rows: texts.len(), dim })
    }

    pub fn dim(&self) -> usize {
        self.vision.tower.projection_dim()
    }

    pub fn image_size(&self) -> usize {
        self.vision.tower.config.image_size
    }
}
