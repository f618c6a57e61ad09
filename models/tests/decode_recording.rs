//! Host cost of recording one SmolLM2 decode token (issue 29: ≤ 0.3 ms a token on the H100).
//! Ignored by default (it loads the model and decodes on lavapipe, which takes a while):
//!
//! `cargo test --release -p kiln-models --test decode_recording -- --ignored --nocapture`
//!
//! Prints the host µs to record a token (from the call to its last mark, before the readback)
//! and per dispatch, median over the tokens; `KILN_RECORDING_TOKENS` sets how many (default 8),
//! enough to profile the recording with `perf record` on the test thread.

use kiln_models::CausalLM;
use std::path::PathBuf;
use std::time::Instant;

fn model_path() -> PathBuf {
    std::env::var_os("KILN_SMOLLM2_GGUF").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    })
}

/// CPU time of the calling thread: what recording costs the host, whatever else the machine runs
/// (the wall clock of a thread that shares 2 cores with a loaded machine mostly measures waits).
fn thread_cpu() -> std::time::Duration {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, t: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec (two longs on 64-bit Linux) into `t`.
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    std::time::Duration::new(t.sec as u64, t.nsec as u32)
}

#[test]
#[ignore]
fn decode_token_recording_cost() {
    let model = CausalLM::load_on(model_path(), kiln_models::Backend::Gpu, |_, _| {}).expect("model");
    let dev = kiln_core::device().unwrap();
    let tokens: usize = std::env::var("KILN_RECORDING_TOKENS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let mut cache = model.cache_with_capacity(tokens + 16).unwrap();
    let mut t = model.forward_greedy(&[1, 2, 3, 4], &mut cache).unwrap();
    let (mut per_token, mut per_dispatch, mut dispatches) = (Vec::new(), Vec::new(), 0);
    let mut cpu_per_dispatch = Vec::new();
    let mut binds = dev.bind_group_stats();
    for i in 0..tokens {
        dev.synchronize().unwrap();
        let before = dev.dispatches_recorded();
        let cpu0 = thread_cpu();
        let start = Instant::now();
        let mut last = start;
        let mut last_cpu = cpu0;
        let logits = model
            .forward_marked(&[t], &mut cache, &mut |_| {
                last = Instant::now();
                last_cpu = thread_cpu();
                Ok(())
            })
            .unwrap();
        let recorded = (last - start).as_secs_f64();
        let cpu = (last_cpu - cpu0).as_secs_f64();
        dispatches = dev.dispatches_recorded() - before;
        t = kiln_models::sampling::argmax(&logits) as u32;
        if i == 0 {
            binds = dev.bind_group_stats();
        }
        if i > 0 {
            // The first token after the prompt meets new shapes (pipelines, pool classes).
            per_token.push(recorded * 1e6);
            per_dispatch.push(recorded * 1e6 / dispatches as f64);
            cpu_per_dispatch.push(cpu * 1e6 / dispatches as f64);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "decode token recording: {:.1} µs/token, {:.2} µs/dispatch wall, {:.2} µs/dispatch thread CPU, {dispatches} dispatches/token (median of {})",
        median(per_token.clone()),
        median(per_dispatch),
        median(cpu_per_dispatch),
        per_token.len()
    );
    let now = dev.bind_group_stats();
    let (hits, misses) = (now.hits - binds.hits, now.misses - binds.misses);
    println!(
        "bind groups after the first token: {hits} hits, {misses} misses ({:.1}% hits), {} cached",
        100.0 * hits as f64 / (hits + misses).max(1) as f64,
        now.entries
    );
}

/// Host cost of a prompt's pass (the first token's recording): the first call (pipelines
/// compiled for the prompt's shapes) against a second one, thread CPU and dispatches.
/// `KILN_PREFILL_TOKENS` sets the prompt's length (default 16: lavapipe runs the pass itself
/// slowly; the recording's dispatches do not depend on the length).
#[test]
#[ignore]
fn prefill_recording_cost() {
    let model = CausalLM::load_on(model_path(), kiln_models::Backend::Gpu, |_, _| {}).expect("model");
    let dev = kiln_core::device().unwrap();
    let n: usize = std::env::var("KILN_PREFILL_TOKENS").ok().and_then(|s| s.parse().ok()).unwrap_or(16);
    let ids: Vec<u32> = (0..n as u32).map(|i| 1 + i * 7 % 1000).collect();
    for call in ["first", "second", "third"] {
        dev.synchronize().unwrap();
        let (before, pipes) = (dev.dispatches_recorded(), dev.pipeline_stats());
        let mut cache = model.cache_with_capacity(n + 1).unwrap();
        let (cpu0, start) = (thread_cpu(), Instant::now());
        let mut last_cpu = cpu0;
        model
            .forward_marked(&ids, &mut cache, &mut |_| {
                last_cpu = thread_cpu();
                Ok(())
            })
            .unwrap();
        let wall = start.elapsed().as_secs_f64();
        let cpu = (last_cpu - cpu0).as_secs_f64();
        let now = dev.pipeline_stats();
        println!(
            "prefill {n} tokens, {call} call: {:.2} ms host recording (thread CPU to the last mark), {:.1} ms wall, \
             {} dispatches, {} pipelines compiled ({:.1} ms)",
            cpu * 1e3,
            wall * 1e3,
            dev.dispatches_recorded() - before,
            now.misses - pipes.misses,
            (now.compile_seconds - pipes.compile_seconds) * 1e3
        );
    }
}

/// The recorded decode plan (`KvCache::set_decode_plan`) against the ops layer, in one binary:
/// thread CPU to record a token (`CausalLM::record_token`, before its readback), median over the
/// tokens after the first decode token of each (which captures the plan), the two alternating
/// in rounds of `KILN_RECORDING_TOKENS` tokens (default 8) on caches of their own.
/// `KILN_RECORDING_ROUNDS` sets the rounds (default 3).
#[test]
#[ignore]
fn planned_decode_token_recording_cost() {
    let model = CausalLM::load_on(model_path(), kiln_models::Backend::Gpu, |_, _| {}).expect("model");
    let dev = kiln_core::device().unwrap();
    let tokens: usize = std::env::var("KILN_RECORDING_TOKENS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let rounds: usize = std::env::var("KILN_RECORDING_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for round in 0..rounds {
        for planned in [false, true] {
            let mut cache = model.cache_with_capacity(tokens + 16).unwrap();
            cache.set_decode_plan(planned);
            let mut t = model.forward_greedy(&[1, 2, 3, 4], &mut cache).unwrap();
            let (mut cpu_us, mut dispatches) = (Vec::new(), 0);
            for i in 0..tokens {
                dev.synchronize().unwrap();
                let before = dev.dispatches_recorded();
                let cpu0 = thread_cpu();
                let logits = model.record_token(t, &mut cache).unwrap();
                let cpu = (thread_cpu() - cpu0).as_secs_f64();
                dispatches = dev.dispatches_recorded() - before;
                t = kiln_models::sampling::argmax(&logits.to_vec::<f32>().unwrap()) as u32;
                if i > 0 {
                    cpu_us.push(cpu * 1e6);
                }
            }
            let m = median(&mut cpu_us);
            println!(
                "round {round}, plan {}: {m:.1} µs/token thread CPU ({:.2} µs/dispatch), {dispatches} dispatches/token, \
                 plans captured/replayed {:?} (median of {})",
                if planned { "on " } else { "off" },
                m / dispatches as f64,
                cache.decode_plan_counts(),
                cpu_us.len()
            );
        }
    }
}
