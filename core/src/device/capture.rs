//! A plan's capture (`plan.rs`): while a thread captures on a device, the dispatches it
//! records there, the buffers it allocates and what its ops say about the position go into the
//! capture. Here, below the ops and tensors that call it; the plan itself sits above them.

use super::{Device, GpuBuffer};
use crate::stats::counters::OpStats;
use std::cell::RefCell;
use std::sync::Arc;

/// How a captured dispatch follows the position: given `delta` (positions after the captured
/// one) and the captured block's u32 words, patches the words and returns the workgroups, or
/// None where the dispatch would change shape there (capture again).
pub(crate) type Follow = Box<dyn Fn(usize, &mut [u32]) -> Option<[u32; 3]> + Send + Sync>;

/// One captured dispatch.
pub(crate) struct Step {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) op: Arc<OpStats>,
    /// Bound with the parameter block at the device's shared parameter buffer, offset 0 and a
    /// dynamic offset: valid wherever in a batch's blocks the replay puts the block.
    pub(crate) bind_group: Option<wgpu::BindGroup>,
    /// The block's u32 words as captured (empty: no block).
    pub(crate) params: Vec<u32>,
    /// The block's padded length in bytes (what the dispatch binds).
    pub(crate) param_len: usize,
    pub(crate) groups: [u32; 3],
    pub(crate) follow: Option<Follow>,
    /// The metrics the ops path counted for it: operations and bound bytes.
    pub(crate) ops: u64,
    pub(crate) bound: u64,
}

pub(crate) struct Capture {
    device: *const Device,
    pub(crate) steps: Vec<Step>,
    pub(crate) keep: Vec<Arc<GpuBuffer>>,
    /// The next dispatch's `follow`, said by its op just before it.
    pub(crate) follow: Option<Follow>,
    pub(crate) refused: Option<String>,
}

thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

fn with_capture<R>(device: &Device, f: impl FnOnce(&mut Capture) -> R) -> Option<R> {
    CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(c) if std::ptr::eq(c.device, device) => Some(f(c)),
        _ => None,
    })
}

/// Whether this thread is capturing a plan on `device`.
pub(crate) fn capturing(device: &Device) -> bool {
    CAPTURE.with(|c| c.borrow().as_ref().is_some_and(|c| std::ptr::eq(c.device, device)))
}

/// Marks the capture on `device` (if any) as not replayable, for `why`.
pub(crate) fn refuse(device: &Device, why: &str) {
    with_capture(device, |c| {
        c.refused.get_or_insert_with(|| why.to_string());
    });
}

/// Says how the next dispatch on `device` follows the position (see [`Follow`]); build the
/// closure only where [`capturing`] says so.
pub(crate) fn follow(device: &Device, f: Follow) {
    with_capture(device, |c| {
        if c.follow.replace(f).is_some() {
            c.refused.get_or_insert_with(|| "two position rules for one dispatch".into());
        }
    });
}

/// Keeps a buffer allocated during a capture for the plan.
pub(crate) fn keep(device: &Device, buf: &Arc<GpuBuffer>) {
    with_capture(device, |c| c.keep.push(buf.clone()));
}

/// Adds a dispatch to the capture on `device` (the ops path's `dispatch_counted`), its `follow`
/// the one said before it.
pub(crate) fn record(device: &Device, mut step: Step) {
    with_capture(device, |c| {
        step.follow = c.follow.take();
        c.steps.push(step);
    });
}

/// Whether this thread is capturing (on any device).
pub(crate) fn active() -> bool {
    CAPTURE.with(|c| c.borrow().is_some())
}

/// Starts capturing this thread's work on `device`.
pub(crate) fn begin(device: &Device) {
    CAPTURE.with(|c| {
        *c.borrow_mut() = Some(Capture {
            device: device as *const Device,
            steps: Vec::new(),
            keep: Vec::new(),
            follow: None,
            refused: None,
        })
    });
}

/// Ends this thread's capture, returning it.
pub(crate) fn end() -> Option<Capture> {
    CAPTURE.with(|c| c.borrow_mut().take())
}

/// The u32 words of a parameter block's bytes.
pub(crate) fn words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect()
}
