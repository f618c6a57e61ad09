//! Metrics, profiles and GPU-time budgets (docs/DESIGN.md, "Metrics and profiling"): counters
//! move by exactly what ran, the Prometheus text parses, profile rows match the dispatches, and a
//! session's GPU-time budget refuses once spent.

mod common;
use common::*;
use kiln_core::ops::{self, BinaryOp};
use kiln_core::reference::elementwise::binary_value;
use kiln_core::{metrics, profile, DType, ErrorCode, Kernel, Session, SessionLimits, Tensor};
use std::collections::HashMap;
use std::sync::Mutex;

/// The counters are process-wide: tests that compare them before and after run alone.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes a tensor of `elems` elements of `dtype` binds: its buffer's size class (powers of two
/// from 16 bytes up to 64 MiB; bool is one u32 word per element on the GPU).
fn bound_bytes(elems: usize, dtype: DType) -> u64 {
    let word = if dtype == DType::Bool { 4 } else { dtype.size() };
    ((elems * word) as u64).max(16).next_power_of_two()
}

/// One parsed sample: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// A strict reader of the text exposition format: every sample belongs to a family declared by
/// `# HELP` and `# TYPE` lines before it; panics on anything else.
fn parse(text: &str) -> (HashMap<String, (String, String)>, Vec<Sample>) {
    let mut families: HashMap<String, (String, String)> = HashMap::new();
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has a text");
            assert!(!help.trim().is_empty(), "{line}");
            families.entry(name.into()).or_default().0 = help.into();
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            families.entry(name.into()).or_default().1 = kind.into();
            continue;
        }
        let (head, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match head.split_once('{') {
            None => (head.to_string(), Vec::new()),
            Some((name, rest)) => {
                let inner = rest.strip_suffix('}').unwrap_or_else(|| panic!("unclosed labels: {line}"));
                let labels = inner
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once("=\"").unwrap_or_else(|| panic!("bad label: {line}"));
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|s| name.strip_suffix(s))
            .find(|f| families.get(*f).is_some_and(|(_, k)| k == "histogram"))
            .unwrap_or(&name)
            .to_string();
        let (help, kind) = families.get(&family).unwrap_or_else(|| panic!("sample before its family: {line}"));
        assert!(!help.is_empty() && !kind.is_empty(), "{line}");
        samples.push((name, labels, value));
    }
    (families, samples)
}

/// The value of `name` with label `key` = `value` (0 when absent).
fn sample(samples: &[Sample], name: &str, key: &str, value: &str) -> f64 {
    samples.iter().find(|(n, l, _)| n == name && l.iter().any(|(k, v)| k == key && v == value)).map_or(0.0, |s| s.2)
}

fn op_counter(name: &str, op: &str) -> f64 {
    sample(&parse(&metrics::prometheus_text()).1, name, "op", op)
}

fn error_count(code: &str) -> f64 {
    sample(&parse(&metrics::prometheus_text()).1, "kiln_errors_total", "code", code)
}

fn checked_add(rng: &mut Rng, n: usize) -> Tensor {
    let (a, av) = rand_tensor(rng, &[n], DType::F32, -100.0, 100.0);
    let (b, bv) = rand_tensor(rng, &[n], DType::F32, -100.0, 100.0);
    let y = ops::binary(BinaryOp::Add, &a, &b).unwrap();
    let want: Vec<f64> = av.iter().zip(&bv).map(|(&x, &y)| binary_value(BinaryOp::Add, x, y, DType::F32)).collect();
    assert_close(&format!("add n={n}"), &y.to_f64_vec().unwrap(), &want, 0.0, 0.0);
    y
}

const FILL: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(8, 4)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x + g.y * 64u;
    if (i < arrayLength(&out)) { out[i] = x[i % arrayLength(&x)] + 1.0; }
}
"#;

