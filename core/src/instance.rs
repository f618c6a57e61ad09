//! The wgpu instances Kiln enumerates adapters from: compute only, so no window system is ever
//! touched.
//!
//! Why not plain `wgpu::Instance::new`: wgpu's Vulkan backend enables every window-system surface
//! extension the loader offers (xlib, xcb, wayland). Mesa's implicit `VK_LAYER_MESA_device_select`
//! layer sees `VK_KHR_wayland_surface` enabled and, on every `vkEnumeratePhysicalDevices`, calls
//! `wl_display_connect` to find the compositor's GPU; without a compositor libwayland prints
//! "error: XDG_RUNTIME_DIR is invalid or not set in the environment." to stderr (twice: wgpu
//! enumerates twice), which reads as Kiln failing. (With DISPLAY set, the xcb extension makes the
//! layer connect to the X server the same way.) Kiln never creates a surface, so on the
//! platforms with those extensions the Vulkan instance is made here without them.

/// The window-system surface extensions wgpu would enable on Linux and the BSDs it builds Vulkan
/// for (the cfg below; wgpu-core leaves NetBSD out). wgpu checks its
/// enabled list before creating a surface of each kind (`create_surface_from_{xlib,xcb,wayland}`
/// answer an error without it), and nothing else in wgpu uses them: leaving them out loses only
/// surfaces, which compute never makes.
#[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd", target_os = "dragonfly"))]
const WINDOW_SYSTEM_EXTENSIONS: [&std::ffi::CStr; 3] =
    [c"VK_KHR_xlib_surface", c"VK_KHR_xcb_surface", c"VK_KHR_wayland_surface"];

/// The instances made for a set of backends.
pub(crate) struct Instances {
    pub(crate) instances: Vec<wgpu::Instance>,
    /// Why the Vulkan instance could not be made (no loader, no driver), for the no-adapter
    /// error: wgpu would only have logged it, and Kiln has no logger.
    pub(crate) vulkan_error: Option<String>,
}

/// Instances covering `backends`: on Linux a compute-only Vulkan instance (see the module
/// comment) plus, when other backends are asked for too, one wgpu instance for those; elsewhere
/// one wgpu instance. A Vulkan instance that cannot be made is left out, as wgpu itself does.
pub(crate) fn compute_instances(backends: wgpu::Backends) -> Instances {
    let mut out = Instances { instances: Vec::new(), vulkan_error: None };
    #[allow(unused_mut)] // only Linux takes Vulkan out
    let mut rest = backends;
    #[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd", target_os = "dragonfly"))]
    if backends.contains(wgpu::Backends::VULKAN) {
        rest.remove(wgpu::Backends::VULKAN);
        match vulkan_without_window_system() {
            Ok(vk) => out.instances.push(vk),
            Err(e) => out.vulkan_error = Some(e),
        }
    }
    if !rest.is_empty() {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = rest;
        out.instances.push(wgpu::Instance::new(desc));
    }
    out
}

#[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd", target_os = "dragonfly"))]
fn vulkan_without_window_system() -> Result<wgpu::Instance, String> {
    use wgpu::hal::vulkan;
    // The options wgpu::Instance::new would pass (flags: validation in debug builds only).
    let defaults = wgpu::InstanceDescriptor::new_without_display_handle();
    let desc = wgpu::hal::InstanceDescriptor {
        name: "kiln",
        flags: defaults.flags,
        memory_budget_thresholds: defaults.memory_budget_thresholds,
        backend_options: defaults.backend_options,
        telemetry: None,
        display: None,
    };
    let drop_window_system: Box<vulkan::CreateInstanceCallback> =
        Box::new(|args: vulkan::CreateInstanceCallbackArgs| {
            args.extensions.retain(|e| !WINDOW_SYSTEM_EXTENSIONS.contains(e));
        });
    // SAFETY: `init_with_callback` asks the callback not to remove extensions because wgpu
    // assumes an available one is enabled; the three removed here are read only when creating
    // a surface of their kind, where wgpu checks its enabled list first and fails cleanly (see
    // WINDOW_SYSTEM_EXTENSIONS). The create info is not touched. An error (no Vulkan loader
    // or driver) leaves the other backends, or the GL fallback, to be tried.
    let hal =
        unsafe { vulkan::Instance::init_with_callback(&desc, Some(drop_window_system)) }.map_err(|e| e.to_string())?;
    // SAFETY: a valid Vulkan instance just created by wgpu-hal itself; wgpu owns it from here.
    Ok(unsafe { wgpu::Instance::from_hal::<wgpu::hal::api::Vulkan>(hal) })
}
