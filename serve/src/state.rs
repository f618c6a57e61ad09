//! Tenants, their sessions and what each session holds (tensors, kernels), behind ids that are
//! only looked up within the caller's tenant: another tenant's id is indistinguishable from one
//! that never existed.

use crate::config::{Config, TenantConfig};
use crate::error::{ApiError, ApiResult, TOO_MANY_SESSIONS};
use crate::metrics::ServiceMetrics;
use kiln_core::{Kernel, Session, SessionLimits, Tensor};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Semaphore;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct AppState {
    pub config: Config,
    tenants: Vec<Arc<Tenant>>,
    pub metrics: ServiceMetrics,
    next_session: AtomicU64,
}

pub struct Tenant {
    pub name: String,
    tokens: Vec<String>,
    pub limits: SessionLimits,
    max_sessions: usize,
    /// Requests of this tenant on the GPU workers at once (`max_concurrent_requests`).
    pub permits: Arc<Semaphore>,
    sessions: Mutex<BTreeMap<u64, Arc<Slot>>>,
}

/// One open session and what it holds.
pub struct Slot {
    pub id: u64,
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
    pub fn new(config: Config) -> AppState {
        let tenants = config.tenants.iter().map(|t: &TenantConfig| {
            Arc::new(Tenant {
                name: t.name.clone(),
                tokens: t.tokens.clone(),
                limits: t.session_limits(),
                max_sessions: t.max_open_sessions,
                permits: Arc::new(Semaphore::new(t.max_concurrent_requests)),
                sessions: Mutex::new(BTreeMap::new()),
            })
        });
        AppState {
            tenants: tenants.collect(),
            config,
            metrics: ServiceMetrics::default(),
            next_session: AtomicU64::new(1),
        }
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

    pub fn open_session(&self, tenant: &Tenant) -> ApiResult<Arc<Slot>> {
        let mut sessions = lock(&tenant.sessions);
        if sessions.len() >= tenant.max_sessions {
            return Err(ApiError::new(
                TOO_MANY_SESSIONS,
                format!("{} sessions are open, the most this tenant may have; close one", sessions.len()),
            ));
        }
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            id,
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

impl Tenant {
    pub fn session(&self, id: &str) -> ApiResult<Arc<Slot>> {
        crate::parse::parse_id(id)
            .and_then(|n| lock(&self.sessions).get(&n).cloned())
            .ok_or_else(|| ApiError::not_found("session", id))
    }

    pub fn sessions(&self) -> Vec<Arc<Slot>> {
        lock(&self.sessions).values().cloned().collect()
    }

    pub fn remove_session(&self, id: &str) -> ApiResult<Arc<Slot>> {
        crate::parse::parse_id(id)
            .and_then(|n| lock(&self.sessions).remove(&n))
            .ok_or_else(|| ApiError::not_found("session", id))
    }
}

impl Slot {
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
