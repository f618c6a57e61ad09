//! `kiln.models` in the page: kiln-models' SentenceEmbedder and CausalLM over the same core ops
//! as native, loaded from bytes the page fetched (wasm32 has no file system), every GPU wait
//! awaited. js/models.js wraps these in the documented classes (URL loading, progress, the
//! cache, async iteration, use-after-free as KilnError); these are its raw halves.

use crate::error::{js_err, JsResult};
use kiln_models::{
    EncodeOptions, GenerateOptions, LoadOptions, ModelError, ModelFiles, Precision, SafetensorsStream, SamplingOptions,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

/// ModelError as a KilnError: GPU errors keep their code; a model the crate does not run is
/// UNSUPPORTED; a missing or malformed file (its name in the message) INVALID_ARGUMENT.
fn model_err(e: ModelError) -> JsValue {
    match e {
        ModelError::Kiln(k) => js_err(k),
        ModelError::Unsupported(m) => js_err(kiln_core::Error::Unsupported(m)),
        other => js_err(kiln_core::Error::InvalidArgument(other.to_string())),
    }
}

/// `progress(done, total)` calling a JavaScript function, if there is one (its errors ignored:
/// a progress bar must not fail a load).
fn progress_fn(f: Option<js_sys::Function>) -> impl FnMut(usize, usize) {
    move |done, total| {
        if let Some(f) = &f {
            let _ = f.call2(&JsValue::NULL, &(done as f64).into(), &(total as f64).into());
        }
    }
}

/// A GGUF file as it downloads (js/models.js's `read` pushes each chunk): kiln-models'
/// GgufStream, which parses the header first and uploads each weight stack to the GPU as its
/// last tensor arrives, so wasm memory never holds the file (only the header and the stack
/// being gathered).
#[wasm_bindgen]
pub struct GgufSink {
    inner: Option<kiln_models::GgufStream>,
}

#[wasm_bindgen]
impl GgufSink {
    #[wasm_bindgen(constructor)]
    pub fn new() -> GgufSink {
        GgufSink { inner: Some(kiln_models::GgufStream::new(Path::new(GGUF_NAME))) }
    }

    /// The next chunk of the file.
    pub fn push(&mut self, chunk: &[u8]) -> JsResult<()> {
        match &mut self.inner {
            Some(s) => s.push(chunk).map_err(model_err),
            None => Err(js_err(kiln_core::Error::InvalidArgument("this GgufSink was already loaded".into()))),
        }
    }

    /// Bytes pushed so far.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> f64 {
        self.inner.as_ref().map_or(0.0, |s| s.received() as f64)
    }
}

impl Default for GgufSink {
    fn default() -> Self {
        Self::new()
    }
}

/// What a GGUF is called in messages (a page has no path).
const GGUF_NAME: &str = "model.gguf";

/// model.safetensors as it downloads (js/models.js's `read` pushes each chunk): the header, then
/// each tensor uploaded to the GPU the moment its last byte arrives (kiln-models'
/// SafetensorsStream), so wasm memory holds one tensor's bytes at a time, never the file.
#[wasm_bindgen]
pub struct SafetensorsSink {
    inner: Option<SafetensorsStream>,
}

#[wasm_bindgen]
impl SafetensorsSink {
    #[wasm_bindgen(constructor)]
    pub fn new() -> SafetensorsSink {
        SafetensorsSink { inner: Some(SafetensorsStream::new(Path::new("model.safetensors"))) }
    }

    /// The next chunk of the file.
    pub fn push(&mut self, chunk: &[u8]) -> JsResult<()> {
        match &mut self.inner {
            Some(s) => s.push(chunk).map_err(model_err),
            None => Err(js_err(kiln_core::Error::InvalidArgument("this SafetensorsSink was already loaded".into()))),
        }
    }
}

impl Default for SafetensorsSink {
    fn default() -> Self {
        Self::new()
    }
}

fn precision(dtype: &str) -> JsResult<Precision> {
    match dtype {
        "f32" => Ok(Precision::F32),
        "f16" => Ok(Precision::F16),
        other => Err(js_err(kiln_core::Error::InvalidArgument(format!(
            "dtype {other:?}: a SentenceEmbedder computes in \"f32\" or \"f16\""
        )))),
    }
}

