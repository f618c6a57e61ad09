//! A tensor filled by the host piece by piece (`TensorFill`: each piece written into the GPU
//! buffer at its offset, bytes of words not whole yet kept until they are): the bytes read back
//! equal the host's bytes (the padding past them zero) for pieces cut at every alignment and
//! written in any order; writes past the end, an unfinished fill and a length the tensor cannot
//! hold are errors.
use kiln_core::{device, DType, TensorFill};

/// Deterministic bytes and cut points (no rand dependency needed for a fixed test).
fn bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

fn fill(data: &[u8], cuts: &[usize], reverse: bool) -> Vec<u8> {
    let dev = device().unwrap();
    let words = data.len().div_ceil(4);
    let mut f = TensorFill::new_on(&dev, &[words], DType::U32, data.len() as u64).unwrap();
    let mut edges = vec![0];
    edges.extend(cuts.iter().copied().filter(|&c| c > 0 && c < data.len()));
    edges.push(data.len());
    edges.sort_unstable();
    edges.dedup();
    let mut pieces: Vec<(usize, usize)> = edges.windows(2).map(|w| (w[0], w[1])).collect();
    if reverse {
        pieces.reverse();
    }
    for (a, b) in pieces {
        f.write(a as u64, &data[a..b]).unwrap();
    }
    assert_eq!(f.written(), data.len() as u64);
    f.finish().unwrap().to_bytes().unwrap()
}

#[test]
fn pieces_at_every_alignment_in_any_order_give_the_hosts_bytes() {
    for n in [1usize, 3, 4, 5, 18, 323, 4096 + 7] {
        let data = bytes(n, n as u32);
        let mut want = data.clone();
        want.resize(n.div_ceil(4) * 4, 0);
        // One piece; pieces of 1, 2, 3, 5 and 7 bytes; uneven cuts; each forwards and backwards.
        let mut cut_sets: Vec<Vec<usize>> = vec![vec![]];
        for step in [1usize, 2, 3, 5, 7] {
            cut_sets.push((step..n).step_by(step).collect());
        }
        cut_sets.push(vec![1, 2, 6, n / 2, n / 2 + 1, n.saturating_sub(1)]);
        for cuts in &cut_sets {
            for reverse in [false, true] {
                assert_eq!(fill(&data, cuts, reverse), want, "{n} bytes, cuts {cuts:?}, reverse {reverse}");
            }
        }
    }
}

#[test]
fn pieces_past_the_joining_bound_are_written_as_they_come() {
    // Pieces of over 64 KiB (written at once) at unaligned offsets, between small ones (joined).
    let n = 200_003;
    let data = bytes(n, 11);
    let mut want = data.clone();
    want.resize(n.div_ceil(4) * 4, 0);
    for cuts in [vec![1, 70_001, 140_003], vec![3, 5, 65_541, 65_542, 131_079, 199_999]] {
        for reverse in [false, true] {
            assert_eq!(fill(&data, &cuts, reverse), want, "cuts {cuts:?}, reverse {reverse}");
        }
    }
}

#[test]
fn bad_fills_are_errors() {
    let dev = device().unwrap();
    // A length the tensor cannot hold, or one leaving a whole word unwritten.
    assert!(TensorFill::new_on(&dev, &[2], DType::U32, 9).is_err());
    assert!(TensorFill::new_on(&dev, &[2], DType::U32, 4).is_err());
    let mut f = TensorFill::new_on(&dev, &[2], DType::U32, 7).unwrap();
    // Past the end, or an offset whose end overflows.
    assert!(f.write(5, &[1, 2, 3]).is_err());
    assert!(f.write(u64::MAX, &[1]).is_err());
    f.write(0, &[1, 2, 3, 4, 5]).unwrap();
    // Two bytes short (one word partly written): finish refuses.
    let e = f.finish().unwrap_err().to_string();
    assert!(e.contains("5 written"), "{e}");
}
