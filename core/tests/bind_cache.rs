//! The device's bind-group cache (`device::bind_cache`, issue 29): a repeated op sequence reuses
//! its bind groups (the pool hands its buffers back in the same order), results stay exact while
//! parameter blocks change under cached groups, the cache stays bounded, and buffers Kiln
//! destroys (pool emptied, session closed) leave it. Its own binary: the cache and the pool are
//! per device, and the counts below assume nothing else dispatches meanwhile.

use kiln_core::ops;
use kiln_core::{ErrorCode, Session, SessionLimits, Tensor, BIND_GROUP_CACHE_ENTRIES};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// x + c_0 + c_1 + ... one dispatch each (each its own parameter block), read back.
fn chain(x: &[f32], cs: &[f64]) -> Vec<f32> {
    let mut t = Tensor::from_slice(x, &[x.len()]).unwrap();
    for &c in cs {
        t = ops::add_scalar(&t, c).unwrap();
    }
    t.to_vec::<f32>().unwrap()
}

/// The same sums on the host, in the same order and precision.
fn chain_ref(x: &[f32], cs: &[f64]) -> Vec<f32> {
    x.iter().map(|&v| cs.iter().fold(v, |acc, &c| acc + c as f32)).collect()
}

/// Equal bits, but any NaN equals any NaN: a GPU may return its canonical NaN (the H200 gave
/// 0x7fffffff where the host keeps 0x7fc00000), which says nothing about the cache.
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn a_repeated_sequence_hits_and_stays_exact() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    // Awkward values: signed zeros, infinities, NaN, a ragged length.
    let x: Vec<f32> = (0..1027)
        .map(|i| match i % 7 {
            0 => -0.0,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => f32::NAN,
            _ => i as f32 * 0.37 - 100.0,
        })
        .collect();
    let mut last = dev.bind_group_stats();
    for round in 0..4 {
        // Other constants each round: the cached groups must bind this round's blocks.
        let cs: Vec<f64> = (0..40).map(|i| ((i * 13 + round * 7) % 17) as f64 * 0.25 - 2.0).collect();
        let got = chain(&x, &cs);
        let want = chain_ref(&x, &cs);
        let first = (0..got.len()).find(|&i| !same_bits(&got[i..=i], &want[i..=i]));
        assert!(
            same_bits(&got, &want),
            "round {round}: the chain differs from the host's sums, first at {first:?}: {:?}",
            first.map(|i| (x[i], got[i].to_bits(), want[i].to_bits()))
        );
        let now = dev.bind_group_stats();
        let (hits, misses) = (now.hits - last.hits, now.misses - last.misses);
        assert_eq!(hits + misses, 40, "one lookup a dispatch");
        if round >= 2 {
            // Same sequence, same pooled buffers handed back in the same order: all hits.
            assert_eq!(misses, 0, "round {round}: {misses} misses, {hits} hits");
        }
        last = now;
    }
}

/// The cache first tries the group that followed the last one the time before: sequences that
/// change order, length and buffers between rounds make it guess wrong, and a wrong guess
/// must fall back to the full lookup (never hand out the guessed group).
#[test]
fn a_changed_sequence_is_never_given_the_predicted_groups() {
    let _g = serial();
    let xs: Vec<Vec<f32>> = [1027usize, 513, 1027, 4]
        .iter()
        .enumerate()
        .map(|(j, &n)| (0..n).map(|i| if i % 5 == 0 { -0.0 } else { (i * (j + 3)) as f32 * 0.11 - 7.0 }).collect())
        .collect();
    for round in 0..6usize {
        // Each round another order of the inputs and another chain length per input.
        for k in 0..xs.len() {
            let j = (k * (round + 1) + round) % xs.len();
            let cs: Vec<f64> = (0..(3 + (j + round) % 5)).map(|i| (i + j + round) as f64 * 0.5 - 1.0).collect();
            let (got, want) = (chain(&xs[j], &cs), chain_ref(&xs[j], &cs));
            assert!(same_bits(&got, &want), "round {round}, input {j}: the chain differs from the host's sums");
        }
    }
}

