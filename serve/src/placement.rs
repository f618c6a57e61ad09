//! Which GPU each session lives on. The server serves a fixed list of adapters (`devices` in the
//! config, else `default_devices`); a new session goes to the device with the fewest live
//! sessions, ties broken by the fewest bytes those sessions hold, then by the lowest index, unless
//! the request (or the tenant's `devices`) names one. Why sessions first: a session opens empty,
//! so the bytes held at placement time say little about the load it will bring, while every live
//! session is a client sending work to that device's one queue.
//!
//! A device is named by its adapter index, as `kiln devices` lists it.

use crate::error::{ApiError, ApiResult};
use kiln_core::{AdapterInfo, Device};
use std::sync::Arc;

/// One device the server serves.
#[derive(Clone, Debug)]
pub struct ServedDevice {
    pub index: usize,
    pub name: String,
    pub backend: String,
    pub device_type: String,
}

/// What placement needs to know of a device now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    pub sessions: usize,
    pub bytes: u64,
}

/// The devices to serve when the config names none: the adapter `KILN_ADAPTER` picks when it is
/// set, else every adapter of the best kind found through the best backend (the list is sorted
/// best first): a machine with GPUs does not also serve on a software fallback next to them,
/// and one GPU listed by two backends (Vulkan and DX12, Vulkan and GL) is served once.
pub fn default_devices(adapters: &[AdapterInfo], pinned_by_env: bool) -> Vec<usize> {
    if pinned_by_env {
        return adapters.iter().filter(|a| a.chosen).map(|a| a.index).collect();
    }
    kiln_core::adapter::same_kind_as_best(adapters)
}

/// The served devices for `wanted` (the config's list, or None for `default_devices`); an index
/// that is no adapter of this machine is an error naming the ones there are.
pub fn resolve(wanted: Option<&[usize]>) -> Result<Vec<ServedDevice>, String> {
    let adapters = kiln_core::adapters();
    let pinned = std::env::var("KILN_ADAPTER").is_ok_and(|s| !s.trim().is_empty());
    let indices = match wanted {
        Some(w) => {
            for &i in w {
                if i >= adapters.len() {
                    return Err(format!(
                        "config: devices names adapter {i}, but this machine has {} (`kiln devices` lists them)",
                        adapters.len()
                    ));
                }
            }
            let mut v = w.to_vec();
            v.sort_unstable();
            v.dedup();
            v
        }
        None => default_devices(&adapters, pinned),
    };
    Ok(indices
        .into_iter()
        .map(|i| {
            let a = &adapters[i];
            ServedDevice {
                index: i,
                name: a.name.clone(),
                backend: a.backend.clone(),
                device_type: a.device_type.clone(),
            }
        })
        .collect())
}

/// The device a new session goes to: `requested` if given (it must be in `allowed`), else the
/// least loaded of `allowed` (see the module's doc). `load` tells a device's load now.
pub fn place(allowed: &[usize], requested: Option<usize>, load: impl Fn(usize) -> Load) -> ApiResult<usize> {
    if let Some(d) = requested {
        if !allowed.contains(&d) {
            return Err(ApiError::new(
                "INVALID_ARGUMENT",
                format!("device {d} is not one this tenant's sessions may use (devices: {allowed:?})"),
            ));
        }
        return Ok(d);
    }
    allowed
        .iter()
        .copied()
        .min_by_key(|&d| {
            let l = load(d);
            (l.sessions, l.bytes, d)
        })
        .ok_or_else(|| ApiError::new("NO_ADAPTER", "this server has no device to place a session on"))
}

/// The device of adapter `index` (re-created after a loss).
pub fn device(index: usize) -> ApiResult<Arc<Device>> {
    Ok(kiln_core::runtime().device_at(index)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(index: usize, device_type: &str, backend: &str, chosen: bool) -> AdapterInfo {
        AdapterInfo {
            index,
            name: format!("gpu {index}"),
            vendor: 0x10de,
            device_id: 0x2335,
            device_type: device_type.into(),
            backend: backend.into(),
            driver: String::new(),
            driver_info: String::new(),
            max_buffer_size: 1 << 30,
            max_storage_buffer_binding_size: 1 << 30,
            max_compute_workgroups_per_dimension: 65535,
            max_compute_invocations_per_workgroup: 256,
            max_compute_workgroup_storage_size: 16384,
            shader_f16: true,
            timestamp_query: true,
            subgroups: true,
            chosen,
        }
    }

    #[test]
    fn by_default_every_gpu_of_the_best_kind_and_backend() {
        // Two GPUs through Vulkan, one of them again through GL, and lavapipe (sorted best first).
        let list = [
            adapter(0, "DiscreteGpu", "vulkan", true),
            adapter(1, "DiscreteGpu", "vulkan", false),
            adapter(2, "DiscreteGpu", "gl", false),
            adapter(3, "Cpu", "vulkan", false),
        ];
        assert_eq!(default_devices(&list, false), vec![0, 1]);
        assert_eq!(default_devices(&list[3..], false), vec![3]);
        assert_eq!(default_devices(&[], false), Vec::<usize>::new());
        // KILN_ADAPTER set: only the adapter it chose.
        let mut picked = list.clone();
        picked[0].chosen = false;
        picked[3].chosen = true;
        assert_eq!(default_devices(&picked, true), vec![3]);
    }

    #[test]
    fn fewest_sessions_then_fewest_bytes_then_lowest_index() {
        let loads = [Load { sessions: 2, bytes: 0 }, Load { sessions: 1, bytes: 900 }, Load { sessions: 1, bytes: 5 }];
        assert_eq!(place(&[0, 1, 2], None, |d| loads[d]).unwrap(), 2);
        assert_eq!(place(&[0, 1], None, |d| loads[d]).unwrap(), 1);
        assert_eq!(place(&[0], None, |d| loads[d]).unwrap(), 0);
        let even = |_| Load::default();
        assert_eq!(place(&[3, 1, 2], None, even).unwrap(), 1);
        // A request names one: taken whatever the load, if allowed.
        assert_eq!(place(&[0, 1, 2], Some(0), |d| loads[d]).unwrap(), 0);
        let e = place(&[0, 1], Some(2), even).unwrap_err();
        assert_eq!(e.code, "INVALID_ARGUMENT");
        assert!(e.message.contains("device 2") && e.message.contains("[0, 1]"), "{}", e.message);
        assert_eq!(place(&[], None, even).unwrap_err().code, "NO_ADAPTER");
    }
}
