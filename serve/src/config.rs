//! The service's configuration (TOML): addresses, request limits and the tenants with their
//! tokens and limits. `parse` is pure (the fuzz target calls it); `DEFAULT_CONFIG` is what
//! `kiln serve` runs without `--config`: one tenant, `dev`, on localhost.

use kiln_core::{SessionLimits, ShaderPolicy};
use serde::Deserialize;
use std::net::SocketAddr;

/// The embedded default: localhost only, one `dev` tenant. Its token is not in the file: it is
/// `KILN_SERVE_TOKEN` when set, else a random one printed at start (`apply_dev_token`).
pub const DEFAULT_CONFIG: &str = r#"
listen = "127.0.0.1:8080"
metrics_listen = "127.0.0.1:9090"
max_body_bytes = 67108864
request_timeout_ms = 30000
shutdown_grace_ms = 10000
header_read_timeout_ms = 10000
body_read_timeout_ms = 10000
max_connections = 1024
max_body_bytes_in_flight = 536870912

[[tenants]]
name = "dev"
tokens = []
max_open_sessions = 16
max_concurrent_requests = 4
"#;

/// The environment variable the `dev` tenant's token is read from (default config only).
pub const DEV_TOKEN_ENV: &str = "KILN_SERVE_TOKEN";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The API (`/v1/...`, `/health`, `/ready`).
    pub listen: SocketAddr,
    /// `/metrics` (and `/health`, `/ready` again), on its own port so that it need not be exposed
    /// with the API.
    pub metrics_listen: SocketAddr,
    #[serde(default = "default_body")]
    pub max_body_bytes: usize,
    #[serde(default = "default_timeout")]
    pub request_timeout_ms: u64,
    /// How long shutdown waits for in-flight requests; past it they are answered 503
    /// SHUTTING_DOWN and the process exits (work still on the GPU is not waited for).
    #[serde(default = "default_grace")]
    pub shutdown_grace_ms: u64,
    /// Time a client has to send a whole request head, from the connection's start or the end
    /// of its previous response (so also how long an idle keep-alive connection stays open).
    #[serde(default = "default_header_timeout")]
    pub header_read_timeout_ms: u64,
    /// Time a request body may go without sending a byte before it is refused (408).
    #[serde(default = "default_body_timeout")]
    pub body_read_timeout_ms: u64,
    /// Connections open at once on each listener, further capped below the process's open-file
    /// limit (RLIMIT_NOFILE less `server::FD_RESERVE`). At the cap, the connection idle the
    /// longest is closed for a new one.
    #[serde(default = "default_connections")]
    pub max_connections: usize,
    /// Bytes of request bodies being read or held at once, all tenants together (each tenant
    /// also has its own `max_body_bytes_in_flight`). A body reserves its Content-Length, or
    /// `max_body_bytes` when it declares none, before a byte is read; a request that cannot
    /// reserve waits (within its time limit).
    #[serde(default = "default_body_in_flight")]
    pub max_body_bytes_in_flight: u64,
    /// The GPUs sessions are placed on, by adapter index (`kiln devices`); absent: every
    /// adapter of the best kind this machine has, or the one `KILN_ADAPTER` picks
    /// (serve/src/placement.rs).
    #[serde(default)]
    pub devices: Option<Vec<usize>>,
    pub tenants: Vec<TenantConfig>,
}

fn default_body() -> usize {
    64 << 20
}
fn default_timeout() -> u64 {
    30_000
}
fn default_grace() -> u64 {
    10_000
}
fn default_header_timeout() -> u64 {
    10_000
}
fn default_body_timeout() -> u64 {
    10_000
}
fn default_connections() -> usize {
    1024
}
fn default_body_in_flight() -> u64 {
    512 << 20
}
fn default_tenant_body_in_flight() -> u64 {
    128 << 20
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub name: String,
    /// Bearer tokens that act as this tenant (several, so that a token can be rotated).
    pub tokens: Vec<String>,
    /// Bytes one session's live tensors may hold.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// Operations (real work: loop iterations of kernels, multiply-adds of matmul, conv and
    /// attention, elements of the rest) one session may run in all; 0: no limit.
    #[serde(default = "default_max_ops")]
    pub max_ops_total: u64,
    /// Operations one dispatch (or one built-in op) may run, bounded before it is submitted;
    /// 0: no per-dispatch limit.
    #[serde(default = "default_max_ops_per_dispatch")]
    pub max_ops_per_dispatch: u64,
    /// Loop iterations per invocation of a tenant kernel (0: Kiln's default budget).
    #[serde(default = "default_loop_iterations")]
    pub max_loop_iterations: u32,
    /// GPU time one session's work may take in all, in ms (timestamp queries where the adapter
    /// has them, else the wall clock of its waits); 0: no budget (the request time limit still
    /// bounds each request).
    #[serde(default)]
    pub max_gpu_time_ms: u64,
    /// Kernels one session may hold at once (each also charged against `max_bytes`); 0: no
    /// limit.
    #[serde(default = "default_max_kernels")]
    pub max_kernels: u32,
    #[serde(default = "default_sessions")]
    pub max_open_sessions: usize,
    /// Requests of this tenant running at once; more wait for a slot (within the request time
    /// limit), so a flooding tenant queues behind itself and no one else.
    #[serde(default = "default_concurrency")]
    pub max_concurrent_requests: usize,
    /// Bytes of this tenant's request bodies being read or held at once (see the server-wide
    /// `max_body_bytes_in_flight`). A request takes its concurrency slot before its body is read,
    /// so a tenant's stalled uploads wait for its own slots, not in the server's memory.
    #[serde(default = "default_tenant_body_in_flight")]
    pub max_body_bytes_in_flight: u64,
    #[serde(default)]
    pub shader: ShaderConfig,
    /// The devices this tenant's sessions may be placed on (a subset of the server's); absent:
    /// all of them. One device pins the tenant there.
    #[serde(default)]
    pub devices: Option<Vec<usize>>,
}

