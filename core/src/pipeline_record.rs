//! Kiln's own record of the built-in pipelines a workload builds, kept with the persistent
//! pipeline cache (same directory, same key plus the workload's name, same checksummed format),
//! so that the next process of the same workload builds them ahead, on other threads, while its
//! weights upload (`pipeline::warm`; issue 34's cold start: `kiln embed --timings` showed every
//! pipeline built one after another on the first forward pass, driver-cache hits included).
//! Native only; off with the cache (`KILN_CACHE=0`).
//!
//! - A workload is named by its caller (kiln-models: the model file and precision); from then
//!   on the process records what it builds, and the record is written with the driver's cache
//!   when it differs from the file: it holds the last process's pipelines (at most
//!   `MAX_RECIPES`), so what a workload stopped using is not built ahead again.
//! - A recipe is what a built-in pipeline was compiled from (label, op, entry point, checks,
//!   WGSL). A pipeline built ahead is used only by a kernel asking for the same label with the
//!   same recipe, source included: a stale, damaged or forged record costs time, never a wrong
//!   kernel.

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// The most recipes one workload's record keeps.
pub(crate) const MAX_RECIPES: usize = 512;
/// The most bytes a record may hold (a recipe is a few KiB of WGSL).
pub(crate) const MAX_RECORD_BYTES: usize = 32 << 20;

/// What one built-in pipeline was built from.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Recipe {
    pub(crate) label: String,
    pub(crate) op: Option<String>,
    pub(crate) entry: String,
    /// Built without naga's runtime bounds checks (`pipeline::Checks::Unchecked`).
    pub(crate) unchecked: bool,
    pub(crate) source: String,
}

/// Recipes as bytes: a count, then per recipe its checks byte, whether it has an op, and its
/// strings, each length-prefixed (u32 LE).
pub(crate) fn encode_recipes(recipes: &[Recipe]) -> Vec<u8> {
    let mut out = (recipes.len() as u32).to_le_bytes().to_vec();
    let s = |out: &mut Vec<u8>, t: &str| {
        out.extend_from_slice(&(t.len() as u32).to_le_bytes());
        out.extend_from_slice(t.as_bytes());
    };
    for r in recipes {
        out.push(r.unchecked as u8);
        out.push(r.op.is_some() as u8);
        s(&mut out, &r.label);
        s(&mut out, r.op.as_deref().unwrap_or(""));
        s(&mut out, &r.entry);
        s(&mut out, &r.source);
    }
    out
}

/// [`encode_recipes`]' bytes back; None for anything else (every length checked against what
/// is left, every string UTF-8, nothing left over).
pub(crate) fn decode_recipes(mut b: &[u8]) -> Option<Vec<Recipe>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    fn u32_of(b: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize)
    }
    fn string(b: &mut &[u8]) -> Option<String> {
        let n = u32_of(b)?;
        String::from_utf8(take(b, n)?.to_vec()).ok()
    }
    let n = u32_of(&mut b)?;
    if n > MAX_RECIPES {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let flags = take(&mut b, 2)?;
        let unchecked = match flags[0] {
            0 => false,
            1 => true,
            _ => return None,
        };
        let has_op = match flags[1] {
            0 => false,
            1 => true,
            _ => return None,
        };
        let label = string(&mut b)?;
        let op = string(&mut b)?;
        let entry = string(&mut b)?;
        let source = string(&mut b)?;
        out.push(Recipe { label, op: has_op.then_some(op), entry, unchecked, source });
    }
    b.is_empty().then_some(out)
}

/// A workload being recorded.
struct Recording {
    path: std::path::PathBuf,
    key: String,
    /// What the file holds (as read, or as last written).
    on_disk: Vec<Recipe>,
    /// What this process has built or taken, in that order: the next record.
    used: Vec<Recipe>,
}

/// Whether two lists hold the same recipes, whatever their order.
fn same_set(a: &[Recipe], b: &[Recipe]) -> bool {
    a.len() == b.len() && a.iter().all(|r| b.contains(r))
}

/// One device's record (in its persistent cache).
#[derive(Default)]
pub(crate) struct Record {
    recording: Mutex<Option<Recording>>,
    /// Pipelines built ahead from the record, and taken by a kernel that asked for them.
    pub(crate) built: AtomicU64,
    pub(crate) taken: AtomicU64,
}

impl Record {
    /// Starts recording into `path` (under `key`), the file holding `recipes` (what was read
    /// of it: none where it is missing, damaged or of another key).
    pub(crate) fn start(&self, path: std::path::PathBuf, key: String, recipes: Vec<Recipe>) {
        let mut r = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        *r = Some(Recording { path, key, on_disk: recipes, used: Vec::new() });
    }

    /// A kernel was built (or taken) from `recipe`: recorded, where a workload is. Whether the
    /// file lacks it (a save is due).
    pub(crate) fn note(&self, recipe: &Recipe) -> bool {
        let mut guard = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        let Some(rec) = guard.as_mut() else { return false };
        if rec.used.len() < MAX_RECIPES && !rec.used.iter().any(|r| r == recipe) {
            rec.used.push(recipe.clone());
            return !rec.on_disk.contains(recipe);
        }
        false
    }

    /// Writes the record when what this process used differs from what the file holds (the
    /// record is the last process's pipelines: what it did not use is not built ahead again).
    pub(crate) fn save(&self, write: impl Fn(&std::path::Path, &str, &[u8]) -> std::io::Result<()>) {
        let mut guard = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        let Some(rec) = guard.as_mut() else { return };
        if rec.used.is_empty() || same_set(&rec.used, &rec.on_disk) {
            return;
        }
        let mut used = rec.used.clone();
        let mut data = encode_recipes(&used);
        while data.len() > MAX_RECORD_BYTES && !used.is_empty() {
            used.pop();
            data = encode_recipes(&used);
        }
        if write(&rec.path, &rec.key, &data).is_ok() {
            rec.on_disk = used;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Recipe> {
        vec![
            Recipe {
                label: "add f32".into(),
                op: Some("add".into()),
                entry: "main".into(),
                unchecked: true,
                source: "@compute @workgroup_size(64) fn main() {}".into(),
            },
            Recipe {
                label: "ünïcode".into(), op: None, entry: "main".into(), unchecked: false, source: String::new()
            },
        ]
    }

    #[test]
    fn recipes_round_trip_and_damage_is_refused() {
        let r = sample();
        let b = encode_recipes(&r);
        assert_eq!(decode_recipes(&b).unwrap(), r);
        assert_eq!(decode_recipes(&encode_recipes(&[])).unwrap(), vec![]);
        for n in 0..b.len() {
            assert!(decode_recipes(&b[..n]).is_none(), "truncated to {n}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode_recipes(&longer).is_none());
        // A count past the bound, a bad flag byte, a length past the end.
        let mut many = b.clone();
        many[..4].copy_from_slice(&(MAX_RECIPES as u32 + 1).to_le_bytes());
        assert!(decode_recipes(&many).is_none());
        let mut flag = b.clone();
        flag[4] = 7;
        assert!(decode_recipes(&flag).is_none());
        let mut len = b.clone();
        len[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_recipes(&len).is_none());
    }
}
