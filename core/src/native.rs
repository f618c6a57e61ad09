//! The native kernel tier: Kiln's own kernels written in GLSL with cooperative-matrix extensions
//! (shaders/native/), compiled to SPIR-V ahead of time (mk/native.mk, checked in) and created
//! through wgpu's passthrough shaders, bypassing naga, where WGSL cannot reach the tensor cores'
//! speed. Chosen per op from the probe made at device creation ([`NativeCaps`]); everywhere else
//! (no passthrough, no suitable cooperative-matrix shape, the browser, lavapipe,
//! `KILN_NATIVE_KERNELS=0`) the WGSL tier runs.
//!
//! Passthrough modules skip naga's validation and its runtime bounds checks, so only the SPIR-V
//! compiled from this repository's sources ever goes through here (`native_kernels::MODULES`
//! is a fixed table of them); user kernels stay on the validated WGSL path.
//!
//! This module holds the probe and the tier names only (the device keeps a probe, and must not
//! import what imports it); the modules and their pipelines are in `native_kernels`.

/// Which tier ran an op (the conformance table states it per op and device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// WGSL through naga (every adapter, the browser included).
    Wgsl,
    /// Kiln's SPIR-V through wgpu's passthrough shaders (tensor cores).
    Native,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Wgsl => "wgsl",
            Tier::Native => "native",
        }
    }
}

/// What the adapter offers the native tier, probed once at device creation.
#[derive(Clone, Debug, Default)]
pub struct NativeCaps {
    /// wgpu's `PASSTHROUGH_SHADERS` is on for this device (SPIR-V modules can be created).
    pub passthrough: bool,
    /// A 16x16x16 f16 x f16 -> f32 KHR cooperative-matrix configuration at subgroup scope, with
    /// subgroups of exactly 32 invocations (what shaders/native/matmul_f16.comp is written for).
    pub coop_f16_16x16x16_f32: bool,
    /// Every cooperative-matrix configuration wgpu reports for the adapter (subgroup scope, the
    /// scalar types wgpu knows), as "MxNxK AB->CR" (e.g. "16x16x16 F16->F32").
    pub coop_shapes: Vec<String>,
}

impl NativeCaps {
    /// Whether the native f16 matmul can run.
    pub fn matmul_f16(&self) -> bool {
        self.passthrough && self.coop_f16_16x16x16_f32
    }
}

/// Whether `KILN_NATIVE_KERNELS=0` turned the tier off (read once).
pub(crate) fn disabled_by_env() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| crate::platform::env_var("KILN_NATIVE_KERNELS").is_some_and(|v| v.trim() == "0"))
}

/// The features the native tier asks for on top of Kiln's others: passthrough shaders where the
/// adapter has them and the tier is not turned off (the tier's kernels also need the
/// cooperative-matrix feature, asked for by the device on its own).
pub(crate) fn wanted_features(adapter_features: wgpu::Features) -> wgpu::Features {
    if disabled_by_env() || cfg!(target_arch = "wasm32") {
        return wgpu::Features::empty();
    }
    adapter_features & wgpu::Features::PASSTHROUGH_SHADERS
}

/// The probe: what the opened device (its `features`, cooperative-matrix configurations and
/// fixed subgroup size) offers the native tier.
pub(crate) fn probe(
    features: wgpu::Features,
    coop_props: &[wgpu::CooperativeMatrixProperties],
    subgroup_size: Option<u32>,
) -> NativeCaps {
    use wgpu::CooperativeScalarType as S;
    let coop_shapes = coop_props
        .iter()
        .map(|p| format!("{}x{}x{} {:?}->{:?}", p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type))
        .collect();
    let coop = features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        && features.contains(wgpu::Features::SHADER_F16)
        && features.contains(wgpu::Features::SUBGROUP)
        && subgroup_size == Some(32)
        && coop_props
            .iter()
            .any(|p| p.m_size == 16 && p.n_size == 16 && p.k_size == 16 && p.ab_type == S::F16 && p.cr_type == S::F32);
    NativeCaps {
        passthrough: features.contains(wgpu::Features::PASSTHROUGH_SHADERS) && !disabled_by_env(),
        coop_f16_16x16x16_f32: coop,
        coop_shapes,
    }
}
