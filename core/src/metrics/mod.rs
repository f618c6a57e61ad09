//! Metrics in Prometheus' text format, for a scraper (`kiln serve`'s metrics port) or any
//! binding that wants to print them. Built at gather time from counters the runtime keeps as it
//! works: sessions' atomics, per-op atomics held by each pipeline (`stats::counters`), the pipeline
//! caches' and the devices' memory counters. The dispatch path pays a few relaxed atomic adds.
//!
//! `gather` returns metric families, so that a service can merge its own (HTTP requests,
//! latencies) with the runtime's and encode them once. docs/DESIGN.md, "Metrics and
//! profiling", lists every name.

#[cfg(not(target_arch = "wasm32"))]
mod export;

pub use crate::stats::counters::{errors_by_code, set_dispatch_counters};
#[cfg(not(target_arch = "wasm32"))]
pub use export::{encode, gather, prometheus_text};
