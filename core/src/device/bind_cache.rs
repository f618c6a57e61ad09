//! Bind groups kept across dispatches. Creating one per dispatch was the largest share of the
//! host's recording time (a SmolLM2-shaped decode token on lavapipe, `perf`: 53% of it inside
//! `create_bind_group`, issue 29), while a decode token binds the same buffers as the token
//! before: the pool hands its freed buffers back in the same order. A bind group is keyed by its
//! layout and what it binds (buffers, offsets, sizes; a parameter block bound through a dynamic
//! offset leaves its offset out, see `pipeline::Pipeline::dynamic_params`).
//!
//! Safety: a key holds its buffers' handles, so a buffer's id cannot be reused while an entry
//! names it. A buffer the pool hands to another owner is the same buffer and the bind group
//! stays valid; every buffer Kiln destroys (the pool past its cap or emptied, a closed
//! session's) has its entries dropped (`forget`), so no entry outlives its buffer and none
//! keeps a destroyed buffer's handle. Revoked session buffers are refused before any lookup
//! (`check_not_revoked`). The cache is bounded: two generations of `BIND_GROUP_CACHE_ENTRIES`.

use std::collections::{HashMap, HashSet};

/// Bind groups in one generation: when it is full it becomes the old one (the previous old one
/// dropped), and a hit there moves the entry back. A SmolLM2 decode token binds 212 distinct
/// groups; this keeps a few models' worth.
pub const BIND_GROUP_CACHE_ENTRIES: usize = 1024;

/// One binding of a bind group: slot, buffer, offset, size (None: the whole buffer).
pub(super) type Bound = (u32, wgpu::Buffer, u64, Option<u64>);

#[derive(PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) layout: wgpu::BindGroupLayout,
    pub(super) bound: Vec<Bound>,
}

#[derive(Default)]
pub(super) struct BindCache {
    current: HashMap<Key, wgpu::BindGroup>,
    old: HashMap<Key, wgpu::BindGroup>,
    hits: u64,
    misses: u64,
}

/// Hits, misses and entries of a device's bind-group cache (`Device::bind_group_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BindGroupStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: u64,
}

impl BindCache {
    /// The bind group for `key`, created by `create` on a miss.
    pub(super) fn get_or_create(&mut self, key: Key, create: impl FnOnce(&Key) -> wgpu::BindGroup) -> wgpu::BindGroup {
        if let Some(bg) = self.current.get(&key) {
            self.hits += 1;
            return bg.clone();
        }
        let bg = match self.old.remove(&key) {
            Some(bg) => {
                self.hits += 1;
                bg
            }
            None => {
                self.misses += 1;
                create(&key)
            }
        };
        if self.current.len() >= BIND_GROUP_CACHE_ENTRIES {
            self.old = std::mem::take(&mut self.current);
        }
        self.current.insert(key, bg.clone());
        bg
    }

    /// Drops every entry that binds one of `destroyed` (buffers Kiln destroyed).
    pub(super) fn forget(&mut self, destroyed: &[wgpu::Buffer]) {
        if destroyed.is_empty() {
            return;
        }
        let gone: HashSet<&wgpu::Buffer> = destroyed.iter().collect();
        for map in [&mut self.current, &mut self.old] {
            map.retain(|k, _| !k.bound.iter().any(|b| gone.contains(&b.1)));
        }
    }

    pub(super) fn stats(&self) -> BindGroupStats {
        BindGroupStats { hits: self.hits, misses: self.misses, entries: (self.current.len() + self.old.len()) as u64 }
    }
}
