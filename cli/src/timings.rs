//! `--timings` of `kiln embed` and `kiln generate`: the phases of this process's start to its
//! first result (kiln_core::startup), printed to stderr at the end.

/// Turns the recording on (first thing in the command) where `on`.
pub fn start(on: bool) {
    if on {
        kiln_core::startup::enable();
    }
}

/// Where recording is on: the work a process does after its result, timed (the pipeline cache
/// written now rather than at exit, `model` dropped), then the report to stderr.
pub fn finish<M>(model: M) {
    if !kiln_core::startup::enabled() {
        return;
    }
    kiln_core::startup::time("pipeline-cache save (else done at exit)", || {
        for d in kiln_core::device::live_devices() {
            d.save_pipeline_cache();
        }
    });
    kiln_core::startup::time("model dropped (GPU buffers freed)", || drop(model));
    eprint!("{}", kiln_core::startup::report());
}
