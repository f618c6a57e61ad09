//! The GPU-resident decode loop (issue 29): the token picked from a position's logits stays on
//! the GPU as the next position's embedding input, so the host records token n+1 (and a few
//! more) while the GPU runs token n, submitting each without waiting. The ids are gathered on
//! the GPU into small windows and read back asynchronously ([`kiln_core::device::PendingRead`]);
//! the caller still gets one token at a time, as each arrives, and the tokens recorded past a
//! stop are dropped unread (their KV cache rows are never used).
//!
//! The page runs the same loop ([`DecodeLoop::next_async`]): its one step that waits, collecting
//! the oldest readback, is an `await` of the mapping's promise there, and everything else
//! ([`DecodeLoop::advance`]'s recording ahead, windows, stops) is shared with the native loop.
//!
//! Serially (the loop this replaces, kept as [`Generation`](crate::Generation)'s reference with
//! a lookahead of 0) the host's recording of a token (~1.2 ms on the H100) and the GPU's run of
//! it (~2 ms) added up; here they overlap, so a token costs the larger of the two.

use crate::error::{ModelError, Result};
use crate::llama::{CausalLM, KvCache};
use kiln_core::device::PendingRead;
use kiln_core::{ops, Tensor};
use std::collections::VecDeque;
use std::time::Duration;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;
// std's Instant panics in wasm32-unknown-unknown; web_time's reads performance.now().
#[cfg(target_arch = "wasm32")]
use web_time::Instant;

/// Tokens recorded ahead of the last id the host has read: enough to keep the GPU fed while the
/// host hands a window of ids to the caller, few enough that a stop wastes little GPU work.
pub const LOOKAHEAD: usize = 8;
/// Token ids per readback (one copy and one mapping each): the first id of a window reaches the
/// caller when the window's last token has run.
pub const READ_WINDOW: usize = 4;
/// One wait covers at most a window of tokens' GPU work; the window is shrunk so that this
/// covers at most 1/TIMEOUT_SHARE of KILN_TIMEOUT_MS at the measured speed (a big model on a
/// software adapter can take many seconds a token).
const TIMEOUT_SHARE: f64 = 4.0;

/// What turns a position's logits into the next token on the GPU: greedy's [`Argmax`], or
/// seeded sampling's [`crate::sample_picker::SamplePicker`].
pub trait TokenPicker: Send {
    /// `logits` [1, vocab] f32 to the token id, an i32 tensor of shape [1], on the GPU.
    fn pick(&mut self, logits: &Tensor) -> Result<Tensor>;
}

/// Greedy: the index of the largest logit, the lowest among equals, a NaN logit winning
/// (numpy's argmax) — [`CausalLM::forward_greedy`]'s rule, by the same op.
pub struct Argmax;

impl TokenPicker for Argmax {
    fn pick(&mut self, logits: &Tensor) -> Result<Tensor> {
        crate::llama::argmax_id(logits)
    }
}

/// Host time the loop spent, for [`crate::GenerationStats`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopTimes {
    /// Recording decode tokens' commands.
    pub recording: Duration,
    /// Submitting them (and starting the readbacks of their ids).
    pub submitting: Duration,
    /// Blocked until token ids arrived.
    pub waiting: Duration,
}

pub struct DecodeLoop {
    picker: Box<dyn TokenPicker>,
    depth: usize,
    /// The last recorded token, on the GPU: the next step's input.
    last: Option<Tensor>,
    /// Tokens recorded so far (the first, from the prompt's logits, included).
    recorded: usize,
    /// Tokens handed out.
    taken: usize,
    /// Recorded tokens not yet in a readback.
    open: Vec<Tensor>,
    reads: VecDeque<(PendingRead, usize)>,
    ready: VecDeque<u32>,
    /// What recording token `recorded` failed with: handed out after the tokens before it.
    error: Option<ModelError>,
    /// Measured seconds per decode token (None until a decode window has been read).
    per_token: Option<f64>,
    /// When the last decode read was collected.
    last_collect: Option<Instant>,
    pub times: LoopTimes,
}