fn default_max_bytes() -> u64 {
    1 << 30
}
/// 10^12 operations: a session's whole work, ~100 dispatches at the per-dispatch bound.
fn default_max_ops() -> u64 {
    1_000_000_000_000
}
/// 10^10 operations per dispatch: ~12 s of lavapipe on 2 cores (it runs ~8e8 loop iterations
/// or conv multiply-adds a second), milliseconds of a data-centre GPU, so one request cannot
/// hold the device past the request time limit. A kernel with loops is charged its loop budget
/// per invocation: at the default 2^20 iterations that is ~9,500 invocations a dispatch.
fn default_max_ops_per_dispatch() -> u64 {
    10_000_000_000
}
fn default_max_kernels() -> u32 {
    kiln_core::SUGGESTED_MAX_KERNELS
}
fn default_loop_iterations() -> u32 {
    1 << 20
}
fn default_sessions() -> usize {
    16
}
fn default_concurrency() -> usize {
    4
}

/// `kiln_core::ShaderPolicy` as TOML (0 means no limit, as there).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShaderConfig {
    #[serde(default = "default_source")]
    pub max_source_bytes: usize,
    #[serde(default = "default_wg")]
    pub max_workgroup_invocations: u32,
    #[serde(default = "default_bindings")]
    pub max_bindings: u32,
    #[serde(default)]
    pub allow_f16: bool,
    #[serde(default)]
    pub allow_atomics: bool,
    #[serde(default = "yes")]
    pub allow_workgroup_memory: bool,
    #[serde(default)]
    pub allow_subgroups: bool,
}

fn default_source() -> usize {
    64 << 10
}
fn default_wg() -> u32 {
    256
}
fn default_bindings() -> u32 {
    8
}
fn yes() -> bool {
    true
}

impl Default for ShaderConfig {
    fn default() -> ShaderConfig {
        ShaderConfig {
            max_source_bytes: default_source(),
            max_workgroup_invocations: default_wg(),
            max_bindings: default_bindings(),
            allow_f16: false,
            allow_atomics: false,
            allow_workgroup_memory: true,
            allow_subgroups: false,
        }
    }
}

impl TenantConfig {
    /// The limits every session of this tenant opens with.
    pub fn session_limits(&self) -> SessionLimits {
        let s = &self.shader;
        SessionLimits {
            max_bytes: self.max_bytes,
            max_ops_per_dispatch: self.max_ops_per_dispatch,
            max_ops_total: self.max_ops_total,
            max_loop_iterations: self.max_loop_iterations,
            max_gpu_time_ms: self.max_gpu_time_ms,
            max_kernels: self.max_kernels,
            policy: ShaderPolicy {
                max_source_bytes: s.max_source_bytes,
                max_workgroup_invocations: s.max_workgroup_invocations,
                max_bindings: s.max_bindings,
                allow_f16: s.allow_f16,
                allow_atomics: s.allow_atomics,
                allow_workgroup_memory: s.allow_workgroup_memory,
                allow_subgroups: s.allow_subgroups,
            },
        }
    }
}

/// Parses and checks a configuration. The message names the problem, never a token.
pub fn parse(text: &str) -> Result<Config, String> {
    let c: Config = toml::from_str(text).map_err(|e| format!("config: {}", e.message()))?;
    check(&c)?;
    Ok(c)
}

