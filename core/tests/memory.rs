//! Memory accounting. Its own test binary: the counters are process-wide, so tests running in
//! parallel in the same process would move them under this one's feet.
use kiln_core::{DType, Tensor};

#[test]
fn memory_is_accounted_and_pooled() {
    let dev = kiln_core::device().unwrap();
    let before = dev.memory_stats();
    let t = Tensor::empty(&[1 << 20], DType::F32).unwrap();
    let during = dev.memory_stats();
    assert!(during.in_use_bytes >= before.in_use_bytes + (4 << 20), "{before:?} -> {during:?}");
    assert_eq!(during.live_buffers, before.live_buffers + 1, "{before:?} -> {during:?}");
    assert!(during.peak_bytes >= during.in_use_bytes);
    drop(t);
    dev.synchronize().unwrap();
    let after = dev.memory_stats();
    assert!(after.pooled_bytes >= 4 << 20, "{after:?}");
    assert_eq!((after.in_use_bytes, after.live_buffers), (before.in_use_bytes, before.live_buffers), "{after:?}");

    // The peak outlives the tensor until reset_peak_memory starts it again from what is in use.
    assert!(after.peak_bytes >= during.in_use_bytes, "{after:?}");
    dev.reset_peak_memory();
    assert_eq!(dev.memory_stats().peak_bytes, after.in_use_bytes);
    let small = Tensor::empty(&[1024], DType::F32).unwrap();
    let now = dev.memory_stats();
    assert!(now.peak_bytes >= now.in_use_bytes && now.peak_bytes < during.in_use_bytes, "{now:?}");
    drop(small);
}
