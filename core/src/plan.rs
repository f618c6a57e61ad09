//! Recorded plans (issue 29): a decode token runs the same kernels on the same buffers with the
//! same parameter blocks every time, only its position (the RoPE row, the keys attended to)
//! moving on. Through the ops layer each token pays again for what does not change: shape and
//! dtype checks, pipeline keys, bind-group cache probes, allocation (~2.7 µs a dispatch on
//! lavapipe's host, BENCHMARKS.md "Host recording per dispatch"). A [`Plan`] is one pass of a
//! function through the ops layer, captured: each dispatch's pipeline, bind group, parameter
//! block and workgroup counts, and every buffer the pass allocated (kept by the plan, so no one
//! else is handed them while it lives). [`Plan::replay`] records the same dispatches again, under
//! one lock, with the parameter blocks of the dispatches that follow the position patched.
//!
//! Which dispatches follow the position: an op whose parameters depend on it says how
//! (`follow`: the block and workgroups `delta` positions on, or None where its geometry changes
//! there, e.g. split-KV attention's number of splits, and the plan must be captured again); an
//! op that cannot say refuses the capture (`refuse`), and so does anything a replay would not
//! repeat: an upload, a copy, a session's charges, a profile. Every other dispatch is taken to
//! depend only on its buffers and shapes, which the plan fixes.
//!
//! Capture is per thread: only the capturing thread's dispatches on the capturing device go into
//! the plan (another thread may record on the same device meanwhile).

use crate::device::capture::{self, Step};
use crate::device::{Device, GpuBuffer};
use crate::tensor::Tensor;
use crate::Result;
use std::sync::Arc;

/// Why a replay or capture cannot go through the plan now: a session charges and limits every
/// dispatch, a profile times each one, and a plan does neither.
fn not_plannable() -> Option<&'static str> {
    if crate::session::current_inner().is_some() {
        return Some("a session is current");
    }
    if crate::stats::recording::active() {
        return Some("a profile is recording");
    }
    None
}

/// Clears the thread's capture however the captured function ends (a panic included).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        capture::end();
    }
}

/// A function's dispatches captured for replay (see the module doc).
pub struct Plan {
    device: Arc<Device>,
    steps: Vec<Step>,
    /// The buffers the captured pass allocated: its intermediates and output.
    _keep: Vec<Arc<GpuBuffer>>,
    /// What the plan reads its input from (a replay copies the caller's input here first).
    input: Tensor,
    output: Tensor,
    /// `ops::with_decode_fusion`'s state at capture: the kernels chosen depend on it.
    fused: bool,
}

impl Plan {
    /// Runs `f` on a copy of `input` through the ops layer, capturing what it records. Returns
    /// `f`'s output and the plan, or why the pass cannot be replayed (its output is good
    /// either way). An error of `f` is returned as is.
    pub fn capture<E: From<crate::Error>>(
        input: &Tensor,
        f: impl FnOnce(&Tensor) -> std::result::Result<Tensor, E>,
    ) -> std::result::Result<(Tensor, std::result::Result<Plan, String>), E> {
        let device = input.device().clone();
        let nested = capture::active();
        if let Some(why) = not_plannable().or(nested.then_some("a capture is running on this thread")) {
            return Ok((f(input)?, Err(why.to_string())));
        }
        let plan_input = Tensor::empty_on(&device, input.shape(), input.dtype())?;
        device.copy(input.raw(), 0, plan_input.raw(), 0, input.storage_nbytes() as u64)?;
        let fused = crate::ops::attention::decode_fusion();
        capture::begin(&device);
        let guard = Guard;
        let out = f(&plan_input);
        let capture = capture::end().expect("begun above");
        drop(guard);
        let output = out?;
        if let Some(why) = capture.refused {
            return Ok((output, Err(why)));
        }
        if capture.follow.is_some() {
            return Ok((output, Err("a position rule with no dispatch after it".into())));
        }
        let plan = Plan {
            device,
            steps: capture.steps,
            _keep: capture.keep,
            input: plan_input,
            output: output.clone(),
            fused,
        };
        Ok((output, Ok(plan)))
    }

    /// Records the captured dispatches again for `input` (copied into the plan's input first),
    /// `delta` positions after the captured pass, and returns the output: the plan's own
    /// tensor, rewritten by the next replay (read it, or record what reads it, before then).
    /// None, with nothing recorded, where the plan does not hold there: an input of another
    /// shape or dtype, a dispatch whose geometry changes at `delta`, decode fusion switched,
    /// a session or a profile (see the module doc). Capture again then.
    pub fn replay(&self, input: &Tensor, delta: usize) -> Result<Option<Tensor>> {
        if input.shape() != self.input.shape()
            || input.dtype() != self.input.dtype()
            || !Arc::ptr_eq(input.device(), &self.device)
            || crate::ops::attention::decode_fusion() != self.fused
            || not_plannable().is_some()
        {
            return Ok(None);
        }
        // Every follower first, so that a geometry change records nothing.
        let mut words: Vec<u32> = Vec::new();
        let mut groups: Vec<[u32; 3]> = Vec::new();
        for s in &self.steps {
            if let Some(f) = &s.follow {
                let at = words.len();
                words.extend_from_slice(&s.params);
                match f(delta, &mut words[at..]) {
                    Some(g) => groups.push(g),
                    None => return Ok(None),
                }
            }
        }
        let d = &self.device;
        d.copy(input.raw(), 0, self.input.raw(), 0, input.storage_nbytes() as u64)?;
        d.replay(&self.steps, &words, &groups)?;
        Ok(Some(self.output.clone()))
    }

    /// The parameter blocks (u32 words) and workgroups a replay `delta` positions on would
    /// record, or None where it would not hold: tests hold them to a capture made there.
    #[doc(hidden)]
    pub fn blocks_at(&self, delta: usize) -> Option<Vec<(Vec<u32>, [u32; 3])>> {
        self.steps
            .iter()
            .map(|s| {
                let mut w = s.params.clone();
                match &s.follow {
                    Some(f) => f(delta, &mut w).map(|g| (w, g)),
                    None => Some((w, s.groups)),
                }
            })
            .collect()
    }

    /// Whether two plans run the same pipelines in the same order.
    #[doc(hidden)]
    pub fn same_kernels(&self, other: &Plan) -> bool {
        self.steps.len() == other.steps.len()
            && self.steps.iter().zip(&other.steps).all(|(a, b)| a.pipeline == b.pipeline)
    }

    /// Dispatches a replay records.
    pub fn dispatches(&self) -> usize {
        self.steps.len()
    }

    /// Dispatches whose parameters follow the position.
    pub fn following(&self) -> usize {
        self.steps.iter().filter(|s| s.follow.is_some()).count()
    }
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plan({} dispatches, {} following the position)", self.dispatches(), self.following())
    }
}
