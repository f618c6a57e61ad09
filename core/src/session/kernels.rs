//! What a session's user kernels cost it: a place among `SessionLimits::max_kernels` and
//! `KERNEL_CHARGE_BYTES` of its memory quota, from its compile until the `Kernel` drops
//! (issue 28: compiled kernels were charged nothing, so a tenant could hold any number).

use super::{Counters, SessionInner, KERNEL_CHARGE_BYTES};
use crate::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

impl SessionInner {
    /// QUOTA_EXCEEDED when the session already holds `max_kernels` kernels (checked before a
    /// compile, so that a session at its limit spends no compile time; `charge_kernel` decides).
    pub(crate) fn check_kernel_room(&self) -> Result<()> {
        let max = self.limits.max_kernels as u64;
        let n = self.counters.kernels_alive.load(Ordering::Relaxed);
        if max > 0 && n >= max {
            return Err(self.kernel_limit_error(n));
        }
        Ok(())
    }

    fn kernel_limit_error(&self, n: u64) -> Error {
        self.limit_hit(
            &self.counters.quota_exceeded,
            Error::QuotaExceeded(format!(
                "session {} holds {n} kernels, its limit (max_kernels); drop one to compile another",
                self.id
            )),
        )
    }

    /// Reserves a compiled kernel's place and bytes: QUOTA_EXCEEDED (nothing reserved) over
    /// `max_kernels` or over `max_bytes`. `release_kernel` gives them back.
    pub(crate) fn charge_kernel(&self) -> Result<()> {
        self.check_open()?;
        let c: &Counters = &self.counters;
        let max = self.limits.max_kernels as u64;
        let taken = c
            .kernels_alive
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (max == 0 || n < max).then_some(n + 1));
        if let Err(n) = taken {
            return Err(self.kernel_limit_error(n));
        }
        if let Err(e) = self.charge_bytes(KERNEL_CHARGE_BYTES) {
            saturating_dec(&c.kernels_alive, 1);
            return Err(match e {
                Error::QuotaExceeded(m) => {
                    Error::QuotaExceeded(format!("a kernel is charged {KERNEL_CHARGE_BYTES} bytes of the quota: {m}"))
                }
                e => e,
            });
        }
        Ok(())
    }

    /// A kernel charged by `charge_kernel` was dropped. Nothing once the
    /// session closed: closing gave everything back.
    pub(crate) fn release_kernel(&self) {
        if self.is_closed() {
            return;
        }
        saturating_dec(&self.counters.kernels_alive, 1);
        saturating_dec(&self.counters.bytes_in_use, KERNEL_CHARGE_BYTES);
    }
}

/// Subtracts without wrapping: a close that zeroed the counter may race a release.
fn saturating_dec(a: &AtomicU64, by: u64) {
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(by)));
}
