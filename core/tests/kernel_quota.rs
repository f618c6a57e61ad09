//! What a session's kernels cost it (issue 28: compiled kernels were charged nothing and had no
//! count limit): a place among `max_kernels` and `KERNEL_CHARGE_BYTES` of `max_bytes` each, from
//! the compile until the kernel is dropped. Each test attacks the limit from another side.

use kiln_core::{DType, ErrorCode, Kernel, Session, SessionLimits, Tensor, KERNEL_CHARGE_BYTES};

/// The `i`th distinct tiny kernel: x[g] = x[g] * 2 + i.
fn tiny(i: usize) -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
         @compute @workgroup_size(1) fn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n\
         if (g.x < arrayLength(&x)) {{ x[g.x] = x[g.x] * 2.0 + {i}.0; }}\n}}"
    )
}

fn quota_error(r: kiln_core::Result<Kernel>) -> kiln_core::Error {
    let e = r.expect_err("compiled past the limit");
    assert_eq!(e.code(), ErrorCode::QuotaExceeded, "{e}");
    e
}

/// A kernel that still works: runs it on [1, 2] and checks the result.
fn check_runs(k: &Kernel, i: usize) {
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    k.dispatch(&[&x], None, [2, 1, 1]).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![2.0 + i as f32, 4.0 + i as f32]);
}

#[test]
fn many_tiny_kernels_stop_at_max_kernels() {
    let s = Session::new(SessionLimits { max_kernels: 3, ..Default::default() });
    s.run(|| {
        let mut held: Vec<Kernel> = (0..3).map(|i| Kernel::new(&tiny(i), "main").unwrap()).collect();
        let compiled = s.stats().kernels_compiled;
        // Attack: one more, and many more.
        for i in 3..20 {
            let e = quota_error(Kernel::new(&tiny(i), "main"));
            assert!(e.message().contains("max_kernels"), "{e}");
        }
        // Attack: the same source again (a cache hit compiles nothing, but is one more kernel).
        quota_error(Kernel::new(&tiny(0), "main"));
        // A refused kernel was not compiled, and changed nothing.
        assert_eq!(s.stats().kernels_compiled, compiled);
        assert_eq!(s.stats().kernels_alive, 3);
        assert_eq!(s.stats().bytes_in_use, 3 * KERNEL_CHARGE_BYTES);
        // Dropping one gives its place back; the others still run.
        held.remove(0);
        let k = Kernel::new(&tiny(0), "main").unwrap();
        check_runs(&k, 0);
        check_runs(&held[1], 2);
        drop(k);
        drop(held);
        assert_eq!((s.stats().kernels_alive, s.stats().bytes_in_use), (0, 0));
    });
    s.close();
}

#[test]
fn kernels_are_charged_against_max_bytes() {
    let s = Session::new(SessionLimits { max_bytes: 3 * KERNEL_CHARGE_BYTES, ..Default::default() });
    s.run(|| {
        // Attack: compile tiny kernels (no limit on their count) until refused.
        let mut held = Vec::new();
        let e = loop {
            match Kernel::new(&tiny(100 + held.len()), "main") {
                Ok(k) => held.push(k),
                Err(e) => break e,
            }
            assert!(held.len() <= 3, "more kernels than the quota holds");
        };
        assert_eq!(held.len(), 3);
        assert_eq!(e.code(), ErrorCode::QuotaExceeded, "{e}");
        assert!(e.message().contains("a kernel is charged"), "{e}");
        // The same source twice: charged twice.
        drop(held.pop());
        let again = Kernel::new(&tiny(100), "main").unwrap();
        quota_error(Kernel::new(&tiny(100), "main"));
        // Kernels and tensors share the quota: no room for a 16-byte tensor now.
        let t = Tensor::empty(&[1], DType::F32).unwrap_err();
        assert_eq!(t.code(), ErrorCode::QuotaExceeded, "{t}");
        drop(held);
        check_runs(&again, 100);
    });
    assert_eq!(s.stats().bytes_in_use, 0);
    s.close();
}

#[test]
fn freeing_tensors_makes_room_for_kernels_and_back() {
    let elems = (KERNEL_CHARGE_BYTES / 4) as usize; // one charge's worth of f32 (a size class)
    let s = Session::new(SessionLimits { max_bytes: 2 * KERNEL_CHARGE_BYTES, ..Default::default() });
    s.run(|| {
        let a = Tensor::empty(&[elems], DType::F32).unwrap();
        let b = Tensor::empty(&[elems], DType::F32).unwrap();
        quota_error(Kernel::new(&tiny(200), "main"));
        drop(a);
        let k1 = Kernel::new(&tiny(200), "main").unwrap();
        quota_error(Kernel::new(&tiny(201), "main"));
        // Attack: free the other tensor, compile more, then ask for the tensors back.
        drop(b);
        let k2 = Kernel::new(&tiny(201), "main").unwrap();
        let e = Tensor::empty(&[elems], DType::F32).unwrap_err();
        assert_eq!(e.code(), ErrorCode::QuotaExceeded, "{e}");
        assert_eq!(s.stats().bytes_in_use, 2 * KERNEL_CHARGE_BYTES);
        drop(k1);
        let c = Tensor::empty(&[elems], DType::F32).unwrap();
        assert_eq!(s.stats().peak_bytes, 2 * KERNEL_CHARGE_BYTES);
        drop((c, k2));
    });
    assert_eq!(s.stats().bytes_in_use, 0);
    s.close();
}

#[test]
fn kernels_dropped_after_close_leave_the_counters_alone() {
    let s = Session::new(SessionLimits { max_kernels: 2, max_bytes: 4 * KERNEL_CHARGE_BYTES, ..Default::default() });
    let k = s.run(|| Kernel::new(&tiny(300), "main").unwrap());
    s.close();
    drop(k);
    let st = s.stats();
    assert_eq!((st.kernels_alive, st.bytes_in_use), (0, 0), "{st:?}");
    // Unlimited sessions and the default session still compile any number.
    let free = Session::new(SessionLimits::default());
    let held: Vec<Kernel> = free.run(|| (0..5).map(|i| Kernel::new(&tiny(400 + i), "main").unwrap()).collect());
    assert_eq!(free.stats().kernels_alive, 5);
    drop(held);
    free.close();
    let _plain: Vec<Kernel> = (0..5).map(|i| Kernel::new(&tiny(500 + i), "main").unwrap()).collect();
}
