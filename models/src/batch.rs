//! Batched generation (issue 29): B sequences decoded together, one forward pass a step for all
//! of them (`CausalLM::batch_step`): the B token rows go through each weight product at once,
//! so a step reads the weights once for B tokens (decode is bound by that read at B = 1), while
//! each sequence keeps its own KV cache (a slab of one [B, Hkv, capacity, D] tensor per layer),
//! position, stop rules, sampler and max_tokens.
//!
//! - Each prompt is prefilled alone (the single-sequence prefill) into a zeroed cache of the
//!   batch's capacity; the caches are then stacked once ([`CausalLM::stack_caches`]).
//! - A step feeds every row its last token; row r's step t runs at position prompt_r + t. A
//!   finished sequence stays in the batch, masked: its outputs are dropped (the caches are
//!   never compacted).
//! - All rows greedy: the step's picks (argmax [B] on the GPU) are the next step's input and
//!   up to [`LOOKAHEAD`] steps are recorded ahead of the ids read back ([`crate::decode_loop`]'s
//!   scheme; positions and masks are host-known). A row that samples (on the host sampler, its
//!   own seed) makes the host read each step's logits before recording the next.
//! - The CPU backend runs the sequences one after another through [`Generation`].
//!
//! A sequence's tokens equal those it gets alone (greedy: `models/tests/batch.rs`); its logits
//! differ within rounding, since the batch's products and attention may sum in other orders
//! (the strided matvec where one row takes the wide one, the tiled kernel under
//! [`BatchProducts::Tiled`], attention split over the longest row).

use crate::backend::Backend;
use crate::decode_loop::LOOKAHEAD;
use crate::error::{ModelError, Result};
use crate::llama::{is_stop_token, CausalLM, GenerateOptions, Generation, KvCache, TextStream};
use crate::sampling::Sampler;
use kiln_core::device::PendingRead;
use kiln_core::ops::{self, MatvecKernel};
use kiln_core::Tensor;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The weight products' kernel for a batch's B token rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchProducts {
    /// The matrix-vector kernel at every B, its norm, SwiGLU, residual folded in (4 product
    /// dispatches a layer, 6 with RoPE and attention): a workgroup takes 4 rows of x, so W is read
    /// B/4 times a step, from L2 when a matrix fits there (SmolLM2's largest, the 16 MB
    /// vocabulary head, fits the H100's 50 MB). Predicted to win where dispatch boundaries
    /// dominate (SmolLM2; `kiln bench --filter llm_batch` measures both).
    Matvec,
    /// `quant_matmul_fused`'s own choice: past 8 rows the tiled kernel (W read once; on
    /// cooperative matrices from 16 rows where the adapter has them) with the norm, SwiGLU and
    /// residual folded where that kernel folds them.
    Tiled,
    /// Per matrix: [`Tiled`](Self::Tiled) where the product runs on cooperative matrices and
    /// the matrix is at least [`AUTO_TILED_MIN_BYTES`] (too large to be read B/4 times from
    /// L2), [`Matvec`](Self::Matvec) otherwise. Measured on the H200 (2026-11-28, B = 16,
    /// total tokens/s Matvec / Tiled): SmolLM2 4,646 / 3,900 (its matrices are 0.3-1.1 MB),
    /// Llama-3.2-1B shapes Q4_0 1,318 / 2,333, Q8_0 1,262 / 2,133 (8-38 MB matrices).
    #[default]
    Auto,
}

/// The smallest matrix (bytes of blocks) [`BatchProducts::Auto`] takes the tiled product for.
pub const AUTO_TILED_MIN_BYTES: usize = 2 << 20;

impl BatchProducts {
    /// kiln-core's kernel for `rows` rows of x by a matrix of `bytes` bytes whose product runs
    /// on cooperative matrices (`coop`) if the tiled kernel takes it.
    pub(crate) fn kernel(self, rows: usize, bytes: usize, coop: bool) -> MatvecKernel {
        let tiled = match self {
            BatchProducts::Matvec => false,
            BatchProducts::Tiled => true,
            BatchProducts::Auto => coop && bytes >= AUTO_TILED_MIN_BYTES,
        };
        // Up to 8 rows Auto is the matvec kernel already (the wide one for a single row).
        if rows > 8 && !tiled {
            MatvecKernel::Strided
        } else {
            MatvecKernel::Auto
        }
    }
}

