//! The workload records (`pipeline_record`) kept next to the driver's cache file: where a
//! workload's record lives, reading it back, and keeping at most `MAX_RECORDS` of them.

use super::file::{checksum, decode, FIXED_HEADER, MAX_KEY};
use super::{record, PersistentCache, MAX_RECORDS};
use std::path::PathBuf;

impl PersistentCache {
    /// Starts recording `workload`'s pipelines (`pipeline_record`): its record's file is next to
    /// the driver's cache, under the same key plus the workload's name. The recipes it holds.
    pub(crate) fn start_warm_record(&self, workload: &str) -> Vec<record::Recipe> {
        let stem = self.path.file_stem().and_then(|s| s.to_str()).unwrap_or("pipelines");
        let path = self.path.with_file_name(format!("{stem}-{:016x}.warm", checksum(&[workload.as_bytes()])));
        // A long name (a deep model path) is keyed by its checksum: the key must stay under
        // MAX_KEY for the file to read back.
        let name = match workload.len() {
            0..=1024 => workload.to_string(),
            _ => format!("#{:016x}", checksum(&[workload.as_bytes()])),
        };
        let key = format!("{} | workload {name}", self.key);
        let recipes = std::fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file() && m.len() <= (FIXED_HEADER + MAX_KEY + record::MAX_RECORD_BYTES) as u64)
            .and_then(|_| std::fs::read(&path).ok())
            .and_then(|bytes| decode(&bytes, &key).ok().and_then(record::decode_recipes))
            .unwrap_or_default();
        // A record in use counts as new for `prune_records` (it is rewritten only when it changes).
        if !recipes.is_empty() {
            let now = std::time::SystemTime::now();
            let _ = std::fs::File::options().append(true).open(&path).and_then(|f| f.set_modified(now));
        }
        self.record.start(path, key, recipes.clone());
        recipes
    }

    /// Keeps at most `MAX_RECORDS` workload records for this adapter, the most recently used:
    /// one per model file a user ran, which would otherwise only grow.
    pub(super) fn prune_records(&self) {
        let (Some(dir), Some(stem)) = (self.path.parent(), self.path.file_stem().and_then(|s| s.to_str())) else {
            return;
        };
        let prefix = format!("{stem}-");
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut records: Vec<(std::time::SystemTime, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with(&prefix) && n.ends_with(".warm")
            })
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if records.len() <= MAX_RECORDS {
            return;
        }
        records.sort();
        for (_, p) in &records[..records.len() - MAX_RECORDS] {
            let _ = std::fs::remove_file(p);
        }
    }
}
