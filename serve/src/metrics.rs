//! The service's own metrics (requests by route, status and tenant; latency; in flight), merged
//! at scrape time with the runtime's (`kiln_core::metrics::gather`) and encoded once.

use crate::placement::{Load, ServedDevice};
use prometheus::core::Collector;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts};

pub struct ServiceMetrics {
    requests: IntCounterVec,
    latency: HistogramVec,
    in_flight: IntGauge,
}

impl Default for ServiceMetrics {
    fn default() -> ServiceMetrics {
        // Names and labels are constants: a failure is a bug here, not input.
        let requests = IntCounterVec::new(
            Opts::new("kiln_serve_requests_total", "HTTP requests answered, by route, status and tenant."),
            &["route", "status", "tenant"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new("kiln_serve_request_seconds", "Time to answer a request, by route.").buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
            &["route"],
        )
        .expect("valid metric");
        let in_flight =
            IntGauge::new("kiln_serve_requests_in_flight", "Requests being answered now.").expect("valid metric");
        ServiceMetrics { requests, latency, in_flight }
    }
}

impl ServiceMetrics {
    pub fn started(&self) {
        self.in_flight.inc();
    }

    pub fn finished(&self, route: &str, status: u16, tenant: &str, seconds: f64) {
        self.in_flight.dec();
        self.requests.with_label_values(&[route, &status.to_string(), tenant]).inc();
        self.latency.with_label_values(&[route]).observe(seconds);
    }

    pub fn in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// Prometheus text: the runtime's families, then the service's, with each served device's
    /// sessions and their bytes (`loads`, read now) labelled by device and adapter, as the
    /// runtime's `kiln_device_*` families are.
    pub fn render(&self, loads: &[(ServedDevice, Load)]) -> String {
        let mut families = kiln_core::metrics::gather();
        families.extend(self.requests.collect());
        families.extend(self.latency.collect());
        families.extend(self.in_flight.collect());
        let labels = ["device", "adapter"];
        let gauge = |name: &str, help: &str| IntGaugeVec::new(Opts::new(name, help), &labels).expect("valid metric");
        let sessions = gauge("kiln_serve_device_sessions", "Sessions open on the device, all tenants.");
        let bytes =
            gauge("kiln_serve_device_session_bytes", "Bytes the device's sessions hold (their accounted bytes).");
        for (d, l) in loads {
            let v = [d.index.to_string(), d.name.clone()];
            let v = [v[0].as_str(), v[1].as_str()];
            sessions.with_label_values(&v).set(l.sessions as i64);
            bytes.with_label_values(&v).set(i64::try_from(l.bytes).unwrap_or(i64::MAX));
        }
        families.extend(sessions.collect());
        families.extend(bytes.collect());
        kiln_core::metrics::encode(&families)
    }
}
