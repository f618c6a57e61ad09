//! What Kiln reports about an adapter (its own module: the runtime lists adapters and each
//! device keeps its own, and neither should import the other for it).

/// What Kiln knows about one adapter (as listed by `kiln devices` and every binding).
#[derive(Clone, Debug)]
pub struct AdapterInfo {
    pub index: usize,
    pub name: String,
    pub vendor: u32,
    pub device_id: u32,
    pub device_type: String,
    pub backend: String,
    pub driver: String,
    pub driver_info: String,
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub shader_f16: bool,
    pub timestamp_query: bool,
    pub subgroups: bool,
    /// Whether this is the adapter Kiln uses by default.
    pub chosen: bool,
}

/// The indices of the adapters of the best one's kind and backend (`adapters` sorted best first,
/// as `Runtime::adapters` lists them): a machine's GPUs, without a software fallback beside them
/// or one GPU listed again through a second backend (Vulkan and GL, Vulkan and DX12). What
/// "every GPU" means for `kiln serve`'s default devices and data parallel work.
pub fn same_kind_as_best(adapters: &[AdapterInfo]) -> Vec<usize> {
    match adapters.first() {
        Some(best) => adapters
            .iter()
            .filter(|a| a.device_type == best.device_type && a.backend == best.backend)
            .map(|a| a.index)
            .collect(),
        None => Vec::new(),
    }
}