/// One sequence's result.
#[derive(Debug)]
pub struct BatchOutput {
    /// Tokens generated (the stop token included when generation ended on one), as
    /// [`Generation::tokens`].
    pub tokens: Vec<u32>,
    /// The text the single-sequence stream would have produced, joined.
    pub text: String,
    /// What ended the sequence early, as its single-sequence stream would have (an empty
    /// prompt, the model's context); `tokens` and `text` hold what came before.
    pub error: Option<ModelError>,
    /// The logits each token was picked from (only with [`BatchGeneration::keep_logits`]).
    pub logits: Vec<Vec<f32>>,
}

/// Time spent and tokens made by a batch.
#[derive(Debug, Clone, Default)]
pub struct BatchStats {
    pub sequences: usize,
    pub prompt_tokens: usize,
    /// Every prompt's prefill and first token.
    pub prefill: Duration,
    /// Tokens of every sequence (the first ones from prefill included).
    pub generated_tokens: usize,
    /// Tokens from decode steps (each step makes one per live row).
    pub decode_tokens: usize,
    /// Decode steps (batched: one makes a token for every live row; on the CPU backend, which
    /// loops the sequences, one a token) and their time.
    pub steps: usize,
    pub decode: Duration,
}

impl BatchStats {
    /// Decoded tokens per second over all sequences; 0 when no step ran.
    pub fn decode_tokens_per_s(&self) -> f64 {
        if self.decode.is_zero() {
            return 0.0;
        }
        self.decode_tokens as f64 / self.decode.as_secs_f64()
    }
}

/// A sequence of the batch.
struct Seq {
    prompt: Vec<u32>,
    opts: GenerateOptions,
    sampler: Sampler,
    /// Prompt then generated tokens (the sampler's repetition window).
    history: Vec<u32>,
    text: TextStream,
    out: BatchOutput,
    done: bool,
}

impl Seq {
    fn generated(&self) -> usize {
        self.out.tokens.len()
    }

    /// Takes token `t` as the single-sequence stream does: a stop token or max_tokens ends it.
    fn push(&mut self, model: &CausalLM, t: u32) {
        self.history.push(t);
        self.out.tokens.push(t);
        let tok = model.tokenizer();
        let piece = if is_stop_token(tok, &self.opts, t) { None } else { Some(t) };
        self.out.text += &self.text.push(tok, piece);
        if !self.text.done && self.generated() >= self.opts.max_tokens {
            self.out.text += &self.text.push(tok, None);
        }
        self.done = self.text.done;
    }

    fn fail(&mut self, e: ModelError) {
        self.out.error = Some(e);
        self.done = true;
    }
}

/// Generation for several prompts at once; see [`CausalLM::generate_batch`].
pub struct BatchGeneration<'a> {
    model: &'a CausalLM,
    seqs: Vec<Seq>,
    keep_logits: bool,
    products: BatchProducts,
    stats: BatchStats,
}

impl CausalLM {
    /// Generation for each of `prompts` (tokenized as is) together: `opts` holds one
    /// [`GenerateOptions`] for all or one per prompt. Run it with [`BatchGeneration::run`].
    pub fn generate_batch(&self, prompts: &[&str], opts: &[GenerateOptions]) -> Result<BatchGeneration<'_>> {
        let ids = prompts.iter().map(|p| self.tokenizer().encode(p)).collect::<Result<Vec<_>>>()?;
        self.generate_batch_from_ids(ids, opts)
    }

    pub fn generate_batch_from_ids(
        &self,
        prompts: Vec<Vec<u32>>,
        opts: &[GenerateOptions],
    ) -> Result<BatchGeneration<'_>> {
        if opts.len() != 1 && opts.len() != prompts.len() {
            return Err(ModelError::Unsupported(format!(
                "{} generate options for {} prompts (one for all, or one each)",
                opts.len(),
                prompts.len()
            )));
        }
        let seqs = prompts
            .into_iter()
            .enumerate()
            .map(|(i, prompt)| {
                let o = opts[if opts.len() == 1 { 0 } else { i }].clone();
                Seq {
                    sampler: Sampler::new(o.sampling.clone()),
                    history: prompt.clone(),
                    text: TextStream::new(&o.stop),
                    out: BatchOutput { tokens: Vec::new(), text: String::new(), error: None, logits: Vec::new() },
                    done: false,
                    prompt,
                    opts: o,
                }
            })
            .collect::<Vec<_>>();
        let stats = BatchStats {
            sequences: seqs.len(),
            prompt_tokens: seqs.iter().map(|s| s.prompt.len()).sum(),
            ..Default::default()
        };
        Ok(BatchGeneration { model: self, seqs, keep_logits: false, products: BatchProducts::default(), stats })
    }
}

