//! Tenants, their sessions and what each session holds (tensors, kernels), behind ids that are
//! only looked up within the caller's tenant: another tenant's id is indistinguishable from one
//! that never existed.

use crate::config::{Config, TenantConfig};
use crate::error::{ApiError, ApiResult, TOO_MANY_SESSIONS};
use crate::metrics::ServiceMetrics;
use crate::placement::{self, Load, ServedDevice};
use kiln_core::{Kernel, Session, SessionLimits, Tensor};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct AppState {
    pub config: Config,
    tenants: Vec<Arc<Tenant>>,
    pub metrics: ServiceMetrics,
    /// Bytes of request bodies in flight, all tenants (`BodyBytes`).
    pub body_bytes: BodyBytes,
    /// Set when the shutdown grace period is over: requests still running answer SHUTTING_DOWN.
    pub grace_over: watch::Sender<bool>,
    pub readiness: Arc<crate::ready::Readiness>,
    /// The GPUs sessions are placed on (`placement`).
    pub devices: Vec<ServedDevice>,
    /// Held while a session is placed and inserted, so that two opens at once see each other.
    placing: Mutex<()>,
}

/// A budget of bytes as semaphore permits of `UNIT` bytes each (tokio counts permits in u32).
pub struct BodyBytes {
    sem: Arc<Semaphore>,
    total: u64,
}

/// The granularity of body byte budgets.
const UNIT: u64 = 1024;

impl BodyBytes {
    pub fn new(bytes: u64) -> BodyBytes {
        let units = bytes.div_ceil(UNIT).min(Semaphore::MAX_PERMITS as u64 >> 1);
        BodyBytes { sem: Arc::new(Semaphore::new(units as usize)), total: units * UNIT }
    }
    /// Waits until `bytes` are free and holds them until the permit is dropped.
    pub async fn reserve(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        let units = u32::try_from(bytes.div_ceil(UNIT).max(1)).ok()?;
        self.sem.clone().acquire_many_owned(units).await.ok()
    }
    /// Bytes reserved now.
    pub fn in_use(&self) -> u64 {
        self.total - self.sem.available_permits() as u64 * UNIT
    }
}

pub struct Tenant {
    pub name: String,
    tokens: Vec<String>,
    pub limits: SessionLimits,
    max_sessions: usize,
    /// Requests of this tenant on the GPU workers at once (`max_concurrent_requests`).
    pub permits: Arc<Semaphore>,
    /// Bytes of this tenant's request bodies in flight.
    pub body_bytes: BodyBytes,
    /// The devices this tenant's sessions may be placed on.
    pub devices: Vec<usize>,
    sessions: Mutex<BTreeMap<u64, Arc<Slot>>>,
}

/// One open session and what it holds.
pub struct Slot {
    pub id: u64,
    /// The adapter index of the device its tensors and kernels live on.
    pub device: usize,
    pub session: Session,
    objects: Mutex<Objects>,
}

#[derive(Default)]
struct Objects {
    next: u64,
    tensors: BTreeMap<u64, Tensor>,
    kernels: HashMap<u64, Arc<Kernel>>,
}

