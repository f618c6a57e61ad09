//! Readbacks collected later (`Tensor::start_read`): the same bytes as a blocking read, the
//! values as they were when the read was started (work recorded after it does not leak in),
//! readiness seen without blocking, and staging buffers not leaked by reads dropped uncollected.
use kiln_core::{ops, DType, Tensor};
use std::time::{Duration, Instant};

#[test]
fn a_started_read_gives_the_blocking_reads_bytes_for_every_dtype() {
    let f = [0.0f32, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.5e-40, -3.25];
    let x = Tensor::from_slice(&f, &[7]).unwrap();
    let y = ops::mul_scalar(&x, 2.0).unwrap(); // GPU work queued ahead of the copy
    let want = y.to_bytes().unwrap();
    let got = y.start_read().unwrap().wait_bytes().unwrap();
    assert_eq!(got, want);
    let i = Tensor::from_slice(&[i32::MIN, -1, 0, 7, i32::MAX], &[5]).unwrap();
    assert_eq!(i.start_read().unwrap().wait_vec::<i32>().unwrap(), vec![i32::MIN, -1, 0, 7, i32::MAX]);
    // An odd number of 2-byte elements: the copy is padded to 4 bytes, the result is not.
    let h = ops::cast(&Tensor::from_slice(&[1.0f32, -2.0, 0.5], &[3]).unwrap(), DType::F16).unwrap();
    let hb = h.start_read().unwrap().wait_bytes().unwrap();
    assert_eq!(hb.len(), 6);
    assert_eq!(hb, h.to_bytes().unwrap());
    let b = Tensor::from_bools(&[true, false, false, true, true], &[5]).unwrap();
    assert_eq!(b.start_read().unwrap().wait_bytes().unwrap(), vec![1, 0, 0, 1, 1]);
    // A read of a bool tensor is bytes, not words: wait_vec refuses, as does a wrong type.
    assert!(b.start_read().unwrap().wait_vec::<u32>().is_err());
    assert!(i.start_read().unwrap().wait_vec::<f32>().is_err());
    let empty = Tensor::from_slice::<f32>(&[], &[0, 3]).unwrap();
    let mut e = empty.start_read().unwrap();
    assert!(e.is_ready());
    assert_eq!(e.wait_bytes().unwrap(), Vec::<u8>::new());
}

#[test]
fn work_recorded_after_the_start_does_not_change_what_it_reads() {
    let x = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]).unwrap();
    let pending = x.start_read().unwrap();
    // Overwrite x in place after the copy was submitted, then read both.
    ops::assign(&x, &Tensor::from_slice(&[9i32, 9, 9, 9], &[4]).unwrap()).unwrap();
    x.device().flush().unwrap();
    let later = x.start_read().unwrap();
    assert_eq!(later.wait_vec::<i32>().unwrap(), vec![9, 9, 9, 9]);
    assert_eq!(pending.wait_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
}

#[test]
fn readiness_is_seen_without_a_blocking_call() {
    let x = Tensor::from_slice(&(0..1000).map(|v| v as f32).collect::<Vec<_>>(), &[1000]).unwrap();
    let y = ops::add_scalar(&ops::mul_scalar(&x, 3.0).unwrap(), 1.0).unwrap();
    let mut pending = y.start_read().unwrap();
    let start = Instant::now();
    let mut polls = 0u64;
    while !pending.is_ready() {
        polls += 1;
        assert!(start.elapsed() < Duration::from_secs(30), "not ready after {polls} polls");
        std::thread::sleep(Duration::from_micros(200));
    }
    // Collecting a ready read does not wait (well under the poller's first back-off step).
    let t = Instant::now();
    let v = pending.wait_vec::<f32>().unwrap();
    assert!(t.elapsed() < Duration::from_millis(200), "{:?}", t.elapsed());
    assert!(v.iter().enumerate().all(|(i, &v)| v == i as f32 * 3.0 + 1.0));
}

#[test]
fn reads_dropped_uncollected_free_their_staging_buffers() {
    let dev = kiln_core::device().unwrap();
    // 4 MiB a read: a leak of 20 of them stands far above what tests beside this one allocate.
    let n = 1 << 20;
    let x = Tensor::from_slice(&vec![0.5f32; n], &[n]).unwrap();
    // One collected read first, so that the staging buffer of this size class exists.
    x.start_read().unwrap().wait_bytes().unwrap();
    dev.synchronize().unwrap();
    let before = dev.memory_stats().allocated_bytes;
    for i in 0..40 {
        let mut p = x.start_read().unwrap();
        if i % 2 == 0 {
            while !p.is_ready() {
                std::thread::yield_now();
            }
        }
        drop(p); // half mapped (back to the pool), half perhaps still pending (destroyed)
    }
    dev.synchronize().unwrap();
    let after = dev.memory_stats().allocated_bytes;
    // At most one pooled staging buffer more than before, with room for neighbours' tensors.
    assert!(after <= before + (8 << 20), "allocated {before} -> {after}");
    assert_eq!(x.start_read().unwrap().wait_vec::<f32>().unwrap(), vec![0.5f32; n]);
}
