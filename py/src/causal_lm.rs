//! `kiln.models.CausalLM`: text generation from a Llama-family GGUF file (kiln-models).
//! The GIL is released while the model loads and while each token is computed.

use crate::models::{detached as detach, model_devices, model_err};
use kiln_models::{Backend, CausalLM, GenerateOptions, Generation, Message, ModelError, Replicas, SamplingOptions};
use numpy::PyArrayMethods;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A causal language model from a .gguf file (the Llama family by general.architecture: llama
/// (SmolLM2, Llama 3.x), qwen2 (Qwen2.5), phi3 (Phi-3-mini), gemma (Gemma)), the weights kept
/// quantized on the GPU.
#[pyclass(name = "CausalLM", module = "kiln._kiln", frozen)]
pub struct PyCausalLM {
    /// The model (with ``devices``: the first device's copy, which ``generate``, ``stream`` and
    /// the other single-sequence methods run on).
    model: Arc<CausalLM>,
    /// With ``devices``: a copy per device, over which ``generate_batch`` spreads its prompts.
    replicas: Option<Replicas<Arc<CausalLM>>>,
}

#[allow(clippy::too_many_arguments)]
fn options(
    max_new_tokens: usize,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    repetition_penalty: f32,
    seed: Option<u64>,
    stop: Option<Vec<String>>,
) -> PyResult<GenerateOptions> {
    if !(temperature >= 0.0 && temperature.is_finite()) {
        return Err(PyValueError::new_err(format!("temperature {temperature}: must be >= 0")));
    }
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(PyValueError::new_err(format!("top_p {top_p}: must be in (0, 1]")));
    }
    if !(repetition_penalty > 0.0 && repetition_penalty.is_finite()) {
        return Err(PyValueError::new_err(format!("repetition_penalty {repetition_penalty}: must be positive")));
    }
    Ok(GenerateOptions {
        max_tokens: max_new_tokens,
        sampling: SamplingOptions {
            temperature,
            top_k,
            top_p,
            repetition_penalty,
            seed: seed.unwrap_or(0),
            ..Default::default()
        },
        stop: stop.unwrap_or_default(),
        stop_at_eos: true,
    })
}

impl PyCausalLM {
    /// Token ids from a str (tokenized) or a sequence of non-negative ints.
    fn ids(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        if let Ok(text) = ids.extract::<String>() {
            return self.model.tokenizer().encode(&text).map_err(|e| model_err(py, e));
        }
        ids.extract::<Vec<u32>>()
            .map_err(|_| PyValueError::new_err("token ids: a str, or a sequence of ints in 0 .. 2**32"))
    }

    fn prompt(&self, prompt: &str, chat: bool) -> kiln_models::Result<String> {
        if chat {
            self.model.chat_prompt(prompt)
        } else {
            Ok(prompt.to_string())
        }
    }
}

#[pymethods]
impl PyCausalLM {
    #[new]
    #[pyo3(signature = (path, devices = None))]
    fn new(py: Python<'_>, path: PathBuf, devices: Option<&Bound<'_, PyAny>>) -> PyResult<PyCausalLM> {
        if devices.is_none() {
            let model = detach(py, || CausalLM::load(&path))?;
            return Ok(PyCausalLM { model: Arc::new(model), replicas: None });
        }
        let devices = model_devices(py, devices)?;
        let replicas = detach(py, || {
            Replicas::load(&devices, || CausalLM::load_on(&path, Backend::Gpu, |_, _| {}).map(Arc::new))
        })?;
        Ok(PyCausalLM { model: replicas.first().clone(), replicas: Some(replicas) })
    }

    /// The adapter index of each copy (``[]`` for a model loaded without ``devices``, on the
    /// default device or the CPU backend).
    #[getter]
    fn devices(&self) -> Vec<usize> {
        self.replicas.as_ref().map_or(Vec::new(), |r| r.devices().iter().map(|d| d.info().index).collect())
    }

    /// The whole continuation of ``prompt`` as a string (``chat=True``: ``prompt`` is a user
    /// message put through the model's chat template). ``temperature=0`` is greedy; ``seed``
    /// makes sampling reproducible on every device.
    #[pyo3(signature = (prompt, max_new_tokens=128, temperature=0.0, top_k=0, top_p=1.0, repetition_penalty=1.0, seed=None, stop=None, chat=false))]
    #[allow(clippy::too_many_arguments)]
    fn generate(
        &self,
        py: Python<'_>,
        prompt: &str,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        repetition_penalty: f32,
        seed: Option<u64>,
        stop: Option<Vec<String>>,
        chat: bool,
    ) -> PyResult<String> {
        let opts = options(max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed, stop)?;
        detach(py, || self.model.generate(&self.prompt(prompt, chat)?, opts)?.text())
    }

    /// Like ``generate``, as an iterator of text pieces produced one token at a time.
    #[pyo3(signature = (prompt, max_new_tokens=128, temperature=0.0, top_k=0, top_p=1.0, repetition_penalty=1.0, seed=None, stop=None, chat=false))]
    #[allow(clippy::too_many_arguments)]
    fn stream(
        &self,
        py: Python<'_>,
        prompt: &str,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        repetition_penalty: f32,
        seed: Option<u64>,
        stop: Option<Vec<String>>,
        chat: bool,
    ) -> PyResult<PyGeneration> {
        let opts = options(max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed, stop)?;
        let text = self.prompt(prompt, chat).map_err(|e| model_err(py, e))?;
        let generation = self.model.generate_shared(&text, opts).map_err(|e| model_err(py, e))?;
        Ok(PyGeneration { inner: Mutex::new(generation) })
    }

