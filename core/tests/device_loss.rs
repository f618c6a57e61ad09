//! Device loss, driven through `Device::destroy` (the path a real loss takes: the lost flag,
//! DeviceLost errors, re-creation on the next `kiln_core::device()`). Its own test binary: it
//! destroys the process's default device.
use kiln_core::{ops, ErrorCode, Tensor};
use std::sync::Arc;

#[test]
fn a_lost_device_fails_cleanly_and_is_recreated() {
    let old = kiln_core::device().unwrap();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let b = ops::add_scalar(&a, 1.0).unwrap();
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
    let queued = ops::mul_scalar(&b, 2.0).unwrap(); // recorded, not yet submitted
                                                    // A readback started before the loss answers DeviceLost when collected, whether or not its
                                                    // bytes had arrived.
    let pending = queued.start_read().unwrap();

    old.destroy();
    assert_eq!(pending.wait_bytes().unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(b.start_read().err().map(|e| e.code()), Some(ErrorCode::DeviceLost));
    assert!(old.is_lost());
    // Every call on the lost device or its tensors: DeviceLost, no panic, no hang.
    assert_eq!(a.to_vec::<f32>().unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(queued.to_vec::<f32>().unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(ops::add(&a, &b).unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(Tensor::from_slice_on(&old, &[1.0f32], &[1]).unwrap_err().code(), ErrorCode::DeviceLost);
    assert_eq!(old.synchronize().unwrap_err().code(), ErrorCode::DeviceLost);
    let msg = a.to_vec::<f32>().unwrap_err().to_string();
    assert!(msg.contains("lost") && msg.contains("destroyed on request"), "{msg}");

    // The next device() is a fresh, working device; the old tensors can be dropped safely.
    let new = kiln_core::device().unwrap();
    assert!(!Arc::ptr_eq(&old, &new));
    assert!(!new.is_lost());
    let c = Tensor::from_slice(&[5.0f32, 6.0], &[2]).unwrap();
    assert_eq!(ops::add_scalar(&c, 0.5).unwrap().to_vec::<f32>().unwrap(), vec![5.5, 6.5]);
    // Mixing a lost device's tensor with a new one is an error, not a crash.
    assert!(ops::add(&a, &c).is_err());
    drop((a, b, queued));
    new.synchronize().unwrap();
}