/// The raw half of `kiln.models.SentenceEmbedder`.
#[wasm_bindgen]
pub struct SentenceEmbedderCore {
    inner: kiln_models::SentenceEmbedder,
}

#[wasm_bindgen]
impl SentenceEmbedderCore {
    /// A sentence-transformers folder from its files: `names[i]` ("config.json",
    /// "1_Pooling/config.json", ...) holds `contents[i]`. `dtype` "f32" or "f16".
    /// `progress(done, total)` is called as the encoder layers upload.
    #[wasm_bindgen(js_name = fromFiles)]
    pub fn from_files(
        names: Vec<String>,
        contents: Vec<js_sys::Uint8Array>,
        dtype: &str,
        progress: Option<js_sys::Function>,
    ) -> JsResult<SentenceEmbedderCore> {
        let precision = precision(dtype)?;
        let files: BTreeMap<String, Vec<u8>> = names.into_iter().zip(contents.iter().map(|c| c.to_vec())).collect();
        drop(contents);
        let inner = kiln_models::SentenceEmbedder::from_files(
            ModelFiles::Memory(files),
            LoadOptions { precision },
            progress_fn(progress),
        )
        .map_err(model_err)?;
        Ok(SentenceEmbedderCore { inner })
    }

    /// [`from_files`](Self::from_files) with model.safetensors streamed into `weights` (its
    /// tensors already on the GPU); the other files as there.
    #[wasm_bindgen(js_name = fromFilesStreamed)]
    pub fn from_files_streamed(
        names: Vec<String>,
        contents: Vec<js_sys::Uint8Array>,
        dtype: &str,
        progress: Option<js_sys::Function>,
        weights: &mut SafetensorsSink,
    ) -> JsResult<SentenceEmbedderCore> {
        let precision = precision(dtype)?;
        let stream = weights.inner.take().ok_or_else(|| {
            js_err(kiln_core::Error::InvalidArgument("this SafetensorsSink was already loaded".into()))
        })?;
        let uploaded = stream.finish().map_err(model_err)?;
        let files: BTreeMap<String, Vec<u8>> = names.into_iter().zip(contents.iter().map(|c| c.to_vec())).collect();
        drop(contents);
        let inner = kiln_models::SentenceEmbedder::from_files_uploaded(
            ModelFiles::Memory(files),
            uploaded,
            LoadOptions { precision },
            progress_fn(progress),
        )
        .map_err(model_err)?;
        Ok(SentenceEmbedderCore { inner })
    }

    /// Embeddings of `texts`, row-major [n, dimension]. `normalize` undefined follows the model.
    pub async fn encode(
        &self,
        texts: Vec<String>,
        normalize: Option<bool>,
        batch_size: u32,
    ) -> JsResult<js_sys::Float32Array> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let opts = EncodeOptions { batch_size: batch_size.max(1) as usize, normalize };
        let e = self.inner.encode_async(&refs, opts, |_, _| {}).await.map_err(model_err)?;
        Ok(js_sys::Float32Array::from(&e.data[..]))
    }

    /// Token ids of one text ([CLS] ... [SEP], truncated at maxSeqLength).
    pub fn tokenize(&self, text: &str) -> JsResult<Vec<u32>> {
        let mut t = self.inner.tokenize(&[text]).map_err(model_err)?;
        Ok(t.pop().map(|(ids, _)| ids).unwrap_or_default())
    }

    #[wasm_bindgen(getter)]
    pub fn dimension(&self) -> u32 {
        self.inner.dim() as u32
    }

    #[wasm_bindgen(getter, js_name = maxSeqLength)]
    pub fn max_seq_length(&self) -> u32 {
        self.inner.max_seq_length() as u32
    }

    #[wasm_bindgen(getter)]
    pub fn normalizes(&self) -> bool {
        self.inner.normalizes()
    }

    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> String {
        match self.inner.precision() {
            Precision::F32 => "f32".into(),
            Precision::F16 => "f16".into(),
        }
    }
}

/// The raw half of `kiln.models.CausalLM`.
#[wasm_bindgen]
pub struct CausalLMCore {
    inner: Arc<kiln_models::CausalLM>,
}

