//! VK_NV_cooperative_matrix2 for the native tier (`crate::native`). wgpu 30 does not enable the
//! extension itself, so where the physical device reports it (and the features the tier's
//! kernel needs), the device is opened through wgpu-hal's Vulkan `Adapter::open_with_callback`
//! with the extension and its feature structure added to vkCreateDevice, then handed to wgpu
//! with `Adapter::create_device_from_hal`. Everything else about the device is what
//! `request_device` makes of the same descriptor (features, limits, memory hints). Any failure
//! on the way gives `Err(reason)`, and the caller opens the device the ordinary way: a driver
//! that misbehaves here costs the extension, never the runtime.
//!
//! ash 0.38 (wgpu-hal 30's) predates the extension (its headers are Vulkan 1.3.281; the
//! extension came with 1.3.300), so its three structures are declared here, as the Vulkan
//! registry (vk.xml) declares them.

use crate::native::{Cm2Caps, Cm2Flexible};
use ash::vk;
use std::ffi::{c_void, CStr};

const EXTENSION: &CStr = c"VK_NV_cooperative_matrix2";
/// VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, ..._PROPERTIES_NV and
/// VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV (extension number
/// 594: 1000000000 + 593 * 1000 + n).
const STYPE_FEATURES: vk::StructureType = vk::StructureType::from_raw(1_000_593_000);
const STYPE_PROPERTIES: vk::StructureType = vk::StructureType::from_raw(1_000_593_002);
const STYPE_FLEXIBLE: vk::StructureType = vk::StructureType::from_raw(1_000_593_001);

/// VkPhysicalDeviceCooperativeMatrix2FeaturesNV: seven VkBool32 after the header
/// (cooperativeMatrixWorkgroupScope, FlexibleDimensions, Reductions, Conversions,
/// PerElementOperations, TensorAddressing, BlockLoads).
#[repr(C)]
#[derive(Clone, Copy)]
struct Features {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    bools: [vk::Bool32; 7],
}
// SAFETY: a VkPhysicalDeviceCooperativeMatrix2FeaturesNV, which the Vulkan registry declares as
// extending both VkPhysicalDeviceFeatures2 and VkDeviceCreateInfo; header layout as ash expects.
unsafe impl vk::ExtendsPhysicalDeviceFeatures2 for Features {}
unsafe impl vk::ExtendsDeviceCreateInfo for Features {}

/// VkPhysicalDeviceCooperativeMatrix2PropertiesNV: cooperativeMatrixWorkgroupScopeMaxWorkgroupSize,
/// cooperativeMatrixFlexibleDimensionsMaxDimension, cooperativeMatrixWorkgroupScopeReservedSharedMemory.
#[repr(C)]
struct Properties {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    values: [u32; 3],
}
// SAFETY: extends VkPhysicalDeviceProperties2 in the registry; header layout as ash expects.
unsafe impl vk::ExtendsPhysicalDeviceProperties2 for Properties {}

/// VkCooperativeMatrixFlexibleDimensionsPropertiesNV.
#[repr(C)]
#[derive(Clone, Copy)]
struct Flexible {
    s_type: vk::StructureType,
    p_next: *mut c_void,
    m_granularity: u32,
    n_granularity: u32,
    k_granularity: u32,
    a_type: i32,
    b_type: i32,
    c_type: i32,
    result_type: i32,
    saturating_accumulation: vk::Bool32,
    scope: i32,
    workgroup_invocations: u32,
}

// The C sizes on 64-bit targets (header of 16 bytes, then 4-byte members, padded to 8).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(
    std::mem::size_of::<Features>() == 48
        && std::mem::size_of::<Properties>() == 32
        && std::mem::size_of::<Flexible>() == 56
);

/// vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV.
type GetFlexible = unsafe extern "system" fn(vk::PhysicalDevice, *mut u32, *mut Flexible) -> vk::Result;

/// `KILN_NATIVE_CM2` (read once): `0` keeps the extension off (the device is then opened as on
/// any adapter, and the native tier uses KHR cooperative matrices only); `hal` opens every Vulkan
/// device through wgpu-hal as below, with the extension only where it is usable (tests: proves
/// the hal-opened device on adapters without the extension, lavapipe included).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Auto,
    AlwaysHal,
}