fn check(c: &Config) -> Result<(), String> {
    if c.tenants.is_empty() {
        return Err("config: no tenants".into());
    }
    if c.devices.as_ref().is_some_and(|d| d.is_empty()) {
        return Err("config: devices must name at least one device (leave it out for every GPU)".into());
    }
    if c.max_body_bytes == 0 || c.request_timeout_ms == 0 {
        return Err("config: max_body_bytes and request_timeout_ms must be positive".into());
    }
    if c.header_read_timeout_ms == 0 || c.body_read_timeout_ms == 0 || c.max_connections == 0 {
        return Err("config: header_read_timeout_ms, body_read_timeout_ms and max_connections must be positive".into());
    }
    // A body of the largest size must be able to reserve its bytes, or it would wait forever.
    if c.max_body_bytes_in_flight < c.max_body_bytes as u64 {
        return Err("config: max_body_bytes_in_flight must be at least max_body_bytes".into());
    }
    let mut names = std::collections::HashSet::new();
    let mut tokens = std::collections::HashSet::new();
    for t in &c.tenants {
        if t.name.is_empty() || !names.insert(t.name.as_str()) {
            return Err(format!("config: tenant names must be non-empty and unique ({:?})", t.name));
        }
        if t.max_concurrent_requests == 0 || t.max_open_sessions == 0 {
            return Err(format!(
                "config: tenant {:?}: max_concurrent_requests and max_open_sessions must be positive",
                t.name
            ));
        }
        if t.max_body_bytes_in_flight < c.max_body_bytes as u64 {
            return Err(format!(
                "config: tenant {:?}: max_body_bytes_in_flight must be at least max_body_bytes",
                t.name
            ));
        }
        if t.devices.as_ref().is_some_and(|d| d.is_empty()) {
            return Err(format!("config: tenant {:?}: devices must name at least one device", t.name));
        }
        if let (Some(server), Some(own)) = (&c.devices, &t.devices) {
            if let Some(d) = own.iter().find(|d| !server.contains(d)) {
                return Err(format!("config: tenant {:?}: device {d} is not one of the server's devices", t.name));
            }
        }
        for tok in &t.tokens {
            // Short tokens are guessable; a duplicate would make the tenant ambiguous.
            if tok.len() < 16 {
                return Err(format!("config: tenant {:?} has a token shorter than 16 characters", t.name));
            }
            if !tokens.insert(tok.as_str()) {
                return Err(format!("config: tenant {:?} shares a token with another tenant", t.name));
            }
        }
    }
    Ok(())
}

/// The default config's `dev` tenant gets `KILN_SERVE_TOKEN`, or a fresh random token; returns
/// the token and whether it was generated (then the caller prints it).
pub fn apply_dev_token(c: &mut Config) -> Result<(String, bool), String> {
    let (token, generated) = match std::env::var(DEV_TOKEN_ENV) {
        Ok(t) if !t.is_empty() => (t, false),
        _ => (random_token(), true),
    };
    let dev = c.tenants.iter_mut().find(|t| t.name == "dev").ok_or("config: no dev tenant")?;
    dev.tokens = vec![token.clone()];
    check(c)?;
    Ok((token, generated))
}

/// 128 random bits as hex. The std hasher's keys come from the OS's random source, which is
/// all a token needs (no crate for it).
pub fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::from("kiln_");
    for i in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_parses_once_it_has_a_token() {
        let mut c: Config = toml::from_str(DEFAULT_CONFIG).unwrap();
        assert_eq!(c.tenants[0].max_bytes, 1 << 30);
        assert_eq!(c.tenants[0].max_ops_total, 1_000_000_000_000);
        assert_eq!(c.tenants[0].max_ops_per_dispatch, 10_000_000_000);
        c.tenants[0].tokens = vec![random_token()];
        check(&c).unwrap();
        assert_ne!(random_token(), random_token());
    }

    #[test]
    fn bad_configs_are_refused_without_echoing_tokens() {
        assert!(parse("listen = 1").is_err());
        let two = r#"listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"
[[tenants]]
name = "a"
tokens = ["secret-token-0123456789"]
[[tenants]]
name = "b"
tokens = ["secret-token-0123456789"]
"#;
        let e = parse(two).unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(parse(&two.replace("name = \"b\"", "name = \"b\"\nbogus = 1")).is_err());
        let short = two.replace("secret-token-0123456789\"]\n[[", "short\"]\n[[");
        assert!(parse(&short).unwrap_err().contains("shorter"));
    }

    #[test]
    fn the_kubernetes_configmap_holds_a_valid_config() {
        let yaml = include_str!("../../deploy/k8s/configmap.yaml");
        let body = yaml.split("serve.toml.in: |\n").nth(1).unwrap();
        let text: String = body.lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
        let text = text
            .replace("${TEAM_A_TOKEN}", "a-token-of-enough-length")
            .replace("${TEAM_B_TOKEN}", "b-token-of-enough-length");
        let c = parse(&text).unwrap();
        assert_eq!(c.tenants.len(), 2);
        assert!(!c.tenants[1].shader.allow_atomics);
    }
}
