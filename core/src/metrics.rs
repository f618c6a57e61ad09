//! Metrics in Prometheus' text format, for a scraper (`kiln serve`'s metrics port) or any
//! binding that wants to print them. Built at gather time from the counters the runtime keeps
//! anyway (sessions' atomics), so the dispatch path pays nothing for them.
//!
//! `gather` returns metric families, so that a service can merge its own (HTTP requests,
//! latencies) with the runtime's and encode them once.

use crate::session::live_sessions;
use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts};

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    // The names and labels are constants of this module: a failure is a bug here, not input.
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric definition")
}

/// Every metric family the runtime exports, one sample per open session.
pub fn gather() -> Vec<MetricFamily> {
    let per_session = [
        ("kiln_session_bytes_in_use", "Bytes the session's live tensors hold."),
        ("kiln_session_peak_bytes", "Most bytes the session held at once."),
        ("kiln_session_operations_total", "Operations the session's dispatches counted."),
        ("kiln_session_dispatches_total", "Dispatches run under the session."),
        ("kiln_session_quota_exceeded_total", "Allocations refused with QUOTA_EXCEEDED."),
        ("kiln_session_compute_limit_total", "Dispatches refused or kernels stopped with COMPUTE_LIMIT."),
    ];
    let vecs: Vec<IntGaugeVec> = per_session.iter().map(|(n, h)| gauge_vec(n, h, &["session"])).collect();
    let open = prometheus::IntGauge::new("kiln_sessions_open", "Sessions open now.").expect("valid metric definition");
    let mut n_open = 0;
    for s in live_sessions() {
        let st = s.stats();
        if st.closed {
            continue;
        }
        n_open += 1;
        let id = st.id.to_string();
        let values =
            [st.bytes_in_use, st.peak_bytes, st.ops_total, st.dispatches, st.quota_exceeded, st.compute_limit_hits];
        for (v, x) in vecs.iter().zip(values) {
            v.with_label_values(&[id.as_str()]).set(x.min(i64::MAX as u64) as i64);
        }
    }
    open.set(n_open);
    let mut families: Vec<MetricFamily> = open.collect();
    for v in &vecs {
        families.extend(v.collect());
    }
    families
}

/// `gather` encoded in Prometheus' text exposition format (version 0.0.4).
pub fn prometheus_text() -> String {
    encode(&gather())
}

/// Encodes metric families (the runtime's, a service's, or both) as Prometheus text.
pub fn encode(families: &[MetricFamily]) -> String {
    use prometheus::Encoder;
    let mut out = Vec::new();
    // Encoding into a Vec fails only on a malformed family, which `gather` never builds.
    let _ = prometheus::TextEncoder::new().encode(families, &mut out);
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