#[test]
fn counters_move_by_exactly_the_dispatches_and_bytes_run() {
    let _g = serial();
    let mut rng = Rng::new(11);
    let s = Session::new(SessionLimits::default());
    let before_add = op_counter("kiln_op_dispatches_total", "elementwise:add");
    let before_add_bytes = op_counter("kiln_op_bound_bytes_total", "elementwise:add");
    let sizes = [1usize, 7, 256, 257, 1000, 4099];
    s.run(|| {
        for &n in &sizes {
            checked_add(&mut rng, n);
        }
    });
    let want_bytes: u64 = sizes.iter().map(|&n| 3 * bound_bytes(n, DType::F32)).sum();
    let st = s.stats();
    assert_eq!(st.dispatches, sizes.len() as u64);
    assert_eq!(st.bound_bytes, want_bytes);
    assert_eq!(op_counter("kiln_op_dispatches_total", "elementwise:add") - before_add, sizes.len() as f64);
    assert_eq!(op_counter("kiln_op_bound_bytes_total", "elementwise:add") - before_add_bytes, want_bytes as f64);

    // A user kernel: operations are workgroups x invocations, known from the dispatch alone.
    let k = Kernel::new(FILL, "main").unwrap();
    let before_ops = op_counter("kiln_op_operations_total", "user_kernel");
    let before_dispatches = op_counter("kiln_op_dispatches_total", "user_kernel");
    let (x, xv) = rand_tensor(&mut rng, &[37], DType::F32, -5.0, 5.0);
    let out = Tensor::empty(&[300], DType::F32).unwrap();
    let groups = [8u32, 3, 1];
    s.run(|| k.dispatch(&[&x, &out], None, groups).unwrap());
    let got = out.to_f64_vec().unwrap();
    // Invocation (gx, gy) writes i = gx + 64 gy: 8 x 3 groups of 8 x 4 cover gx < 64, gy < 12,
    // so every one of the 300 elements.
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, (xv[i % 37] as f32 + 1.0) as f64, "out[{i}]");
    }
    let ops_run = groups.iter().product::<u32>() as f64 * 32.0;
    assert_eq!(op_counter("kiln_op_operations_total", "user_kernel") - before_ops, ops_run);
    assert_eq!(op_counter("kiln_op_dispatches_total", "user_kernel") - before_dispatches, 1.0);
    let st2 = s.stats();
    assert_eq!(st2.ops_total - st.ops_total, ops_run as u64);
    // A user kernel's bindings are its tensors' bytes (built-in ops bind whole buffers).
    assert_eq!(st2.bound_bytes - st.bound_bytes, 4 * (37 + 300));
    // The session's own samples say the same.
    let (_, samples) = parse(&metrics::prometheus_text());
    let id = s.id().to_string();
    assert_eq!(sample(&samples, "kiln_session_dispatches_total", "session", &id), st2.dispatches as f64);
    assert_eq!(sample(&samples, "kiln_session_bound_bytes_total", "session", &id), st2.bound_bytes as f64);
    s.close();
}

#[test]
fn prometheus_text_parses_with_stable_names_types_and_labels() {
    let _g = serial();
    let mut rng = Rng::new(12);
    let s = Session::new(SessionLimits::default());
    s.run(|| checked_add(&mut rng, 33));
    let text = metrics::prometheus_text();
    let (families, samples) = parse(&text);
    for (name, (_, kind)) in &families {
        assert!(name.starts_with("kiln_"), "{name}");
        if kind == "counter" {
            assert!(name.ends_with("_total"), "counter {name} must end in _total");
        }
        if name.contains("seconds") {
            assert!(name.ends_with("_seconds") || name.ends_with("_seconds_total"), "{name}");
        }
    }
    let want = [
        ("kiln_sessions_open", "gauge", &[][..]),
        ("kiln_session_dispatches_total", "counter", &["session"][..]),
        ("kiln_session_gpu_seconds_total", "counter", &["session"][..]),
        ("kiln_op_dispatches_total", "counter", &["op"][..]),
        ("kiln_op_operations_total", "counter", &["op"][..]),
        ("kiln_op_bound_bytes_total", "counter", &["op"][..]),
        ("kiln_op_gpu_seconds", "histogram", &["op"][..]),
        ("kiln_dispatch_bound_bytes", "histogram", &[][..]),
        ("kiln_errors_total", "counter", &["code"][..]),
        ("kiln_pipeline_cache_hits_total", "counter", &["device", "adapter"][..]),
        ("kiln_pipeline_cache_misses_total", "counter", &["device", "adapter"][..]),
        ("kiln_device_allocated_bytes", "gauge", &["device", "adapter"][..]),
        ("kiln_device_pooled_bytes", "gauge", &["device", "adapter"][..]),
        ("kiln_device_peak_in_use_bytes", "gauge", &["device", "adapter"][..]),
    ];
    for (name, kind, labels) in want {
        assert_eq!(families.get(name).map(|f| f.1.as_str()), Some(kind), "{name} in\n{text}");
        let series = if kind == "histogram" { format!("{name}_count") } else { name.to_string() };
        let found: Vec<&Sample> = samples.iter().filter(|(n, _, _)| *n == series).collect();
        assert!(!found.is_empty(), "no sample of {series}");
        for (_, l, _) in found {
            let keys: Vec<&str> = l.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, labels, "labels of {series}");
        }
    }
    // Histogram buckets are cumulative and end at +Inf with the count.
    let buckets: Vec<&Sample> = samples.iter().filter(|(n, _, _)| n == "kiln_dispatch_bound_bytes_bucket").collect();
    assert_eq!(buckets.last().unwrap().1, vec![("le".to_string(), "+Inf".to_string())]);
    assert!(buckets.windows(2).all(|w| w[0].2 <= w[1].2));
    let count = samples.iter().find(|(n, _, _)| n == "kiln_dispatch_bound_bytes_count").unwrap().2;
    assert_eq!(buckets.last().unwrap().2, count);
    // This process compiled at least the add above on device 0.
    assert!(sample(&samples, "kiln_pipeline_cache_misses_total", "device", "0") >= 1.0);
    assert!(sample(&samples, "kiln_device_allocated_bytes", "device", "0") > 0.0);
    assert!(samples.iter().any(|(n, l, v)| n == "kiln_sessions_open" && l.is_empty() && *v >= 1.0));
    s.close();
}

