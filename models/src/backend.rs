//! Where [`crate::CausalLM`] runs: on the GPU through kiln-core, or natively on the host CPU
//! ([`crate::cpu`]) when the only adapter is a software one.
//!
//! Measured on a 2-core machine without a GPU (BENCHMARKS.md): SmolLM2-135M Q4_1 decodes at
//! about 1 token/s through lavapipe (each of its ~212 dispatches a token pays lavapipe's
//! per-dispatch cost, and the WGSL runs through llvmpipe) and at tens of tokens/s on the host
//! path, so `Auto` takes the host path whenever the adapter is a CPU.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The host CPU when the adapter kiln-core picks is a CPU (or there is none), else the GPU.
    #[default]
    Auto,
    /// kiln-core's device, whatever its adapter (lavapipe included).
    Gpu,
    /// The host CPU; no GPU device is created.
    Cpu,
}

impl Backend {
    pub fn parse(s: &str) -> Option<Backend> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Some(Backend::Auto),
            "gpu" => Some(Backend::Gpu),
            "cpu" => Some(Backend::Cpu),
            _ => None,
        }
    }

    /// `KILN_MODELS_BACKEND` (`auto`, `cpu` or `gpu`; README's settings table), `Auto` when
    /// unset; an unknown value is an error (a typo should not silently pick the other path).
    pub fn from_env() -> crate::Result<Backend> {
        match std::env::var("KILN_MODELS_BACKEND") {
            Err(_) => Ok(Backend::Auto),
            Ok(s) => Backend::parse(&s).ok_or_else(|| {
                crate::ModelError::Unsupported(format!("KILN_MODELS_BACKEND={s:?}: expected auto, cpu or gpu"))
            }),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Auto => "auto",
            Backend::Gpu => "gpu",
            Backend::Cpu => "cpu",
        })
    }
}

/// Whether kiln-core's adapter description `device_type` (wgpu's `DeviceType` by name) is a
/// CPU one: lavapipe and llvmpipe report `Cpu`.
pub(crate) fn is_cpu_adapter(device_type: &str) -> bool {
    device_type.eq_ignore_ascii_case("cpu")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_names_and_refuses_others() {
        assert_eq!(Backend::parse(" CPU "), Some(Backend::Cpu));
        assert_eq!(Backend::parse("gpu"), Some(Backend::Gpu));
        assert_eq!(Backend::parse("auto"), Some(Backend::Auto));
        assert_eq!(Backend::parse("vulkan"), None);
        for b in [Backend::Auto, Backend::Gpu, Backend::Cpu] {
            assert_eq!(Backend::parse(&b.to_string()), Some(b));
        }
        assert!(is_cpu_adapter("Cpu"));
        assert!(!is_cpu_adapter("DiscreteGpu"));
    }
}