impl DecodeLoop {
    pub fn new(picker: Box<dyn TokenPicker>, depth: usize) -> DecodeLoop {
        DecodeLoop {
            picker,
            depth: depth.max(1),
            last: None,
            recorded: 0,
            taken: 0,
            open: Vec::new(),
            reads: VecDeque::new(),
            ready: VecDeque::new(),
            error: None,
            per_token: None,
            last_collect: None,
            times: LoopTimes::default(),
        }
    }

    /// The next token of the sequence whose prompt is `prompt` (run at the first call), at most
    /// `max_tokens` of them recorded. Call it no more than `max_tokens` times.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn next(&mut self, model: &CausalLM, cache: &mut KvCache, prompt: &[u32], max_tokens: usize) -> Result<u32> {
        let mut recorded_now = false;
        loop {
            match self.advance(model, cache, prompt, max_tokens, &mut recorded_now)? {
                Advance::Token(t) => return Ok(t),
                Advance::Collect { wait } => {
                    let (r, n) = self.reads.pop_front().expect("advance names a read in flight");
                    let t = Instant::now();
                    let ids = r.wait_vec::<i32>();
                    if wait {
                        self.times.waiting += t.elapsed();
                    }
                    self.accept(ids?, n)?;
                }
            }
        }
    }

    /// [`next`](Self::next) with the readbacks awaited: the page's loop (a wait there is the
    /// mapping's promise, which resolves only once the page's thread is back in its event loop).
    /// The same steps as `next` ([`advance`](Self::advance)), so the same tokens.
    #[cfg(target_arch = "wasm32")]
    pub async fn next_async(
        &mut self,
        model: &CausalLM,
        cache: &mut KvCache,
        prompt: &[u32],
        max_tokens: usize,
    ) -> Result<u32> {
        let mut recorded_now = false;
        loop {
            match self.advance(model, cache, prompt, max_tokens, &mut recorded_now)? {
                Advance::Token(t) => return Ok(t),
                Advance::Collect { wait } => {
                    let (r, n) = self.reads.pop_front().expect("advance names a read in flight");
                    let t = Instant::now();
                    let ids = r.wait_vec_async::<i32>().await;
                    if wait {
                        self.times.waiting += t.elapsed();
                    }
                    self.accept(ids?, n)?;
                }
            }
        }
    }

    /// The loop's every step that needs no wait: hands out a token read back, records ahead,
    /// starts readbacks; else says which readback to collect (the oldest, `reads`' front) and
    /// whether it has arrived (`wait`: false) or must be waited for. `recorded_now`: whether
    /// this call of `next` recorded a token already (one per token handed out keeps the GPU fed
    /// at the rate tokens go out).
    fn advance(
        &mut self,
        model: &CausalLM,
        cache: &mut KvCache,
        prompt: &[u32],
        max_tokens: usize,
        recorded_now: &mut bool,
    ) -> Result<Advance> {
        loop {
            if !self.ready.is_empty() {
                // Keep the GPU fed at the rate tokens go out: one more recorded per token handed
                // out while the lookahead has room.
                if !*recorded_now && self.can_record(max_tokens) {
                    self.record(model, cache, prompt, max_tokens)?;
                }
                self.taken += 1;
                return Ok(Advance::Token(self.ready.pop_front().expect("not empty")));
            }
            if self.taken == self.recorded {
                if let Some(e) = self.error.take() {
                    return Err(e);
                }
            }
            if let Some((r, _)) = self.reads.front_mut() {
                if r.is_ready() {
                    return Ok(Advance::Collect { wait: false });
                }
            }
            if self.can_record(max_tokens) {
                self.record(model, cache, prompt, max_tokens)?;
                *recorded_now = true;
                continue;
            }
            if !self.open.is_empty() {
                self.close_window()?;
                continue;
            }
            if self.reads.is_empty() {
                return Err(ModelError::Unsupported(format!(
                    "the decode loop was asked for token {} of {max_tokens}",
                    self.taken + 1
                )));
            }
            return Ok(Advance::Collect { wait: true });
        }
    }

    fn can_record(&self, max_tokens: usize) -> bool {
        self.error.is_none() && self.recorded < max_tokens && self.recorded - self.taken - self.ready.len() < self.depth
    }

    /// Tokens per readback now: `READ_WINDOW`, fewer when that many tokens' work could come
    /// near the timeout; 1 until a decode token has been timed.
    fn window(&self, timeout: Duration) -> usize {
        match self.per_token {
            None => 1,
            Some(s) => {
                let fit = timeout.as_secs_f64() / TIMEOUT_SHARE / s.max(1e-9);
                (fit.floor() as usize).clamp(1, READ_WINDOW)
            }
        }
    }

    /// Records the next token (the prompt's pass for the first) and submits it; a failure of
    /// the model (context overflow...) is kept for its place in the stream.
    fn record(&mut self, model: &CausalLM, cache: &mut KvCache, prompt: &[u32], max_tokens: usize) -> Result<()> {
        let t = Instant::now();
        let first = self.last.is_none();
        let picked = match &self.last {
            None => model.prompt_logits(prompt, cache),
            Some(id) => model.token_logits(id, cache),
        }
        .and_then(|logits| self.picker.pick(&logits));
        let tok = match picked {
            Ok(tok) => tok,
            Err(e) => {
                self.error = Some(e);
                return self.close_window();
            }
        };
        self.last = Some(tok.clone());
        self.open.push(tok);
        self.recorded += 1;
        let recorded = Instant::now();
        // The first token alone (time to first token), a full window, or the last token.
        let device = model.device();
        if first || self.open.len() >= self.window(device.timeout()) || self.recorded == max_tokens {
            self.close_window()?;
        } else {
            device.flush()?;
        }
        if !first {
            self.times.recording += recorded - t;
            self.times.submitting += recorded.elapsed();
        }
        Ok(())
    }

    /// Gathers the open tokens' ids into one tensor and starts reading it back.
    fn close_window(&mut self) -> Result<()> {
        if self.open.is_empty() {
            return Ok(());
        }
        let ids = if self.open.len() == 1 {
            self.open[0].clone()
        } else {
            ops::concat(&self.open.iter().collect::<Vec<_>>(), 0)?
        };
        let n = self.open.len();
        self.reads.push_back((ids.start_read()?, n));
        self.open.clear();
        Ok(())
    }

    /// Takes a collected readback's `n` ids into `ready`.
    fn accept(&mut self, ids: Vec<i32>, n: usize) -> Result<()> {
        if ids.len() != n {
            return Err(ModelError::Unsupported(format!("{} token ids read back for {n}", ids.len())));
        }
        let now = Instant::now();
        // Time per decode token: between two collections, over the later one's tokens (the
        // prompt's token comes alone first and only starts the clock). Quick to rise, slow to
        // fall: too high only shrinks the window, too low could let a wait near the timeout.
        if let Some(prev) = self.last_collect {
            let s = (now - prev).as_secs_f64() / n as f64;
            self.per_token = Some(self.per_token.map_or(s, |p| s.max(p * 0.75)));
        }
        self.last_collect = Some(now);
        self.ready.extend(ids.into_iter().map(|i| i as u32));
        Ok(())
    }
}