fn has_timestamps() -> bool {
    kiln_core::device().unwrap().info().timestamp_query && std::env::var_os("KILN_NO_TIMESTAMPS").is_none()
}

#[test]
fn profile_rows_cover_the_ops_run_with_their_counts() {
    let _g = serial();
    let mut rng = Rng::new(13);
    let (a, av) = rand_tensor(&mut rng, &[64, 48], DType::F32, -1.0, 1.0);
    let (b, _) = rand_tensor(&mut rng, &[48, 40], DType::F32, -1.0, 1.0);
    let (c, cv) = rand_tensor(&mut rng, &[64, 48], DType::F32, -1.0, 1.0);
    let _ = ops::binary(BinaryOp::Add, &a, &c).unwrap().to_vec::<f32>().unwrap(); // compile first
    let before_matmul = op_counter("kiln_op_dispatches_total", "matmul");
    let (out, p) = profile::profile(|| {
        let mut y = ops::binary(BinaryOp::Add, &a, &c).unwrap();
        for _ in 0..2 {
            y = ops::binary(BinaryOp::Add, &y, &c).unwrap();
        }
        let z = ops::binary(BinaryOp::Mul, &y, &c).unwrap();
        let m = ops::matmul(&z, &b).unwrap();
        (y.to_f64_vec().unwrap(), m)
    })
    .unwrap();
    let want: Vec<f64> =
        av.iter().zip(&cv).map(|(&x, &c)| ((x as f32 + c as f32) + c as f32 + c as f32) as f64).collect();
    assert_close("profiled adds", &out.0, &want, 0.0, 0.0);
    let matmul_dispatches = op_counter("kiln_op_dispatches_total", "matmul") - before_matmul;
    assert!(matmul_dispatches >= 1.0);
    let row = |op: &str| p.rows.iter().find(|r| r.op == op).unwrap_or_else(|| panic!("no {op} row in\n{p}"));
    assert_eq!(row("elementwise:add").calls, 3);
    assert_eq!(row("elementwise:mul").calls, 1);
    assert_eq!(row("matmul").calls as f64, matmul_dispatches);
    assert_eq!(p.rows.iter().map(|r| r.calls).sum::<u64>(), 4 + matmul_dispatches as u64, "{p}");
    let want_clock = if has_timestamps() { profile::Clock::GpuTimestamps } else { profile::Clock::WallClock };
    assert_eq!(p.clock, want_clock);
    for r in &p.rows {
        assert_eq!(r.timed, r.calls, "{p}");
        assert!((r.mean_s * r.timed as f64 - r.total_s).abs() <= 1e-12 + r.total_s * 1e-9, "{p}");
    }
    assert!(p.total_s > 0.0, "{p}");
    assert!((p.rows.iter().map(|r| r.share).sum::<f64>() - 1.0).abs() < 1e-9, "{p}");
    let table = p.to_string();
    for op in ["elementwise:add", "elementwise:mul", "matmul", "calls", "share"] {
        assert!(table.contains(op), "{table}");
    }
    // Rows are aligned: every data line has the same width.
    let widths: Vec<usize> = table.lines().skip(1).map(|l| l.len()).collect();
    assert!(widths.windows(2).all(|w| w[0] == w[1]), "{table}");
    // One at a time, and nothing is profiled after stop.
    profile::start().unwrap();
    assert_eq!(profile::start().unwrap_err().code(), ErrorCode::InvalidArgument);
    let empty = profile::stop().unwrap();
    assert!(empty.rows.is_empty());
    assert_eq!(profile::stop().unwrap_err().code(), ErrorCode::InvalidArgument);
}

