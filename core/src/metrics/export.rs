//! The counters as Prometheus metric families (plain model of the prometheus crate, built by
//! hand: the values live in Kiln's own atomics, not in prometheus collectors).

use crate::session::live_sessions;
use crate::stats::counters::{all_ops, errors_by_code, BYTES_BOUNDS_LOG2, DISPATCH_BYTES, GPU_SECONDS_BOUNDS};
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType};

struct Family(MetricFamily);

impl Family {
    fn new(name: &str, help: &str, kind: MetricType) -> Family {
        let mut f = MetricFamily::default();
        f.set_name(name.into());
        f.set_help(help.into());
        f.set_field_type(kind);
        Family(f)
    }

    fn push(&mut self, labels: &[(&str, &str)], fill: impl FnOnce(&mut Metric)) {
        let mut m = Metric::from_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut l = LabelPair::default();
                    l.set_name(k.to_string());
                    l.set_value(v.to_string());
                    l
                })
                .collect(),
        );
        fill(&mut m);
        self.0.mut_metric().push(m);
    }

    fn value(&mut self, labels: &[(&str, &str)], v: f64) {
        let kind = self.0.get_field_type();
        self.push(labels, |m| match kind {
            MetricType::COUNTER => {
                let mut c = Counter::default();
                c.set_value(v);
                m.set_counter(c);
            }
            _ => {
                let mut g = Gauge::default();
                g.set_value(v);
                m.set_gauge(g);
            }
        });
    }

    /// `counts` per bucket (not cumulative; the last is +Inf), `sum` in the exported unit.
    fn histogram(&mut self, labels: &[(&str, &str)], bounds: &[f64], counts: &[u64], count: u64, sum: f64) {
        self.push(labels, |m| {
            let mut h = Histogram::default();
            let mut cumulative = 0;
            let buckets = bounds
                .iter()
                .zip(counts)
                .map(|(&upper, &n)| {
                    cumulative += n;
                    let mut b = Bucket::default();
                    b.set_upper_bound(upper);
                    b.set_cumulative_count(cumulative);
                    b
                })
                .collect();
            h.set_bucket(buckets);
            h.set_sample_count(count);
            h.set_sample_sum(sum);
            m.set_histogram(h);
        });
    }
}

/// Every metric family the runtime exports (docs/DESIGN.md, "Metrics and profiling").
pub fn gather() -> Vec<MetricFamily> {
    use MetricType::{COUNTER, GAUGE, HISTOGRAM};
    let mut out = Vec::new();

    // Sessions: one sample per open one.
    let mut open = Family::new("kiln_sessions_open", "Sessions open now.", GAUGE);
    let session_families: [(&str, &str, MetricType); 10] = [
        ("kiln_session_bytes_in_use", "Bytes the session's live tensors hold.", GAUGE),
        ("kiln_session_peak_bytes", "Most bytes the session held at once.", GAUGE),
        ("kiln_session_operations_total", "Operations the session's dispatches counted.", COUNTER),
        ("kiln_session_dispatches_total", "Dispatches run under the session.", COUNTER),
        (
            "kiln_session_bound_bytes_total",
            "Bytes of storage buffers bound to the session's dispatches (size classes).",
            COUNTER,
        ),
        (
            "kiln_session_gpu_seconds_total",
            "GPU time charged to the session (timestamps; wall clock of waits without them).",
            COUNTER,
        ),
        ("kiln_session_quota_exceeded_total", "Allocations refused with QUOTA_EXCEEDED.", COUNTER),
        ("kiln_session_compute_limit_total", "Dispatches refused or kernels stopped with COMPUTE_LIMIT.", COUNTER),
        ("kiln_session_gpu_time_limit_total", "Dispatches refused because the GPU-time budget was spent.", COUNTER),
        ("kiln_session_kernels_compiled_total", "User kernels the session compiled.", COUNTER),
    ];
    let mut per_session: Vec<Family> = session_families.iter().map(|(n, h, k)| Family::new(n, h, *k)).collect();
    let mut n_open = 0;
    for s in live_sessions() {
        let st = s.stats();
        if st.closed {
            continue;
        }
        n_open += 1;
        let id = st.id.to_string();
        let values = [
            st.bytes_in_use as f64,
            st.peak_bytes as f64,
            st.ops_total as f64,
            st.dispatches as f64,
            st.bound_bytes as f64,
            st.gpu_time_ns as f64 * 1e-9,
            st.quota_exceeded as f64,
            st.compute_limit_hits as f64,
            st.gpu_time_limit_hits as f64,
            st.kernels_compiled as f64,
        ];
        for (f, v) in per_session.iter_mut().zip(values) {
            f.value(&[("session", &id)], v);
        }
    }
    open.value(&[], n_open as f64);
    out.push(open.0);
    out.extend(per_session.into_iter().map(|f| f.0));

    // Ops: one sample per op that has compiled a pipeline.
    let mut dispatches = Family::new("kiln_op_dispatches_total", "Dispatches recorded, per op.", COUNTER);
    let mut operations =
        Family::new("kiln_op_operations_total", "Operations (workgroups x invocations) dispatched, per op.", COUNTER);
    let mut bound = Family::new(
        "kiln_op_bound_bytes_total",
        "Bytes of storage buffers bound to the op's dispatches (size classes: an upper bound of what they touch).",
        COUNTER,
    );
    let mut gpu = Family::new(
        "kiln_op_gpu_seconds",
        "GPU time of the op's timed passes (while profiling or under a GPU-time budget), one pass per dispatch.",
        HISTOGRAM,
    );
    for op in all_ops() {
        let l = [("op", &*op.name)];
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed) as f64;
        dispatches.value(&l, get(&op.dispatches));
        operations.value(&l, get(&op.operations));
        bound.value(&l, get(&op.bound_bytes));
        let (counts, count, sum_ns) = op.gpu.snapshot();
        gpu.histogram(&l, &GPU_SECONDS_BOUNDS, &counts, count, sum_ns as f64 * 1e-9);
    }
    out.extend([dispatches.0, operations.0, bound.0, gpu.0]);

    let mut bytes = Family::new(
        "kiln_dispatch_bound_bytes",
        "Bytes of storage buffers bound per dispatch (size classes).",
        HISTOGRAM,
    );
    let (counts, count, sum) = DISPATCH_BYTES.snapshot();
    let bounds: Vec<f64> = BYTES_BOUNDS_LOG2.iter().map(|&b| (1u64 << b) as f64).collect();
    bytes.histogram(&[], &bounds, &counts, count, sum as f64);
    out.push(bytes.0);

    let mut errors = Family::new(
        "kiln_errors_total",
        "Errors returned by dispatches, allocations, reads, waits and kernel compiles, per stable code.",
        COUNTER,
    );
    for (code, n) in errors_by_code() {
        errors.value(&[("code", code.name())], n as f64);
    }
    out.push(errors.0);

    out.extend(device_families());
    // The text encoder refuses a family without samples (no session open, no op run yet).
    out.retain(|f| !f.get_metric().is_empty());
    out
}