/// What [`DecodeLoop::advance`] leaves its caller to do.
enum Advance {
    /// The next token.
    Token(u32),
    /// Collect the oldest readback: it has arrived (`wait` false) or must be waited for.
    Collect { wait: bool },
}

// Bindings keep a generation on another thread (Python: behind a Mutex), so the loop and what
// it holds (pending readbacks) must stay Send. (The page has one thread.)
#[cfg(not(target_arch = "wasm32"))]
const _: fn() = || {
    fn send<T: Send>() {}
    send::<crate::Generation<'static>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_window_shrinks_so_one_wait_stays_under_a_quarter_of_the_timeout() {
        let mut l = DecodeLoop::new(Box::new(Argmax), LOOKAHEAD);
        let minute = Duration::from_secs(60);
        // Untimed: one token per read until a decode token has been timed.
        assert_eq!(l.window(minute), 1);
        for (per_token, want) in [(0.002, READ_WINDOW), (3.0, 4), (5.0, 3), (7.6, 1), (20.0, 1), (1e-12, 4)] {
            l.per_token = Some(per_token);
            assert_eq!(l.window(minute), want, "{per_token} s a token");
        }
        l.per_token = Some(0.002);
        assert_eq!(l.window(Duration::from_millis(10)), 1, "a 10 ms timeout");
        assert_eq!(l.window(Duration::from_millis(20)), 2, "a 20 ms timeout");
    }
}