#[test]
fn a_gpu_time_budget_refuses_once_spent() {
    let _g = serial();
    let mut rng = Rng::new(14);
    let n = 1 << 18;
    let (a, _) = rand_tensor(&mut rng, &[n], DType::F32, -1.0, 1.0);
    let s = Session::new(SessionLimits { max_gpu_time_ms: 2, ..Default::default() });
    let before = error_count("COMPUTE_LIMIT");
    let mut refused = None;
    let mut ran = 0;
    s.run(|| {
        for _ in 0..5000 {
            match ops::binary(BinaryOp::Mul, &a, &a) {
                Ok(y) => {
                    y.to_vec::<f32>().unwrap();
                    ran += 1;
                }
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
    });
    let e = refused.expect("the budget never ran out");
    assert_eq!(e.code(), ErrorCode::ComputeLimit, "{e}");
    assert!(e.message().contains("GPU time"), "{e}");
    let st = s.stats();
    assert!(st.gpu_time_ns >= 2_000_000, "{st:?}");
    assert_eq!(st.gpu_time_limit_hits, 1);
    assert_eq!(st.dispatches, ran, "a refused dispatch counts nothing");
    assert_eq!(error_count("COMPUTE_LIMIT") - before, 1.0);
    // Refused every time from now on, and other sessions are not affected.
    assert_eq!(s.run(|| ops::binary(BinaryOp::Mul, &a, &a)).unwrap_err().code(), ErrorCode::ComputeLimit);
    let other = Session::new(SessionLimits::default());
    other.run(|| ops::binary(BinaryOp::Mul, &a, &a).unwrap().to_vec::<f32>().unwrap());
    assert_eq!(other.stats().gpu_time_ns, 0, "a session without a budget is not timed");
    s.close();
    other.close();
}

#[test]
fn empty_and_failing_dispatches_are_counted_right() {
    let _g = serial();
    let s = Session::new(SessionLimits { max_ops_per_dispatch: 256, ..Default::default() });
    let e0 = Tensor::empty(&[0], DType::F32).unwrap();
    let before = op_counter("kiln_op_dispatches_total", "elementwise:add");
    let before_bytes = op_counter("kiln_op_bound_bytes_total", "elementwise:add");
    let before_err = error_count("COMPUTE_LIMIT");
    s.run(|| {
        // Zero elements: no workgroup, nothing dispatched, nothing counted.
        assert_eq!(ops::binary(BinaryOp::Add, &e0, &e0).unwrap().shape(), &[0]);
        assert_eq!(s.stats().dispatches, 0);
        // Over the per-dispatch budget: refused, counted as an error, not as a dispatch.
        let big = Tensor::from_slice(&vec![1.0f32; 4096], &[4096]).unwrap();
        let e = ops::binary(BinaryOp::Add, &big, &big).unwrap_err();
        assert_eq!(e.code(), ErrorCode::ComputeLimit);
    });
    assert_eq!(op_counter("kiln_op_dispatches_total", "elementwise:add"), before);
    assert_eq!(op_counter("kiln_op_bound_bytes_total", "elementwise:add"), before_bytes);
    assert_eq!(error_count("COMPUTE_LIMIT") - before_err, 1.0);
    let st = s.stats();
    assert_eq!((st.dispatches, st.bound_bytes, st.compute_limit_hits), (0, 0, 1));
    s.close();
    // An allocation over a quota is counted under its code, once.
    let q = Session::new(SessionLimits { max_bytes: 64, ..Default::default() });
    let before_quota = error_count("QUOTA_EXCEEDED");
    let e = q.run(|| Tensor::from_slice(&[0.5f32; 1024], &[1024])).unwrap_err();
    assert_eq!(e.code(), ErrorCode::QuotaExceeded);
    assert_eq!(error_count("QUOTA_EXCEEDED") - before_quota, 1.0);
    q.close();
}

#[test]
fn counters_from_many_threads_add_up() {
    let _g = serial();
    const THREADS: usize = 4;
    const EACH: usize = 12;
    let before = op_counter("kiln_op_dispatches_total", "elementwise:sub");
    let before_bytes = op_counter("kiln_op_bound_bytes_total", "elementwise:sub");
    let sessions: Vec<Session> = (0..THREADS).map(|_| Session::new(SessionLimits::default())).collect();
    std::thread::scope(|scope| {
        for (t, s) in sessions.iter().enumerate() {
            scope.spawn(move || {
                let mut rng = Rng::new(100 + t as u64);
                s.run(|| {
                    for i in 0..EACH {
                        let n = 1 + rng.int(0, 700) as usize + i;
                        let (a, av) = rand_tensor(&mut rng, &[n], DType::F32, -9.0, 9.0);
                        let y = ops::binary(BinaryOp::Sub, &a, &a).unwrap();
                        let want: Vec<f64> =
                            av.iter().map(|&x| binary_value(BinaryOp::Sub, x, x, DType::F32)).collect();
                        assert_close("x - x", &y.to_f64_vec().unwrap(), &want, 0.0, 0.0);
                    }
                });
            });
        }
    });
    let want_bytes: u64 = sessions.iter().map(|s| s.stats().bound_bytes).sum();
    for s in &sessions {
        assert_eq!(s.stats().dispatches, EACH as u64);
        s.close();
    }
    assert_eq!(op_counter("kiln_op_dispatches_total", "elementwise:sub") - before, (THREADS * EACH) as f64);
    assert_eq!(op_counter("kiln_op_bound_bytes_total", "elementwise:sub") - before_bytes, want_bytes as f64);
}

/// The cost of the dispatch counters: many tiny dispatches with them on and off (run with
/// `cargo test --release -p kiln-core --test metrics -- --ignored --nocapture overhead`).
#[test]
#[ignore]
fn overhead_of_the_dispatch_counters() {
    let _g = serial();
    let k = Kernel::new(FILL, "main").unwrap();
    let x = Tensor::from_slice(&[1.0f32; 4], &[4]).unwrap();
    let out = Tensor::empty(&[4], DType::F32).unwrap();
    let s = Session::new(SessionLimits::default());
    // A budget no run reaches: every dispatch of this session is timed (a pass of its own).
    let timed = Session::new(SessionLimits { max_gpu_time_ms: 1 << 40, ..Default::default() });
    let n = 20_000;
    let run_in = |s: &Session, on: bool| {
        metrics::set_dispatch_counters(on);
        let t = std::time::Instant::now();
        s.run(|| {
            for _ in 0..n {
                k.dispatch(&[&x, &out], None, [1, 1, 1]).unwrap();
            }
        });
        let record = t.elapsed().as_secs_f64() / n as f64;
        kiln_core::synchronize().unwrap();
        record
    };
    let run = |on: bool| run_in(&s, on);
    run(true);
    let mut on = Vec::new();
    let mut off = Vec::new();
    for i in 0..9 {
        // Alternating which goes first, so that neither always follows the other's GPU work.
        if i % 2 == 0 {
            off.push(run(false));
            on.push(run(true));
        } else {
            on.push(run(true));
            off.push(run(false));
        }
    }
    let mut with_timing: Vec<f64> = (0..3).map(|_| run_in(&timed, true)).collect();
    with_timing.sort_by(f64::total_cmp);
    metrics::set_dispatch_counters(true);
    println!("timed dispatches (GPU budget): median of 3 {:.3} us per dispatch", with_timing[1] * 1e6);
    on.sort_by(f64::total_cmp);
    off.sort_by(f64::total_cmp);
    println!(
        "per dispatch (host recording, {n} dispatches, 9 runs): counters on min {:.3} / median {:.3} us, \
         off min {:.3} / median {:.3} us",
        on[0] * 1e6,
        on[4] * 1e6,
        off[0] * 1e6,
        off[4] * 1e6
    );
}