fn mode() -> Mode {
    static M: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();
    *M.get_or_init(|| match crate::platform::env_var("KILN_NATIVE_CM2").as_deref().map(str::trim) {
        Some("0") => Mode::Off,
        Some("hal") => Mode::AlwaysHal,
        _ => Mode::Auto,
    })
}

/// What the physical device behind `hal` offers of the extension; Err(why not) where nothing.
fn probe(hal: &wgpu::hal::vulkan::Adapter) -> Result<Cm2Caps, String> {
    let caps = hal.physical_device_capabilities();
    if !caps.supports_extension(EXTENSION) {
        return Err("the driver has no VK_NV_cooperative_matrix2".into());
    }
    let shared = hal.shared_instance();
    // The kernels are SPIR-V 1.6 (glslang needs it for the NV extension): Vulkan 1.3 on both
    // sides; and vkGetPhysicalDeviceFeatures2 below needs a 1.1 instance.
    // SAFETY: a query of the loader, no state.
    let instance_version =
        unsafe { shared.entry().try_enumerate_instance_version() }.ok().flatten().unwrap_or(vk::API_VERSION_1_0);
    if caps.properties().api_version < vk::API_VERSION_1_3 || instance_version < vk::API_VERSION_1_3 {
        return Err("VK_NV_cooperative_matrix2 without Vulkan 1.3 (SPIR-V 1.6)".into());
    }
    let instance = shared.raw_instance();
    let phd = hal.raw_physical_device();
    let mut features = Features { s_type: STYPE_FEATURES, p_next: std::ptr::null_mut(), bools: [0; 7] };
    {
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut features);
        // SAFETY: a valid physical device of this instance, and a well-formed pNext chain of
        // structures that outlive the call.
        unsafe { instance.get_physical_device_features2(phd, &mut f2) };
    }
    let mut props = Properties { s_type: STYPE_PROPERTIES, p_next: std::ptr::null_mut(), values: [0; 3] };
    {
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut props);
        // SAFETY: as above.
        unsafe { instance.get_physical_device_properties2(phd, &mut p2) };
    }
    let flexible = flexible_configurations(shared, phd)?;
    Ok(Cm2Caps::from_raw(features.bools, props.values, flexible))
}

/// The driver's flexible-dimensions configurations (the two-call Vulkan enumeration).
fn flexible_configurations(
    shared: &wgpu::hal::vulkan::InstanceShared,
    phd: vk::PhysicalDevice,
) -> Result<Vec<Cm2Flexible>, String> {
    let name = c"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV";
    // SAFETY: looking up an instance-level command of a live instance by its registry name.
    let fp = unsafe { shared.entry().get_instance_proc_addr(shared.raw_instance().handle(), name.as_ptr()) }
        .ok_or("the driver lists VK_NV_cooperative_matrix2 but not its enumeration command")?;
    // SAFETY: the loader returned the command of that name, whose C signature GetFlexible is.
    let get: GetFlexible = unsafe { std::mem::transmute::<unsafe extern "system" fn(), GetFlexible>(fp) };
    let blank = Flexible {
        s_type: STYPE_FLEXIBLE,
        p_next: std::ptr::null_mut(),
        m_granularity: 0,
        n_granularity: 0,
        k_granularity: 0,
        a_type: 0,
        b_type: 0,
        c_type: 0,
        result_type: 0,
        saturating_accumulation: 0,
        scope: 0,
        workgroup_invocations: 0,
    };
    let mut count = 0u32;
    // SAFETY: the count query (null array), then an array of `count` initialized structures.
    let r = unsafe { get(phd, &mut count, std::ptr::null_mut()) };
    if r != vk::Result::SUCCESS {
        return Err(format!("flexible-dimensions enumeration: {r:?}"));
    }
    let mut all = vec![blank; count.min(4096) as usize];
    count = all.len() as u32;
    let r = unsafe { get(phd, &mut count, all.as_mut_ptr()) };
    if r != vk::Result::SUCCESS && r != vk::Result::INCOMPLETE {
        return Err(format!("flexible-dimensions enumeration: {r:?}"));
    }
    all.truncate(count as usize);
    Ok(all
        .iter()
        .map(|f| Cm2Flexible {
            m_granularity: f.m_granularity,
            n_granularity: f.n_granularity,
            k_granularity: f.k_granularity,
            types: [f.a_type, f.b_type, f.c_type, f.result_type],
            saturating: f.saturating_accumulation != 0,
            scope: f.scope,
            invocations: f.workgroup_invocations,
        })
        .collect())
}