/// Compares without an early exit, so the time taken does not tell how much of a token matched.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl AppState {
    /// The state for `config`, its devices resolved against this machine's adapters (an index
    /// that is no adapter here is an error).
    pub fn new(config: Config) -> Result<AppState, String> {
        let devices = placement::resolve(config.devices.as_deref())?;
        let served: Vec<usize> = devices.iter().map(|d| d.index).collect();
        for t in &config.tenants {
            if let Some(d) = t.devices.iter().flatten().find(|d| !served.contains(d)) {
                return Err(format!(
                    "config: tenant {:?}: device {d} is not one this server serves ({served:?})",
                    t.name
                ));
            }
        }
        let tenants = config.tenants.iter().map(|t: &TenantConfig| {
            Arc::new(Tenant {
                devices: t.devices.clone().unwrap_or_else(|| served.clone()),
                name: t.name.clone(),
                tokens: t.tokens.clone(),
                limits: t.session_limits(),
                max_sessions: t.max_open_sessions,
                permits: Arc::new(Semaphore::new(t.max_concurrent_requests)),
                body_bytes: BodyBytes::new(t.max_body_bytes_in_flight),
                sessions: Mutex::new(BTreeMap::new()),
            })
        });
        Ok(AppState {
            tenants: tenants.collect(),
            body_bytes: BodyBytes::new(config.max_body_bytes_in_flight),
            config,
            metrics: ServiceMetrics::default(),
            grace_over: watch::channel(false).0,
            readiness: Arc::new(crate::ready::Readiness::default()),
            devices,
            placing: Mutex::new(()),
        })
    }

    /// Each served device with its live sessions and the bytes they hold, all tenants.
    pub fn device_loads(&self) -> Vec<(ServedDevice, Load)> {
        let mut loads: Vec<(ServedDevice, Load)> = self.devices.iter().map(|d| (d.clone(), Load::default())).collect();
        for t in &self.tenants {
            for s in lock(&t.sessions).values() {
                if let Some((_, l)) = loads.iter_mut().find(|(d, _)| d.index == s.device) {
                    l.sessions += 1;
                    l.bytes += s.session.stats().bytes_in_use;
                }
            }
        }
        loads
    }

    /// The tenant a bearer token belongs to (every token is compared, in constant time each).
    pub fn tenant_for(&self, token: &str) -> Option<Arc<Tenant>> {
        let mut found = None;
        for t in &self.tenants {
            for k in &t.tokens {
                if same(k, token) {
                    found = Some(t.clone());
                }
            }
        }
        found
    }

    /// Opens a session of `tenant` on `requested` (which must be one of the tenant's devices),
    /// else on its least loaded device (`placement::place`).
    pub fn open_session(&self, tenant: &Tenant, requested: Option<usize>) -> ApiResult<Arc<Slot>> {
        let _placing = lock(&self.placing);
        let loads = self.device_loads();
        let device = placement::place(&tenant.devices, requested, |d| {
            loads.iter().find(|(s, _)| s.index == d).map(|(_, l)| *l).unwrap_or_default()
        })?;
        let mut sessions = lock(&tenant.sessions);
        if sessions.len() >= tenant.max_sessions {
            return Err(ApiError::new(
                TOO_MANY_SESSIONS,
                format!("{} sessions are open, the most this tenant may have; close one", sessions.len()),
            ));
        }
        // Random, not a counter: an id must not tell how many sessions others have opened.
        let id = loop {
            let id = random_id();
            if !sessions.contains_key(&id) {
                break id;
            }
        };
        let slot = Arc::new(Slot {
            id,
            device,
            session: Session::new(tenant.limits.clone()),
            objects: Mutex::new(Objects::default()),
        });
        sessions.insert(id, slot.clone());
        Ok(slot)
    }

    /// Every open session of every tenant, taken out (for shutdown, which then closes them).
    pub fn take_all_sessions(&self) -> Vec<Arc<Slot>> {
        self.tenants.iter().flat_map(|t| std::mem::take(&mut *lock(&t.sessions)).into_values()).collect()
    }
}

/// A random session id below 2^53 (exact as a JSON number in every language), never 0.
fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState's keys come from the OS's random source; each one differs.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (h.finish() >> 11).max(1)
}

/// The one answer for a session that is not the caller's here. It says where sessions live,
/// for a client behind a load balancer whose session's server has stopped (docs/DESIGN.md,
/// "Replicas").
fn no_session(id: &str) -> ApiError {
    ApiError::new(
        crate::error::NOT_FOUND,
        format!(
            "no session {id:?} on this server: a session lives in the memory of the server that opened it \
             until it is closed or that server stops; open a new one"
        ),
    )
}