/// Pipeline caches and memory of every open device (none is created here).
fn device_families() -> Vec<MetricFamily> {
    use MetricType::{COUNTER, GAUGE};
    let mut fams = [
        Family::new("kiln_pipeline_cache_hits_total", "Pipeline cache lookups that found a pipeline.", COUNTER),
        Family::new("kiln_pipeline_cache_misses_total", "Pipeline cache lookups that compiled one.", COUNTER),
        Family::new("kiln_pipeline_cache_entries", "Pipelines cached now (built-in and user).", GAUGE),
        Family::new("kiln_pipeline_compile_seconds_total", "Host time spent compiling pipelines.", COUNTER),
        Family::new(
            "kiln_device_allocated_bytes",
            "Bytes of every GPU buffer Kiln holds (tensors, pool, staging).",
            GAUGE,
        ),
        Family::new("kiln_device_in_use_bytes", "Bytes held by live tensors.", GAUGE),
        Family::new("kiln_device_peak_in_use_bytes", "Highest in-use bytes seen.", GAUGE),
        Family::new("kiln_device_pooled_bytes", "Bytes kept in the buffer pool for reuse.", GAUGE),
        Family::new("kiln_device_live_buffers", "Buffers held by live tensors.", GAUGE),
        Family::new(
            "kiln_device_timestamp_queries",
            "1 where GPU time is measured with timestamps, 0 where wall clock.",
            GAUGE,
        ),
    ];
    for d in crate::device::live_devices().iter() {
        // The adapter's index (`kiln devices`, `kiln.devices()`), not the order devices opened in.
        let index = d.info().index.to_string();
        let name = d.info().name.clone();
        let l = [("device", index.as_str()), ("adapter", name.as_str())];
        let p = d.pipeline_stats();
        let m = d.memory_stats();
        let values = [
            p.hits as f64,
            p.misses as f64,
            p.pipelines as f64,
            p.compile_seconds,
            m.allocated_bytes as f64,
            m.in_use_bytes as f64,
            m.peak_bytes as f64,
            m.pooled_bytes as f64,
            m.live_buffers as f64,
            d.has_timestamps() as u8 as f64,
        ];
        for (f, v) in fams.iter_mut().zip(values) {
            f.value(&l, v);
        }
    }
    fams.into_iter().map(|f| f.0).collect()
}

/// `gather` encoded in Prometheus' text exposition format (version 0.0.4).
pub fn prometheus_text() -> String {
    encode(&gather())
}

/// Encodes metric families (the runtime's, a service's, or both) as Prometheus text. A family
/// the encoder refuses (one without samples, say) is left out, not the ones after it.
pub fn encode(families: &[MetricFamily]) -> String {
    use prometheus::Encoder;
    let encoder = prometheus::TextEncoder::new();
    let mut out = Vec::new();
    for f in families {
        let mut one = Vec::new();
        if encoder.encode(std::slice::from_ref(f), &mut one).is_ok() {
            out.extend(one);
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn open_sessions_are_counted() {
        let s = crate::Session::new(Default::default());
        let text = super::prometheus_text();
        assert!(text.contains(&format!("kiln_session_bytes_in_use{{session=\"{}\"}} 0", s.id())), "{text}");
        assert!(text.contains("# TYPE kiln_sessions_open gauge"), "{text}");
        s.close();
        assert!(!super::prometheus_text().contains(&format!("session=\"{}\"", s.id())));
    }
}