/// A device opened here: wgpu's device and queue, the extension's capabilities where it was
/// enabled, and the note `NativeCaps::cm2_note` keeps ("on", or "off: <why>" when
/// `KILN_NATIVE_CM2=hal` opened the device here without it).
pub(crate) type Opened = (wgpu::Device, wgpu::Queue, Option<Cm2Caps>, String);

/// Opens `adapter` as `request_device(desc)` would, plus VK_NV_cooperative_matrix2 with every
/// feature of it the driver reports. Err(why not) where the adapter is not Vulkan, lacks the
/// extension or the features the kernel needs (unless `KILN_NATIVE_CM2=hal`), or opening
/// failed; the caller then opens the device the ordinary way.
pub(crate) fn open(adapter: &wgpu::Adapter, desc: &wgpu::DeviceDescriptor<'_>) -> Result<Opened, String> {
    let mode = mode();
    if mode == Mode::Off {
        return Err("KILN_NATIVE_CM2=0".into());
    }
    let open = {
        // SAFETY: the hal adapter is only read (properties) and asked to open a device; nothing
        // it owns is destroyed, and the guard is dropped before wgpu takes the device over.
        let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }.ok_or("not a Vulkan adapter")?;
        // The native tier's kernels need passthrough shaders and KHR cooperative matrices, and
        // the kernel uses these three features: without them the extension is dead weight.
        let needed = wgpu::Features::PASSTHROUGH_SHADERS | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        let usable = crate::startup::time("VK_NV_cooperative_matrix2 probe", || probe(&hal)).and_then(|caps| {
            if !desc.required_features.contains(needed) {
                Err("no passthrough shaders or KHR cooperative matrices on this device".into())
            } else if !(caps.workgroup_scope && caps.flexible_dimensions && caps.tensor_addressing) {
                Err(format!("VK_NV_cooperative_matrix2 without the features the kernel needs: {caps:?}"))
            } else {
                Ok(caps)
            }
        });
        let (caps, note) = match usable {
            Ok(caps) => (Some(caps), "on".to_string()),
            Err(why) if mode == Mode::AlwaysHal => (None, format!("off: {why} (device opened through wgpu-hal)")),
            Err(why) => return Err(why),
        };
        // Exactly what the driver reported, nothing more (a feature it lacks would fail
        // vkCreateDevice).
        let mut features = Features {
            s_type: STYPE_FEATURES,
            p_next: std::ptr::null_mut(),
            bools: caps
                .as_ref()
                .map(|c| {
                    [
                        c.workgroup_scope,
                        c.flexible_dimensions,
                        c.reductions,
                        c.conversions,
                        c.per_element_operations,
                        c.tensor_addressing,
                        c.block_loads,
                    ]
                    .map(vk::Bool32::from)
                })
                .unwrap_or_default(),
        };
        let chained = caps.is_some().then_some(&mut features);
        let callback: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> =
            Box::new(move |args: wgpu::hal::vulkan::CreateDeviceCallbackArgs<'_, '_, '_>| {
                if let Some(chained) = chained {
                    if !args.extensions.contains(&EXTENSION) {
                        args.extensions.push(EXTENSION);
                    }
                    let info = *args.create_info;
                    *args.create_info = info.push_next(chained);
                }
            });
        // SAFETY: wgpu-hal's contract for open_with_callback: the callback only adds an
        // extension the physical device reports (probe) and a feature structure with features
        // it reports, removes nothing, and `desc`'s features and limits are the adapter's own
        // (Device::create_async computed them from it).
        let open = unsafe {
            hal.open_with_callback(desc.required_features, &desc.required_limits, &desc.memory_hints, Some(callback))
        }
        .map_err(|e| format!("vkCreateDevice through wgpu-hal: {e}"))?;
        (open, caps, note)
    };
    let (open, caps, note) = open;
    // SAFETY: `open` was created from this adapter's hal adapter just above, with exactly
    // `desc.required_features` (so they are a subset of its features).
    let (device, queue) = unsafe { adapter.create_device_from_hal(open, desc) }
        .map_err(|e| format!("wgpu refused the device opened through wgpu-hal: {e}"))?;
    Ok((device, queue, caps, note))
}
