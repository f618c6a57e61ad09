//! GPU-side timing with timestamp queries: while a timer runs, every compute pass the batch
//! opens writes a timestamp at its beginning and its end (`Device::start_gpu_timer`,
//! `Device::stop_gpu_timer`). Only where the adapter has `TIMESTAMP_QUERY`; the benchmark falls
//! back to the wall clock elsewhere.

/// What one timed stretch of GPU work took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuTime {
    /// From the beginning of the first timed pass to the end of the last one: GPU time including
    /// any idle gaps between submits (what a CUDA event pair around the same work measures).
    pub span_s: f64,
    /// The sum of the passes' own durations: time the GPU spent inside Kiln's passes.
    pub busy_s: f64,
    /// How many compute passes were timed.
    pub passes: u32,
}

/// The open timer: a query set, two queries per timed pass.
pub(crate) struct Timer {
    pub(crate) set: wgpu::QuerySet,
    pub(crate) used: u32,
    /// More passes were opened than the set has room for; the figure would be incomplete.
    pub(crate) overflowed: bool,
}

impl Timer {
    pub(crate) const CAPACITY: u32 = wgpu::QUERY_SET_MAX_QUERIES;

    pub(crate) fn new(device: &wgpu::Device) -> Timer {
        let set = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("kiln timer"),
            ty: wgpu::QueryType::Timestamp,
            count: Self::CAPACITY,
        });
        Timer { set, used: 0, overflowed: false }
    }

    /// The timestamp writes for the next pass, or None when the set is full.
    pub(crate) fn next_pass(&mut self) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        if self.used + 2 > Self::CAPACITY {
            self.overflowed = true;
            return None;
        }
        let i = self.used;
        self.used += 2;
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &self.set,
            beginning_of_pass_write_index: Some(i),
            end_of_pass_write_index: Some(i + 1),
        })
    }
}

/// Span and busy time from (begin, end) tick pairs; `period_ns` nanoseconds per tick.
/// None when there is no pair. Ticks are unsigned and a driver may report an end before its
/// begin for an empty pass, so each duration saturates at zero.
pub(crate) fn summarize(ticks: &[u64], period_ns: f64) -> Option<GpuTime> {
    let pairs: Vec<(u64, u64)> = ticks.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let first = pairs.iter().map(|p| p.0).min()?;
    let last = pairs.iter().map(|p| p.1.max(p.0)).max()?;
    let busy: u64 = pairs.iter().map(|&(b, e)| e.saturating_sub(b)).sum();
    Some(GpuTime {
        span_s: (last - first) as f64 * period_ns * 1e-9,
        busy_s: busy as f64 * period_ns * 1e-9,
        passes: pairs.len() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarize_spans_and_sums() {
        // Two passes, 10..30 and 50..60 ticks of 2 ns.
        let t = summarize(&[10, 30, 50, 60], 2.0).unwrap();
        assert_eq!(t.passes, 2);
        assert!((t.span_s - 100e-9).abs() < 1e-15);
        assert!((t.busy_s - 60e-9).abs() < 1e-15);
        assert_eq!(summarize(&[], 1.0), None);
        // An end reported before its begin counts as an empty pass.
        let t = summarize(&[40, 30], 1.0).unwrap();
        assert_eq!((t.span_s, t.busy_s), (0.0, 0.0));
    }
}
