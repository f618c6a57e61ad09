//! The buffer pool never hands one owner's freed bytes to another (issue 28: a session that
//! called `empty()` read all 4096 words another session had freed). Its own test binary: the
//! pool is process-wide, and each test needs to know which buffer it will get back.

use kiln_core::ops::{self, BinaryOp};
use kiln_core::{DType, Session, SessionLimits, Tensor};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Words nobody would write by chance: the secret of the first owner.
fn secret(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 0xA5A5_0000 ^ i.wrapping_mul(2_654_435_761)).collect()
}

/// How many of `got`'s words are the secret's words at the same place.
fn leaked(got: &[u32], secret: &[u32]) -> usize {
    got.iter().zip(secret).filter(|(a, b)| a == b).count()
}

/// Starts from an empty pool: only what the test frees can be reused.
fn empty_pool() -> std::sync::Arc<kiln_core::Device> {
    let dev = kiln_core::device().unwrap();
    dev.synchronize().unwrap();
    dev.empty_cache();
    dev
}

/// `writer` frees a tensor of secret words (idle, after a synchronize); `reader` then calls
/// `empty()` of the same size and reads it. Returns how many secret words it saw, after checking
/// that the reader really got the pooled buffer (no new memory allocated).
fn idle_case(writer: Option<&Session>, reader: Option<&Session>, n: usize) -> usize {
    let dev = empty_pool();
    let s = secret(n);
    let write = || drop(Tensor::from_slice(&s, &[n]).unwrap());
    match writer {
        Some(w) => w.run(write),
        None => write(),
    }
    dev.synchronize().unwrap();
    let allocated = dev.memory_stats().allocated_bytes;
    let read = || {
        let t = Tensor::empty(&[n], DType::U32).unwrap();
        assert_eq!(dev.memory_stats().allocated_bytes, allocated, "the freed buffer was not reused");
        t.to_vec::<u32>().unwrap()
    };
    let got = match reader {
        Some(r) => r.run(read),
        None => read(),
    };
    leaked(&got, &s)
}

#[test]
fn a_session_does_not_read_another_sessions_freed_bytes() {
    let _g = serial();
    let (a, b) = (Session::new(SessionLimits::default()), Session::new(SessionLimits::default()));
    // The case: 4096 words.
    assert_eq!(idle_case(Some(&a), Some(&b), 4096), 0);
    // The default session is an owner too, both ways.
    assert_eq!(idle_case(None, Some(&b), 4096), 0);
    assert_eq!(idle_case(Some(&a), None, 4096), 0);
    // An owner still gets its own bytes back uncleared (no cost where nothing crosses): this
    // checks that the case above really reused the buffer, and that only crossing clears.
    assert_eq!(idle_case(Some(&a), Some(&a), 4096), 4096);
    assert_eq!(idle_case(None, None, 4096), 4096);
    a.close();
    b.close();
}

#[test]
fn a_buffer_freed_in_the_open_batch_is_cleared_after_its_last_reader() {
    let _g = serial();
    let dev = empty_pool();
    let (a, b) = (Session::new(SessionLimits::default()), Session::new(SessionLimits::default()));
    let n = 3000; // a class of its own here: 16 KiB
    let s = secret(n);
    // a's x is read by an add recorded in the open batch, then freed before the batch is
    // submitted: b's empty() of the same size takes it from the batch's freed buffers.
    let y = a.run(|| {
        let x = Tensor::from_slice(&s, &[n]).unwrap();
        let y = ops::binary(BinaryOp::Add, &x, &Tensor::from_slice(&[1u32], &[1]).unwrap()).unwrap();
        drop(x);
        y
    });
    let got = b.run(|| {
        let t = Tensor::empty(&[n], DType::U32).unwrap();
        // A kernel that reads what it was given: the bytes b's first command sees.
        let copy = ops::binary(BinaryOp::Add, &t, &Tensor::from_slice(&[0u32], &[1]).unwrap()).unwrap();
        copy.to_vec::<u32>().unwrap()
    });
    assert_eq!(leaked(&got, &s), 0);
    assert!(got.iter().all(|&w| w == 0));
    // The clear ran after a's add: a's result is intact.
    let want: Vec<u32> = s.iter().map(|w| w.wrapping_add(1)).collect();
    assert_eq!(a.run(|| y.to_vec::<u32>().unwrap()), want);
    drop(y);
    a.close();
    b.close();
    let _ = dev;
}

