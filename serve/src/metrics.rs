//! The service's own metrics (requests by route, status and tenant; latency; in flight), merged
//! at scrape time with the runtime's (`kiln_core::metrics::gather`) and encoded once.

use prometheus::core::Collector;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts};

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

    /// Prometheus text: the runtime's families, then the service's.
    pub fn render(&self) -> String {
        let mut families = kiln_core::metrics::gather();
        families.extend(self.requests.collect());
        families.extend(self.latency.collect());
        families.extend(self.in_flight.collect());
        kiln_core::metrics::encode(&families)
    }
}
