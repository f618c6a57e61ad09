//! The device opened through wgpu-hal (core/src/native_cm2.rs: `open_with_callback`, then
//! `create_device_from_hal`), as it is on drivers with VK_NV_cooperative_matrix2, forced with
//! `KILN_NATIVE_CM2=hal` on whatever Vulkan adapter runs the tests (lavapipe has no such
//! extension: without this, CI would never run that device). It must be a full Kiln device:
//! kernels of the WGSL tier, the passthrough path and readbacks, checked against the CPU
//! reference. One test: the knob is read once, before the process's first device.

mod common;
use common::*;
use kiln_core::ops;
use kiln_core::reference::matmul as cpu;
use kiln_core::{DType, Tensor};

#[test]
fn device_opened_through_wgpu_hal_runs_kernels() {
    std::env::set_var("KILN_NATIVE_CM2", "hal");
    let dev = kiln_core::device().unwrap();
    let c = dev.native_caps();
    eprintln!("adapter {} ({}): NV cooperative matrix 2 {}", dev.info().name, dev.info().backend, c.cm2_note);
    if dev.info().backend.eq_ignore_ascii_case("vulkan") {
        // Opened through wgpu-hal: with the extension where usable, else saying why not.
        assert!(
            c.cm2_note == "on" || c.cm2_note.ends_with("(device opened through wgpu-hal)"),
            "a Vulkan device was not opened through wgpu-hal: {}",
            c.cm2_note
        );
        assert_eq!(c.cm2.is_some(), c.cm2_note == "on");
    }
    poison();
    let mut rng = Rng::new(3033);
    // WGSL kernels: an elementwise op and a ragged matmul (f16 where the device has it).
    let (a, av) = rand_tensor(&mut rng, &[37, 41], DType::F32, -2.0, 2.0);
    let (b, bv) = rand_tensor(&mut rng, &[37, 41], DType::F32, -2.0, 2.0);
    let sum = ops::add(&a, &b).unwrap().to_f64_vec().unwrap();
    let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| (*x as f32 + *y as f32) as f64).collect();
    assert_close("add on the hal-opened device", &sum, &want, 0.0, 0.0);
    let dt = if dev.has_f16() { DType::F16 } else { DType::F32 };
    for (m, k, n) in [(17usize, 33usize, 15usize), (130, 72, 257), (513, 24, 520)] {
        let ints = |rng: &mut Rng, len: usize| -> Vec<f64> { (0..len).map(|_| rng.int(-3, 3) as f64).collect() };
        let (av, bv) = (ints(&mut rng, m * k), ints(&mut rng, k * n));
        let a = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(dt, &av), &[m, k], dt).unwrap();
        let b = Tensor::from_bytes(&kiln_core::dtype::f64_to_bytes(dt, &bv), &[k, n], dt).unwrap();
        let got = ops::matmul(&a, &b).unwrap().to_f64_vec().unwrap();
        let (want, _) = cpu::matmul(&av, &[m, k], &bv, &[k, n]).unwrap();
        let want: Vec<f64> = want.iter().map(|&w| kiln_core::reference::round_to(dt, w)).collect();
        assert_close(&format!("{dt} matmul {m}x{k} x {k}x{n} on the hal-opened device"), &got, &want, 0.0, 0.0);
    }
    // The passthrough path (SPIR-V modules), where the device has it.
    if c.passthrough {
        let x: Vec<u32> = (0..1031u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let t = Tensor::from_slice(&x, &[1031]).unwrap();
        let got = kiln_core::native_kernels::plumbing_add(&t, &t).unwrap().to_vec::<u32>().unwrap();
        assert_eq!(got, x.iter().map(|v| v.wrapping_add(*v)).collect::<Vec<_>>());
    }
    assert!(!dev.is_lost(), "the hal-opened device was lost");
}