/// A number field of an options object, if set.
fn opt_f64(o: &JsValue, key: &str) -> JsResult<Option<f64>> {
    let v = js_sys::Reflect::get(o, &key.into()).unwrap_or(JsValue::UNDEFINED);
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    v.as_f64().filter(|x| x.is_finite()).map(Some).ok_or_else(|| {
        js_err(kiln_core::Error::InvalidArgument(format!("option {key} must be a finite number, got {v:?}")))
    })
}

/// A whole-number option from 0 to `max`.
fn opt_count(o: &JsValue, key: &str, max: f64) -> JsResult<Option<f64>> {
    match opt_f64(o, key)? {
        Some(n) if !(0.0..=max).contains(&n) || n.fract() != 0.0 => Err(js_err(kiln_core::Error::InvalidArgument(
            format!("option {key} must be a whole number from 0 to {max}, got {n}"),
        ))),
        n => Ok(n),
    }
}

/// `{maxNewTokens, temperature, topK, topP, repetitionPenalty, repeatLastN, seed, stop,
/// stopAtEos}` (camelCase of Python's names; each optional) as GenerateOptions.
fn generate_options(o: &JsValue) -> JsResult<GenerateOptions> {
    let mut g = GenerateOptions::default();
    if o.is_undefined() || o.is_null() {
        return Ok(g);
    }
    // 2^53 - 1: the largest whole number a JavaScript number holds exactly.
    let safe = 9_007_199_254_740_991.0;
    let d = SamplingOptions::default();
    g.max_tokens = opt_count(o, "maxNewTokens", safe)?.map_or(g.max_tokens, |n| n as usize);
    g.sampling = SamplingOptions {
        temperature: opt_f64(o, "temperature")?.map_or(d.temperature, |x| x as f32),
        top_k: opt_count(o, "topK", safe)?.map_or(d.top_k, |n| n as usize),
        top_p: opt_f64(o, "topP")?.map_or(d.top_p, |x| x as f32),
        repetition_penalty: opt_f64(o, "repetitionPenalty")?.map_or(d.repetition_penalty, |x| x as f32),
        repeat_last_n: opt_count(o, "repeatLastN", safe)?.map_or(d.repeat_last_n, |n| n as usize),
        seed: opt_count(o, "seed", safe)?.map_or(d.seed, |n| n as u64),
    };
    let stop = js_sys::Reflect::get(o, &"stop".into()).unwrap_or(JsValue::UNDEFINED);
    if let Some(s) = stop.as_string() {
        g.stop = vec![s];
    } else if js_sys::Array::is_array(&stop) {
        for s in js_sys::Array::from(&stop).iter() {
            g.stop.push(s.as_string().ok_or_else(|| {
                js_err(kiln_core::Error::InvalidArgument("option stop is a string or an array of strings".into()))
            })?);
        }
    } else if !(stop.is_undefined() || stop.is_null()) {
        return Err(js_err(kiln_core::Error::InvalidArgument("option stop is a string or an array of strings".into())));
    }
    let eos = js_sys::Reflect::get(o, &"stopAtEos".into()).unwrap_or(JsValue::UNDEFINED);
    if let Some(b) = eos.as_bool() {
        g.stop_at_eos = b;
    }
    Ok(g)
}

/// The most tokens `lookahead` may record ahead: recording is the page's own work, done between
/// two awaits, so a deep lookahead would hold the page's thread that long (and a stop would waste
/// that many tokens' GPU work).
const MAX_LOOKAHEAD: f64 = 64.0;

/// Option `lookahead`: tokens the pipelined loop records ahead of the last id read back (default
/// kiln-models' LOOKAHEAD, 8), 0 for the serial loop (a token recorded, its id awaited, the next
/// recorded): the reference the page test compares the pipelined loop with, and a way to measure it.
fn lookahead(o: &JsValue) -> JsResult<Option<usize>> {
    if o.is_undefined() || o.is_null() {
        return Ok(None);
    }
    Ok(opt_count(o, "lookahead", MAX_LOOKAHEAD)?.map(|n| n as usize))
}

