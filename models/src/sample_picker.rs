//! Seeded sampling inside the GPU-resident decode loop: a [`TokenPicker`] running
//! [`kiln_core::ops::sample_token`], which picks exactly the token the host's [`Sampler`] would
//! (its definition, bit for bit), so a pipelined sampled generation streams the same tokens as
//! the serial host-sampled one for a seed. The repetition penalty's recent tokens live on the
//! GPU in a ring of `repeat_last_n` ids (the prompt's last ones, then each picked token written
//! by the same dispatch), and each step's random number is drawn on the host ahead of time:
//! the seed's stream does not depend on the logits (one draw per token).

use crate::decode_loop::TokenPicker;
use crate::error::Result;
use crate::sampling::Sampler;
use kiln_core::{ops, Tensor};

pub struct SamplePicker {
    sampler: Sampler,
    /// The last tokens before the first pick (the prompt's), until the ring is made.
    start: Vec<u32>,
    /// Tokens so far (prompt included): the next token's ring slot is `len % capacity`.
    len: usize,
    /// `repeat_last_n` ids on the GPU (u32::MAX: empty); made at the first pick, on the
    /// logits' device. One empty slot when no penalty applies.
    ring: Option<Tensor>,
    capacity: usize,
}

impl SamplePicker {
    /// A picker for a sequence starting with `prompt` and at most `max_len` tokens long (prompt
    /// included). The ring holds min(`repeat_last_n`, `max_len`) ids: a window longer than the
    /// sequence is the whole sequence, and the ring must not be sized by the caller's number
    /// alone (`repeat_last_n` = usize::MAX was a capacity-overflow panic).
    pub fn new(sampler: Sampler, prompt: &[u32], max_len: usize) -> SamplePicker {
        let o = sampler.options();
        let rp = o.repetition_penalty;
        let window = o.repeat_last_n.min(max_len);
        let capacity = if rp.is_finite() && rp > 0.0 && rp != 1.0 { window } else { 0 };
        let start = prompt[prompt.len().saturating_sub(capacity)..].to_vec();
        SamplePicker { sampler, start, len: prompt.len(), ring: None, capacity }
    }
}

impl TokenPicker for SamplePicker {
    fn pick(&mut self, logits: &Tensor) -> Result<Tensor> {
        if self.ring.is_none() {
            let mut slots = vec![u32::MAX; self.capacity.max(1)];
            // Token i of the sequence sits at slot i % capacity.
            let first = self.len - self.start.len();
            for (j, &t) in self.start.iter().enumerate() {
                slots[(first + j) % self.capacity] = t;
            }
            self.ring = Some(Tensor::from_slice_on(logits.device(), &slots, &[slots.len()])?);
        }
        let ring = self.ring.as_ref().expect("made above");
        let slot = (self.capacity > 0).then(|| self.len % self.capacity);
        let p = self.sampler.next_params();
        let id = ops::sample_token(logits, ring, &p, slot)?;
        self.len += 1;
        Ok(id)
    }
}