#[test]
fn the_cache_is_bounded_and_forgets_destroyed_buffers() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    dev.synchronize().unwrap();
    dev.empty_cache();
    let baseline = dev.memory_stats();
    // More distinct bind groups than two generations hold: live inputs, each its own buffer.
    let n = 2 * BIND_GROUP_CACHE_ENTRIES + 100;
    let inputs: Vec<Tensor> = (0..n).map(|i| Tensor::from_slice(&[i as f32; 4], &[4]).unwrap()).collect();
    let outs: Vec<Tensor> = inputs.iter().map(|t| ops::add_scalar(t, 1.0).unwrap()).collect();
    let s = dev.bind_group_stats();
    assert!(s.entries as usize <= 2 * BIND_GROUP_CACHE_ENTRIES, "{} cached", s.entries);
    assert!(s.entries as usize >= BIND_GROUP_CACHE_ENTRIES, "{} cached", s.entries);
    assert_eq!(outs[n - 1].to_vec::<f32>().unwrap(), vec![n as f32; 4]);
    drop((inputs, outs));
    dev.synchronize().unwrap();
    // Every buffer those groups bound is now in the pool; emptying it destroys them, and their
    // groups go with them (each of them bound a tensor's buffer).
    dev.empty_cache();
    assert_eq!(dev.bind_group_stats().entries, 0);
    let after = dev.memory_stats();
    assert_eq!(after.allocated_bytes, baseline.allocated_bytes, "memory back to the baseline");
    assert_eq!(after.in_use_bytes, baseline.in_use_bytes);
    // And dispatching afterwards works (no group naming a destroyed buffer is used).
    assert!(same_bits(&chain(&[1.5, -0.0], &[1.0, 2.0]), &[4.5, 3.0]));
}

#[test]
fn closed_sessions_buffers_are_refused_and_forgotten() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    let s = Session::new(SessionLimits::default());
    let (t, u) = s.run(|| {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
        let u = ops::add_scalar(&t, 1.0).unwrap();
        // Again: the second time its group is cached.
        let u = ops::add_scalar(&t, 1.0).unwrap().to_vec::<f32>().map(|_| u).unwrap();
        (t, u)
    });
    let cached = dev.bind_group_stats().entries;
    s.close();
    let e = ops::add_scalar(&t, 1.0).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    let e = ops::add_scalar(&u, 1.0).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
    // The next dispatch forgets the groups of the destroyed buffers (the session's two at least:
    // t -> u and t -> the second result), and runs.
    let misses = dev.bind_group_stats().misses;
    assert!(same_bits(&chain(&[0.5], &[0.25]), &[0.75]));
    let now = dev.bind_group_stats();
    let added = now.misses - misses;
    assert!(
        now.entries + 2 <= cached + added,
        "the closed session's groups were dropped: {} of {cached} + {added}",
        now.entries
    );
    // A buffer handed to another owner stays the same buffer: its cached group is still valid,
    // and the new owner sees its own results.
    let other = Session::new(SessionLimits::default());
    let got = other.run(|| chain(&[7.0; 3], &[1.0, -8.0]));
    assert!(same_bits(&got, &[0.0; 3]));
    other.close();
}

#[test]
fn a_moving_parameter_block_keeps_its_group() {
    let _g = serial();
    let dev = kiln_core::device().unwrap();
    let x = Tensor::from_slice(&[1.0f32, -0.0, 2.5], &[3]).unwrap();
    // One batch: each dispatch's block goes further into the batch's parameter buffer, and each
    // output reuses the buffer the last one freed. With the block's offset given at
    // set_bind_group (a dynamic offset) every group after the first is the same.
    let mut y = ops::add_scalar(&x, 0.0).unwrap();
    let before = dev.bind_group_stats();
    for i in 1..=20 {
        drop(y);
        y = ops::add_scalar(&x, i as f64).unwrap();
    }
    let now = dev.bind_group_stats();
    assert!(now.misses - before.misses <= 1, "{} misses in 20 dispatches", now.misses - before.misses);
    assert!(same_bits(&y.to_vec::<f32>().unwrap(), &[21.0, 20.0, 22.5]));
}