#[wasm_bindgen]
impl CausalLMCore {
    /// A Llama-architecture GGUF from its bytes, on the page's WebGPU device: streamed through
    /// a [`GgufSink`] a piece at a time (never copied into wasm memory whole). `progress(done,
    /// total)` is called as the layers are put together.
    #[wasm_bindgen(js_name = fromBytes)]
    pub fn from_bytes(bytes: js_sys::Uint8Array, progress: Option<js_sys::Function>) -> JsResult<CausalLMCore> {
        const PIECE: u32 = 1 << 20;
        let mut sink = GgufSink::new();
        let n = bytes.length();
        let mut piece = Vec::new();
        for start in (0..n).step_by(PIECE as usize) {
            let part = bytes.subarray(start, start.saturating_add(PIECE).min(n));
            piece.resize(part.length() as usize, 0);
            part.copy_to(&mut piece);
            sink.push(&piece)?;
        }
        drop(piece);
        Self::from_sink(&mut sink, progress)
    }

    /// The model of the file a [`GgufSink`] took in (its stacks already on the GPU; the sink is
    /// left spent).
    #[wasm_bindgen(js_name = fromSink)]
    pub fn from_sink(sink: &mut GgufSink, progress: Option<js_sys::Function>) -> JsResult<CausalLMCore> {
        let stream = sink
            .inner
            .take()
            .ok_or_else(|| js_err(kiln_core::Error::InvalidArgument("this GgufSink was already loaded".into())))?;
        let streamed = stream.finish().map_err(model_err)?;
        let inner = kiln_models::CausalLM::from_streamed(streamed, progress_fn(progress)).map_err(model_err)?;
        Ok(CausalLMCore { inner: Arc::new(inner) })
    }

    /// Token ids of `text` (special tokens written in it matched as themselves, BOS if the
    /// vocabulary asks for it).
    pub fn tokenize(&self, text: &str) -> JsResult<Vec<u32>> {
        self.inner.tokenizer().encode(text).map_err(model_err)
    }

    /// The text of `ids`.
    pub fn detokenize(&self, ids: Vec<u32>) -> String {
        self.inner.tokenizer().decode(&ids)
    }

    /// `user` through the model's chat template.
    #[wasm_bindgen(js_name = chatPrompt)]
    pub fn chat_prompt(&self, user: &str) -> JsResult<String> {
        self.inner.chat_prompt(user).map_err(model_err)
    }

    /// A generation of `prompt` with `options` (see `generate_options`; `lookahead` as
    /// `lookahead`), stepped by `next()`.
    pub fn start(&self, prompt: &str, options: JsValue) -> JsResult<GenerationCore> {
        let opts = generate_options(&options)?;
        let ahead = lookahead(&options)?;
        let mut inner = self.inner.generate_shared(prompt, opts).map_err(model_err)?;
        if let Some(n) = ahead {
            inner = inner.with_lookahead(n);
        }
        Ok(GenerationCore { inner })
    }

    #[wasm_bindgen(getter, js_name = vocabSize)]
    pub fn vocab_size(&self) -> u32 {
        self.inner.config.vocab as u32
    }

    #[wasm_bindgen(getter, js_name = contextLength)]
    pub fn context_length(&self) -> u32 {
        self.inner.config.context as u32
    }
}

/// One generation in progress.
#[wasm_bindgen]
pub struct GenerationCore {
    inner: kiln_models::Generation<'static>,
}

#[wasm_bindgen]
impl GenerationCore {
    /// The next text piece, or undefined at the end. A token's GPU work is awaited, so the page
    /// runs its other tasks meanwhile.
    pub async fn next(&mut self) -> JsResult<Option<String>> {
        self.inner.next_async().await.transpose().map_err(model_err)
    }

    /// Token ids generated so far (a stop token included).
    #[wasm_bindgen(getter)]
    pub fn tokens(&self) -> Vec<u32> {
        self.inner.tokens().to_vec()
    }

    /// `{promptTokens, generatedTokens, prefillMs, decodeMs, decodeTokensPerS}`.
    pub fn stats(&self) -> JsValue {
        let s = self.inner.stats();
        let o = js_sys::Object::new();
        for (k, v) in [
            ("promptTokens", s.prompt_tokens as f64),
            ("generatedTokens", s.generated_tokens as f64),
            ("prefillMs", s.prefill.as_secs_f64() * 1e3),
            ("decodeMs", s.decode.as_secs_f64() * 1e3),
            ("decodeTokensPerS", s.decode_tokens_per_s()),
        ] {
            let _ = js_sys::Reflect::set(&o, &k.into(), &v.into());
        }
        o.into()
    }
}
