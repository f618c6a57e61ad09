//! `--timings` of `kiln embed` and `kiln generate`: the phases of this process's start to its
//! first result (kiln_core::startup), printed to stderr at the end.

/// Turns the recording on (first thing in the command) where `on`.
pub fn start(on: bool) {
    if on {
        kiln_core::startup::enable();
    }
}

/// The end of the command, after its result: `model` is not dropped (the process exits next and
/// the OS takes its memory back at once, where dropping frees its GPU buffers one by one: 4-23 ms
/// on lavapipe for MiniLM's ~100); where recording is on, the pipeline cache is written now,
/// timed, rather than at exit, and the report goes to stderr.
pub fn finish<M>(model: M) {
    std::mem::forget(model);
    if !kiln_core::startup::enabled() {
        return;
    }
    kiln_core::startup::time("pipeline-cache save (else done at exit)", || {
        for d in kiln_core::device::live_devices() {
            d.save_pipeline_cache();
        }
    });
    eprint!("{}", kiln_core::startup::report());
}
