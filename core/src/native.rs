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
    /// NV cooperative matrix 2 (VK_NV_cooperative_matrix2), where the device was opened with it
    /// (`crate::native_cm2`): None on every other device, lavapipe and the browser included.
    pub cm2: Option<Cm2Caps>,
    /// Whether the device was opened with NV cooperative matrix 2, and if not why ("on", or
    /// "off: <reason>"), for the probe test's line and bug reports.
    pub cm2_note: String,
}

/// What VK_NV_cooperative_matrix2 offers on this device: its features (each one enabled at
/// device creation where the driver reports it), limits and flexible-dimension configurations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cm2Caps {
    /// VkPhysicalDeviceCooperativeMatrix2FeaturesNV, member by member.
    pub workgroup_scope: bool,
    pub flexible_dimensions: bool,
    pub reductions: bool,
    pub conversions: bool,
    pub per_element_operations: bool,
    pub tensor_addressing: bool,
    pub block_loads: bool,
    /// VkPhysicalDeviceCooperativeMatrix2PropertiesNV: the most invocations a workgroup using
    /// workgroup-scope matrices may have, the largest flexible dimension, and the workgroup
    /// memory the driver keeps for its own staging (bytes).
    pub workgroup_scope_max_invocations: u32,
    pub flexible_max_dimension: u32,
    pub reserved_shared_memory: u32,
    /// vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV's configurations.
    pub flexible: Vec<Cm2Flexible>,
}

/// One flexible-dimensions configuration: matrices of any multiple of the granularities (up to
/// `flexible_max_dimension`) with these component types, at this scope, in workgroups of exactly
/// `invocations` (workgroup scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cm2Flexible {
    pub m_granularity: u32,
    pub n_granularity: u32,
    pub k_granularity: u32,
    /// VkComponentTypeKHR values (0 = f16, 1 = f32, ...), A, B, C, result.
    pub types: [i32; 4],
    pub saturating: bool,
    /// VkScopeKHR (2 = workgroup, 3 = subgroup).
    pub scope: i32,
    pub invocations: u32,
}

/// VkComponentTypeKHR's FLOAT16 and FLOAT32, VkScopeKHR's WORKGROUP.
const COMPONENT_F16: i32 = 0;
const COMPONENT_F32: i32 = 1;
const SCOPE_WORKGROUP: i32 = 2;

impl Cm2Caps {
    /// From the raw Vulkan structures: the seven VkBool32 features in declaration order, the
    /// three properties, and the flexible configurations (a pure function, so that tests can
    /// feed it made-up driver answers).
    pub fn from_raw(features: [u32; 7], props: [u32; 3], flexible: Vec<Cm2Flexible>) -> Cm2Caps {
        let [workgroup_scope, flexible_dimensions, reductions, conversions, per_element_operations, tensor_addressing, block_loads] =
            features.map(|f| f != 0);
        Cm2Caps {
            workgroup_scope,
            flexible_dimensions,
            reductions,
            conversions,
            per_element_operations,
            tensor_addressing,
            block_loads,
            workgroup_scope_max_invocations: props[0],
            flexible_max_dimension: props[1],
            reserved_shared_memory: props[2],
            flexible,
        }
    }

    /// Whether the features every workgroup-scope kernel uses (workgroup scope, flexible
    /// dimensions, tensor addressing) are on, workgroups of `invocations` are allowed, and one
    /// workgroup-scope f16 x f16 -> f32 configuration of exactly that many invocations has
    /// granularities dividing every M in `ms`, N in `ns` and K in `ks` (each at most the largest
    /// flexible dimension).
    fn has_f16_config(&self, invocations: u32, ms: &[u32], ns: &[u32], ks: &[u32]) -> bool {
        let divides = |xs: &[u32], g: u32| g > 0 && xs.iter().all(|x| x.is_multiple_of(g));
        self.workgroup_scope
            && self.flexible_dimensions
            && self.tensor_addressing
            && invocations <= self.workgroup_scope_max_invocations
            && ms.iter().chain(ns).chain(ks).all(|&x| x <= self.flexible_max_dimension)
            && self.flexible.iter().any(|f| {
                f.scope == SCOPE_WORKGROUP
                    && f.invocations == invocations
                    && f.types == [COMPONENT_F16, COMPONENT_F16, COMPONENT_F32, COMPONENT_F32]
                    && !f.saturating
                    && divides(ms, f.m_granularity)
                    && divides(ns, f.n_granularity)
                    && divides(ks, f.k_granularity)
            })
    }

    /// Whether shaders/native/matmul_f16_cm2.comp compiled for a `bm` x `bn` output tile, K
    /// steps of `bk` and `invocations` per workgroup can run ([`Self::has_f16_config`] for that
    /// tile).
    pub fn fits_matmul_f16(&self, bm: u32, bn: u32, bk: u32, invocations: u32) -> bool {
        self.has_f16_config(invocations, &[bm], &[bn], &[bk])
    }

    /// Whether shaders/native/attention_f16_cm2.comp compiled for `invocations` per workgroup,
    /// `br` query rows by `bc` keys per tile and head sizes `hd` (q, k), `hdv` (v) can run: row
    /// reductions, per-element functions and use conversions (the scores' accumulator becomes an
    /// A operand) besides [`Self::has_f16_config`] for the three products: S = Q Kᵀ (br x bc,
    /// K = hd), the row sums P 1 (br x bc, K = bc) and O = P V (br x hdv, K = bc).
    pub fn fits_attention_f16(&self, invocations: u32, br: u32, bc: u32, hd: u32, hdv: u32) -> bool {
        self.reductions
            && self.per_element_operations
            && self.conversions
            && self.has_f16_config(invocations, &[br], &[bc, hdv], &[hd, bc])
    }
}

impl NativeCaps {
    /// Whether the native f16 matmul (KHR cooperative matrices) can run.
    pub fn matmul_f16(&self) -> bool {
        self.passthrough && self.coop_f16_16x16x16_f32
    }

    /// Whether the NV cooperative matrix 2 f16 matmul with this tile can run (see
    /// [`Cm2Caps::fits_matmul_f16`]); it also needs the passthrough shaders and the KHR
    /// cooperative-matrix feature (f16, on which the NV extension builds).
    pub fn matmul_f16_cm2(&self, bm: u32, bn: u32, bk: u32, invocations: u32) -> bool {
        self.passthrough
            && self.coop_f16_16x16x16_f32
            && self.cm2.as_ref().is_some_and(|c| c.fits_matmul_f16(bm, bn, bk, invocations))
    }

    /// Whether the NV cooperative matrix 2 f16 attention variant with these sizes can run (see
    /// [`Cm2Caps::fits_attention_f16`]).
    pub fn attention_f16_cm2(&self, invocations: u32, br: u32, bc: u32, hd: u32, hdv: u32) -> bool {
        self.passthrough
            && self.coop_f16_16x16x16_f32
            && self.cm2.as_ref().is_some_and(|c| c.fits_attention_f16(invocations, br, bc, hd, hdv))
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
    cm2: Option<Cm2Caps>,
    cm2_note: String,
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
        cm2,
        cm2_note,
    }
}