#[test]
fn an_upload_into_anothers_buffer_leaves_none_of_its_bytes_behind() {
    let _g = serial();
    let dev = empty_pool();
    let b = Session::new(SessionLimits::default());
    let n = 1024; // 4 KiB class
    let s = secret(n);
    drop(Tensor::from_slice(&s, &[n]).unwrap()); // the default session's secret
    dev.synchronize().unwrap();
    let allocated = dev.memory_stats().allocated_bytes;
    let got = b.run(|| {
        // b uploads fewer words into the same class: its upload overwrites only those...
        let small = Tensor::from_slice(&vec![7u32; 600], &[600]).unwrap();
        assert_eq!(dev.memory_stats().allocated_bytes, allocated, "the freed buffer was not reused");
        assert_eq!(small.to_vec::<u32>().unwrap(), vec![7u32; 600]);
        drop(small);
        dev.synchronize().unwrap();
        // ...and the buffer is b's now: b's next empty() of the whole class gets it uncleared.
        let t = Tensor::empty(&[n], DType::U32).unwrap();
        t.to_vec::<u32>().unwrap()
    });
    assert_eq!(&got[..600], &[7u32; 600][..]);
    assert_eq!(leaked(&got, &s), 0, "the rest of the class still held the default session's words");
    b.close();
}

/// The measurement behind the choice in `Device::clear_foreign` (run by hand, `--ignored
/// --nocapture`): `empty()` + synchronize with the asker's own pooled buffer (no clear), with
/// another owner's (cleared), and with a new buffer (empty pool).
#[test]
#[ignore]
fn clearing_cost() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    let (a, b) = (Session::new(SessionLimits::default()), Session::new(SessionLimits::default()));
    const REPS: usize = 20;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "| bytes | own buffer | another owner's, cleared | new buffer | own, read | another's, read | new, read | \
         upload into own | upload into another's |"
    );
    for bytes in [4usize << 10, 256 << 10, 4 << 20, 64 << 20] {
        let n = bytes / 4;
        // (writer, reader, whether the pool is emptied between, what the reader does)
        let time = |writer: &Session, reader: &Session, fresh: bool, what: u8| {
            let data = vec![1u32; n * 3 / 4 + 1];
            median(
                (0..REPS)
                    .map(|_| {
                        writer.run(|| drop(Tensor::empty(&[n], DType::U32).unwrap()));
                        dev.synchronize().unwrap();
                        if fresh {
                            dev.empty_cache();
                        }
                        let t0 = std::time::Instant::now();
                        let t = reader.run(|| match what {
                            0 => Tensor::empty(&[n], DType::U32).unwrap(),
                            // The first use of its bytes: a new buffer is zero-filled by wgpu here.
                            1 => {
                                let t = Tensor::empty(&[n], DType::U32).unwrap();
                                t.to_vec::<u32>().unwrap();
                                t
                            }
                            _ => Tensor::from_slice(&data, &[data.len()]).unwrap(),
                        });
                        dev.synchronize().unwrap();
                        let dt = t0.elapsed().as_secs_f64() * 1e3;
                        reader.run(|| drop(t));
                        dt
                    })
                    .collect(),
            )
        };
        println!(
            "| {bytes} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            time(&a, &a, false, 0),
            time(&a, &b, false, 0),
            time(&a, &a, true, 0),
            time(&a, &a, false, 1),
            time(&a, &b, false, 1),
            time(&a, &a, true, 1),
            time(&a, &a, false, 2),
            time(&a, &b, false, 2)
        );
    }
}
