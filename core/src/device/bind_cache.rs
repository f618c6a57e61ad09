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

use crate::id_hash::IdHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// Bind groups in one generation: when it is full it becomes the old one (the previous old one
/// dropped), and a hit there moves the entry back. A SmolLM2 decode token binds 212 distinct
/// groups; this keeps a few models' worth.
pub const BIND_GROUP_CACHE_ENTRIES: usize = 1024;

/// One binding of a bind group: slot, buffer, offset, size (None: the whole buffer).
pub(super) type Bound = (u32, wgpu::Buffer, u64, Option<u64>);

/// A binding as a dispatch names it (borrowed: a hit clones nothing).
pub(super) type BoundRef<'a> = (u32, &'a wgpu::Buffer, u64, Option<u64>);

/// A cached group and what it binds (its buffers' handles keep their ids from being reused).
struct Entry {
    layout: wgpu::BindGroupLayout,
    bound: Vec<Bound>,
    group: wgpu::BindGroup,
    /// The key of the group asked for right after this one, the last time (see `BindCache`).
    next: Option<u64>,
}

impl Entry {
    fn matches(&self, layout: &wgpu::BindGroupLayout, bound: &[BoundRef<'_>]) -> bool {
        self.layout == *layout
            && self.bound.len() == bound.len()
            && self.bound.iter().zip(bound).all(|(a, b)| a.0 == b.0 && a.1 == *b.1 && a.2 == b.2 && a.3 == b.3)
    }
}

/// Entries by the hash of what they bind (`key_hash`). Two keys of one hash (never seen: 64
/// bits) would take turns in the slot, each a miss that creates its group anew: correct, and
/// no second level of indirection on the hot path.
type Map = HashMap<u64, Entry, BuildHasherDefault<IdHasher>>;

fn key_hash(layout: &wgpu::BindGroupLayout, bound: &[BoundRef<'_>]) -> u64 {
    let mut h = IdHasher::default();
    layout.hash(&mut h);
    for b in bound {
        h.write_u32(b.0);
        b.1.hash(&mut h);
        h.write_u64(b.2);
        h.write_u64(b.3.map_or(u64::MAX, |s| s));
    }
    h.finish()
}

/// The lookup first tries the group that followed the last one handed out the last time round:
/// a decode token asks for the same groups in the same order as the token before, and checking
/// a predicted entry compares handles by their `Arc`s' addresses, where hashing the key reads
/// each handle's id behind its `Arc` (on lavapipe, `perf`: the hashing's loads were most of
/// the cache's 25% of a decode token's recording). A wrong prediction costs one map lookup.
#[derive(Default)]
pub(super) struct BindCache {
    current: Map,
    old: Map,
    /// The key of the group handed out last (in `current`).
    last: Option<u64>,
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
    /// The bind group of `layout` binding `bound`, created by `create` on a miss.
    pub(super) fn get_or_create(
        &mut self,
        layout: &wgpu::BindGroupLayout,
        bound: &[BoundRef<'_>],
        create: impl FnOnce() -> wgpu::BindGroup,
    ) -> wgpu::BindGroup {
        let predicted = self.last.and_then(|l| self.current.get(&l)).and_then(|e| e.next);
        if let Some(e) = predicted.and_then(|p| self.current.get(&p)).filter(|e| e.matches(layout, bound)) {
            self.hits += 1;
            self.last = predicted;
            return e.group.clone();
        }
        let h = key_hash(layout, bound);
        if let Some(l) = self.last.and_then(|l| self.current.get_mut(&l)) {
            l.next = Some(h);
        }
        self.last = Some(h);
        if let Some(e) = self.current.get(&h).filter(|e| e.matches(layout, bound)) {
            self.hits += 1;
            return e.group.clone();
        }
        let entry = match self.old.remove(&h).filter(|e| e.matches(layout, bound)) {
            Some(e) => {
                self.hits += 1;
                e
            }
            None => {
                self.misses += 1;
                Entry {
                    layout: layout.clone(),
                    bound: bound.iter().map(|b| (b.0, b.1.clone(), b.2, b.3)).collect(),
                    group: create(),
                    next: None,
                }
            }
        };
        if self.current.len() >= BIND_GROUP_CACHE_ENTRIES {
            self.old = std::mem::take(&mut self.current);
        }
        let group = entry.group.clone();
        self.current.insert(h, entry);
        group
    }

    /// Drops every entry that binds one of `destroyed` (buffers Kiln destroyed).
    pub(super) fn forget(&mut self, destroyed: &[wgpu::Buffer]) {
        if destroyed.is_empty() {
            return;
        }
        // A buffer hashes and compares by its wgpu id, never by its mutable mapping state.
        #[allow(clippy::mutable_key_type)]
        let gone: HashSet<&wgpu::Buffer> = destroyed.iter().collect();
        for map in [&mut self.current, &mut self.old] {
            map.retain(|_, e| !e.bound.iter().any(|b| gone.contains(&b.1)));
        }
    }

    pub(super) fn stats(&self) -> BindGroupStats {
        BindGroupStats { hits: self.hits, misses: self.misses, entries: (self.current.len() + self.old.len()) as u64 }
    }
}