impl BatchGeneration<'_> {
    /// Also return the logits each token was picked from (tests: a [vocab] readback a token).
    #[doc(hidden)]
    pub fn keep_logits(mut self) -> Self {
        self.keep_logits = true;
        self
    }

    /// The weight products' kernel (default [`BatchProducts::Auto`]).
    pub fn with_products(mut self, products: BatchProducts) -> Self {
        self.products = products;
        self
    }

    pub fn stats(&self) -> &BatchStats {
        &self.stats
    }

    /// Runs every sequence to its end; the outputs in prompt order. An error of one sequence is
    /// its output's; an error of the batch's shared work ends the call.
    pub fn run(mut self) -> Result<(Vec<BatchOutput>, BatchStats)> {
        if self.model.backend() == Backend::Cpu {
            self.run_each()?;
        } else {
            self.run_batched()?;
        }
        self.stats.generated_tokens = self.seqs.iter().map(Seq::generated).sum();
        Ok((self.seqs.into_iter().map(|s| s.out).collect(), self.stats))
    }

    /// The CPU backend: the sequences one after another through [`Generation`] (the host path
    /// has no weight read to share).
    fn run_each(&mut self) -> Result<()> {
        for s in &mut self.seqs {
            let mut g: Generation<'_> = self.model.generate_from_ids(s.prompt.clone(), s.opts.clone());
            for piece in g.by_ref() {
                match piece {
                    Ok(p) => s.out.text += &p,
                    Err(e) => s.out.error = Some(e),
                }
            }
            s.out.tokens = g.tokens().to_vec();
            // Each sequence's own split: its prefill, then one row a decode step.
            let st = g.stats();
            let decoded = st.generated_tokens.saturating_sub(1);
            self.stats.prefill += st.prefill;
            self.stats.decode += st.decode;
            self.stats.decode_tokens += decoded;
            self.stats.steps += decoded;
            if self.keep_logits {
                let mut ids = s.prompt.clone();
                for &t in &s.out.tokens {
                    s.out.logits.push(self.model.logits(&ids)?);
                    ids.push(t);
                }
            }
        }
        Ok(())
    }

    /// The GPU backend: prefill each, stack the caches, step the live rows together.
    fn run_batched(&mut self) -> Result<()> {
        let model = self.model;
        let context = model.config.context;
        let t0 = Instant::now();
        // One capacity for every slab: the longest prompt plus max_tokens, within the context.
        let cap = self
            .seqs
            .iter()
            .map(|s| s.prompt.len().saturating_add(s.opts.max_tokens))
            .max()
            .unwrap_or(0)
            .clamp(1, context);
        let mut rows: Vec<usize> = Vec::new();
        let mut caches: Vec<KvCache> = Vec::new();
        for (i, s) in self.seqs.iter_mut().enumerate() {
            if s.opts.max_tokens == 0 {
                s.done = true;
                continue;
            }
            if s.prompt.is_empty() {
                s.fail(ModelError::Tokenizer("empty prompt".into()));
                continue;
            }
            // Zeroed: the batch's attention reads (masked) rows past each sequence's length.
            let mut cache = model.cache_on(cap, true)?;
            match model.prompt_logits(&s.prompt, &mut cache) {
                Ok(logits) => {
                    let t = pick(s, &logits, self.keep_logits)?;
                    s.push(model, t);
                    if !s.done {
                        rows.push(i);
                        caches.push(cache);
                    }
                }
                Err(e) => s.fail(e),
            }
        }
        self.stats.prefill = t0.elapsed();
        if rows.is_empty() {
            return Ok(());
        }
        let t0 = Instant::now();
        let kv = model.stack_caches(&caches)?;
        drop(caches);
        self.decode_steps(&rows, &kv, cap)?;
        self.stats.decode = t0.elapsed();
        Ok(())
    }

    /// The decode steps of the batch's `rows` (indices of `seqs`) over the stacked caches `kv`
    /// of `cap` positions. Row r's step t runs at position `base[r] + t` (its cache's length:
    /// every step adds a token to every live row; a finished row's later positions are
    /// clamped into its slab and its outputs dropped), so positions and masks never wait for
    /// the GPU. When every row is greedy the picks stay on the GPU as the next step's input
    /// and up to [`LOOKAHEAD`] steps are recorded ahead of the ids read back (the
    /// single-sequence loop's scheme: steps recorded past every row's end are dropped unread);
    /// sampling rows (and `keep_logits`) read each step's logits before the next is recorded.
    fn decode_steps(&mut self, rows: &[usize], kv: &[(Tensor, Tensor)], cap: usize) -> Result<()> {
        let model = self.model;
        let (context, vocab) = (model.config.context, model.config.vocab);
        let base: Vec<usize> = rows.iter().map(|&i| self.seqs[i].prompt.len()).collect();
        let greedy = !self.keep_logits && rows.iter().all(|&i| self.seqs[i].sampler.is_plain_greedy());
        let depth = if greedy { LOOKAHEAD } else { 1 };
        // Every token after a row's first comes from a step.
        let max_steps = rows.iter().map(|&i| self.seqs[i].opts.max_tokens.saturating_sub(1)).max().unwrap_or(0);
        let (mut recorded, mut taken) = (0usize, 0usize);
        let mut last: Option<Tensor> = None;
        let mut reads: VecDeque<(PendingRead, Option<Tensor>)> = VecDeque::new();
        while rows.iter().any(|&i| !self.seqs[i].done) {
            while recorded < max_steps && recorded - taken < depth {
                let at: Vec<usize> = base.iter().map(|&p| (p + recorded).min(cap - 1)).collect();
                let ids = match last.take() {
                    Some(picked) if greedy => picked,
                    _ => {
                        let host: Vec<u32> =
                            rows.iter().map(|&i| *self.seqs[i].history.last().expect("a token")).collect();
                        Tensor::from_slice_on(model.device(), &host, &[host.len()])?
                    }
                };
                let logits = model.batch_step(&ids, &at, kv, self.products)?;
                let picked = ops::argmax(&logits, Some(1), false)?;
                reads.push_back((picked.start_read()?, (!greedy).then_some(logits)));
                last = Some(picked);
                recorded += 1;
                if greedy {
                    model.device().flush()?;
                }
            }
            let Some((read, logits)) = reads.pop_front() else { break };
            let host_logits = logits.map(|l| l.to_vec::<f32>()).transpose()?;
            let picked = read.wait_vec::<i32>()?;
            taken += 1;
            let at = taken - 1;
            for (r, &i) in rows.iter().enumerate() {
                let s = &mut self.seqs[i];
                if s.done {
                    continue;
                }
                // The step's position for this row: past the context, the single-sequence
                // path's error (the step's token is dropped).
                if base[r] + at + 1 > context {
                    let n = base[r] + at + 1;
                    s.fail(ModelError::Unsupported(format!("{n} tokens exceed the model's context of {context}")));
                    continue;
                }
                let row = host_logits.as_ref().map(|l| &l[r * vocab..(r + 1) * vocab]);
                let t = match row {
                    Some(l) if !s.sampler.is_plain_greedy() => s.sampler.sample(l, &s.history),
                    _ => picked[r] as u32,
                };
                if self.keep_logits {
                    s.out.logits.push(row.expect("read").to_vec());
                }
                s.push(model, t);
                self.stats.decode_tokens += 1;
            }
            self.stats.steps += 1;
        }
        Ok(())
    }
}

/// The first token of `s` from its prompt's logits [1, vocab]: greedy on the GPU (argmax, the
/// single-sequence rule), sampling on the host.
fn pick(s: &mut Seq, logits: &Tensor, keep: bool) -> Result<u32> {
    let host = if keep || !s.sampler.is_plain_greedy() { Some(logits.to_vec::<f32>()?) } else { None };
    let t = match &host {
        Some(l) if !s.sampler.is_plain_greedy() => s.sampler.sample(l, &s.history),
        _ => ops::argmax(logits, None, false)?.to_vec::<i32>()?[0] as u32,
    };
    if keep {
        s.out.logits.push(host.expect("read"));
    }
    Ok(t)
}