    /// The continuations of several prompts generated together (batched decode: one forward
    /// pass a step for all of them, the weights read once for the batch), in prompt order; the
    /// options as ``generate``'s, for every prompt. Each text is the one ``generate`` gives for
    /// that prompt alone (greedy; sampled alike with the same ``seed``). A prompt's error
    /// (its context ran out) is raised after the batch has run.
    #[pyo3(signature = (prompts, max_new_tokens=128, temperature=0.0, top_k=0, top_p=1.0, repetition_penalty=1.0, seed=None, stop=None, chat=false))]
    #[allow(clippy::too_many_arguments)]
    fn generate_batch(
        &self,
        py: Python<'_>,
        prompts: Vec<String>,
        max_new_tokens: usize,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        repetition_penalty: f32,
        seed: Option<u64>,
        stop: Option<Vec<String>>,
        chat: bool,
    ) -> PyResult<Vec<String>> {
        let opts = options(max_new_tokens, temperature, top_k, top_p, repetition_penalty, seed, stop)?;
        let outs = detach(py, || {
            let texts = prompts.iter().map(|p| self.prompt(p, chat)).collect::<kiln_models::Result<Vec<_>>>()?;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            Ok(match &self.replicas {
                Some(r) => r.generate_batch(&refs, &[opts])?.0,
                None => self.model.generate_batch(&refs, &[opts])?.run()?.0,
            })
        })?;
        let mut texts = Vec::with_capacity(outs.len());
        for o in outs {
            if let Some(e) = o.error {
                return Err(model_err(py, e));
            }
            texts.push(o.text);
        }
        Ok(texts)
    }

    /// Token ids of ``text`` (special tokens such as ``<|im_start|>`` matched as themselves).
    fn tokenize(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        self.model.tokenizer().encode(text).map_err(|e| model_err(py, e))
    }

    /// The text of token ids (``tokenize``'s inverse for text without special tokens; special
    /// tokens come back as their text).
    fn detokenize(&self, ids: Vec<u32>) -> String {
        self.model.tokenizer().decode(&ids)
    }

    /// Next-token logits (float32, the vocabulary long) after ``ids`` (a str is tokenized
    /// first); with ``all_positions`` the logits after each prefix, shape ``(len(ids), vocab)``.
    /// Ids past the vocabulary raise ValueError.
    #[pyo3(signature = (ids, all_positions = false))]
    fn logits<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
        all_positions: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ids = self.ids(py, ids)?;
        let model = self.model.clone();
        let v = model.config.vocab;
        let out = detach(py, move || if all_positions { model.logits_all(&ids) } else { model.logits(&ids) })?;
        let rows = out.len() / v.max(1);
        let a = numpy::PyArray1::from_vec(py, out);
        if all_positions {
            Ok(a.reshape([rows, v])?.into_any())
        } else {
            Ok(a.into_any())
        }
    }

    /// Natural-log probability of each token of ``ids`` (or of ``text``'s tokens) after the
    /// first, given the ones before it: float64, ``len(ids) - 1`` values; their sum is the
    /// log-likelihood (ranking candidate continuations).
    fn score<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
        let ids = self.ids(py, ids)?;
        let model = self.model.clone();
        let s = detach(py, move || model.score(&ids))?;
        Ok(numpy::PyArray1::from_vec(py, s))
    }

    /// ``exp(-mean(score(ids)))``: the model's perplexity on the text (at least two tokens).
    fn perplexity(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<f64> {
        let ids = self.ids(py, ids)?;
        let model = self.model.clone();
        detach(py, move || model.perplexity(&ids))
    }

    /// A conversation through the model's chat template (the GGUF's ``tokenizer.chat_template``;
    /// ChatML when it has none but has ChatML's tokens, else an error): ``prompt`` is one user message (a str) or a list of
    /// ``{"role": ..., "content": ...}`` dicts; ``add_generation_prompt`` opens the assistant's
    /// turn.
    #[pyo3(signature = (prompt, add_generation_prompt = true))]
    fn chat_prompt(&self, py: Python<'_>, prompt: &Bound<'_, PyAny>, add_generation_prompt: bool) -> PyResult<String> {
        let messages: Vec<Message> = if let Ok(text) = prompt.extract::<String>() {
            vec![Message::new("user", &text)]
        } else {
            let list: Vec<std::collections::HashMap<String, String>> = prompt.extract().map_err(|_| {
                PyValueError::new_err("chat_prompt: a str or a list of {'role': str, 'content': str} dicts")
            })?;
            list.iter()
                .map(|m| match (m.get("role"), m.get("content")) {
                    (Some(r), Some(c)) => Ok(Message::new(r, c)),
                    _ => Err(PyValueError::new_err("chat_prompt: each message needs 'role' and 'content'")),
                })
                .collect::<PyResult<_>>()?
        };
        self.model.chat_prompt_messages(&messages, add_generation_prompt).map_err(|e| model_err(py, e))
    }

    fn __repr__(&self) -> String {
        let c = &self.model.config;
        format!(
            "CausalLM(layers={}, hidden={}, heads={}/{}, vocab={})",
            c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.vocab
        )
    }
}

/// The iterator ``CausalLM.stream`` returns.
#[pyclass(name = "Generation", module = "kiln._kiln", frozen)]
pub struct PyGeneration {
    inner: Mutex<Generation<'static>>,
}

#[pymethods]
impl PyGeneration {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let next = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| self.inner.lock().map(|mut g| g.next()).unwrap_or(None)))
                .unwrap_or_else(|p| Some(Err(ModelError::Kiln(kiln_core::Error::from_panic(p)))))
        });
        match next {
            None => Ok(None),
            Some(Ok(piece)) => Ok(Some(piece)),
            Some(Err(e)) => Err(model_err(py, e)),
        }
    }
}