impl Tenant {
    pub fn session(&self, id: &str) -> ApiResult<Arc<Slot>> {
        crate::parse::parse_id(id).and_then(|n| lock(&self.sessions).get(&n).cloned()).ok_or_else(|| no_session(id))
    }

    pub fn sessions(&self) -> Vec<Arc<Slot>> {
        lock(&self.sessions).values().cloned().collect()
    }

    pub fn remove_session(&self, id: &str) -> ApiResult<Arc<Slot>> {
        crate::parse::parse_id(id).and_then(|n| lock(&self.sessions).remove(&n)).ok_or_else(|| no_session(id))
    }
}

impl Slot {
    /// The device of this session (re-created after a loss; its tensors are gone then).
    pub fn device(&self) -> ApiResult<Arc<kiln_core::Device>> {
        placement::device(self.device)
    }

    /// `message` (from Kiln) with the runtime's own session number, a process-wide counter,
    /// replaced by this session's id, so that no message tells how many sessions exist.
    pub fn own_message(&self, message: &str) -> String {
        replace_number_after(message, "session ", self.session.id(), self.id)
    }

    pub fn tensor(&self, id: &str) -> ApiResult<Tensor> {
        self.find_tensor(crate::parse::parse_id(id)).ok_or_else(|| ApiError::not_found("tensor", id))
    }

    pub fn tensor_by_number(&self, id: u64) -> ApiResult<Tensor> {
        self.find_tensor(Some(id)).ok_or_else(|| ApiError::not_found("tensor", &id.to_string()))
    }

    fn find_tensor(&self, id: Option<u64>) -> Option<Tensor> {
        id.and_then(|n| lock(&self.objects).tensors.get(&n).cloned())
    }

    pub fn add_tensor(&self, t: Tensor) -> u64 {
        let mut o = lock(&self.objects);
        o.next += 1;
        let id = o.next;
        o.tensors.insert(id, t);
        id
    }

    pub fn remove_tensor(&self, id: &str) -> ApiResult<Tensor> {
        crate::parse::parse_id(id)
            .and_then(|n| lock(&self.objects).tensors.remove(&n))
            .ok_or_else(|| ApiError::not_found("tensor", id))
    }

    pub fn tensors(&self) -> Vec<(u64, Tensor)> {
        lock(&self.objects).tensors.iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    pub fn kernel(&self, id: &str) -> ApiResult<Arc<Kernel>> {
        crate::parse::parse_id(id)
            .and_then(|n| lock(&self.objects).kernels.get(&n).cloned())
            .ok_or_else(|| ApiError::not_found("kernel", id))
    }

    pub fn add_kernel(&self, k: Kernel) -> u64 {
        let mut o = lock(&self.objects);
        o.next += 1;
        let id = o.next;
        o.kernels.insert(id, Arc::new(k));
        id
    }

    pub fn counts(&self) -> (usize, usize) {
        let o = lock(&self.objects);
        (o.tensors.len(), o.kernels.len())
    }

    /// Drops the service's handles, then closes the session (frees its memory at once).
    pub fn close(&self) {
        *lock(&self.objects) = Objects::default();
        self.session.close();
    }
}

/// `text` with every `prefix` followed by exactly the number `from` changed to `to`.
fn replace_number_after(text: &str, prefix: &str, from: u64, to: u64) -> String {
    let (from, to) = (from.to_string(), to.to_string());
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        out.push_str(&rest[..at + prefix.len()]);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if after[..digits] == from {
            out.push_str(&to);
        } else {
            out.push_str(&after[..digits]);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_whole_number_is_replaced() {
        let r = |t: &str| super::replace_number_after(t, "session ", 17, 9001);
        assert_eq!(r("session 17 has run 5; session 17's limit"), "session 9001 has run 5; session 9001's limit");
        assert_eq!(r("session 170 and session 1 and session x"), "session 170 and session 1 and session x");
        assert_eq!(r("no session"), "no session");
    }
}
