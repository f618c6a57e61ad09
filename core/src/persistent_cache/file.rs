//! The cache file's format: a header (magic, the key's and the data's lengths, a checksum), the
//! key, the data; read only when whole and intact, written atomically.

use super::MAX_BYTES;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"KILNPLC1";
/// magic, key length (u32), data length (u64), checksum (u64).
pub(super) const FIXED_HEADER: usize = 8 + 4 + 8 + 8;
/// Longest key a file may claim (a real one is a few hundred bytes).
pub(super) const MAX_KEY: usize = 4096;

/// A stable 64-bit checksum (FNV-1a over 8-byte words, then a final mix): catches truncation,
/// bit flips and torn writes; not a MAC (see the module comment).
pub(super) fn checksum(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        h ^= part.len() as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        let mut chunks = part.chunks_exact(8);
        for c in &mut chunks {
            h ^= u64::from_le_bytes(c.try_into().unwrap());
            h = h.wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
        }
        for &b in chunks.remainder() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // splitmix64's finaliser: every input bit reaches every output bit.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The checksum `PersistentCache::on_disk` compares (never 0, which means "none").
pub(super) fn data_sum(data: &[u8]) -> u64 {
    checksum(&[data]).max(1)
}

/// The file's bytes for `data` under `key` (public for the tests that forge files).
pub fn encode(key: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_HEADER + key.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(&[key.as_bytes(), data]).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The cache data in `file` if it is a whole, intact file made under `key`; else why not.
pub fn decode<'a>(file: &'a [u8], key: &str) -> Result<&'a [u8], String> {
    if file.len() < FIXED_HEADER {
        return Err(format!("truncated: {} bytes, shorter than the header", file.len()));
    }
    if &file[..8] != MAGIC {
        return Err("not a Kiln pipeline cache (or another version of the format)".into());
    }
    let key_len = u32::from_le_bytes(file[8..12].try_into().unwrap()) as usize;
    let data_len = u64::from_le_bytes(file[12..20].try_into().unwrap());
    let sum = u64::from_le_bytes(file[20..28].try_into().unwrap());
    if key_len > MAX_KEY {
        return Err(format!("corrupt: a key of {key_len} bytes"));
    }
    let body = &file[FIXED_HEADER..];
    if (body.len() as u64) < key_len as u64 + data_len {
        return Err(format!(
            "truncated: {} bytes where the header says {}",
            file.len(),
            FIXED_HEADER as u64 + key_len as u64 + data_len
        ));
    }
    if body.len() as u64 > key_len as u64 + data_len {
        return Err("corrupt: longer than the header says".into());
    }
    let (file_key, data) = body.split_at(key_len);
    if checksum(&[file_key, data]) != sum {
        return Err("corrupt: checksum mismatch".into());
    }
    if file_key != key.as_bytes() {
        return Err(format!("made for another adapter, driver or version ({})", String::from_utf8_lossy(file_key)));
    }
    Ok(data)
}

/// Reads the cache file at `path` if it is a valid one for `key`: Ok(None) when there is none.
pub(super) fn read_valid(path: &Path, key: &str) -> Result<Option<Vec<u8>>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > (FIXED_HEADER + MAX_KEY + MAX_BYTES) as u64 {
        return Err(format!("{} bytes, over the {} MiB bound", meta.len(), MAX_BYTES >> 20));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("unreadable: {e}"))?;
    decode(&bytes, key).map(|d| Some(d.to_vec()))
}

/// Creates the directory for the cache, private to the user (0700) where it is new.
fn make_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Writes `bytes` to `path` atomically: a temporary file of this process, synced, then renamed
/// over the old one (a reader sees the whole old file or the whole new one).
pub(super) fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    make_dir(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("pipelines"),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::{checksum, decode, encode, FIXED_HEADER};

    #[test]
    fn a_whole_file_decodes_to_its_data() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let f = encode("key A", &data);
        assert_eq!(decode(&f, "key A").unwrap(), &data[..]);
        assert_eq!(decode(&encode("k", &[]), "k").unwrap(), &[] as &[u8]);
    }

    #[test]
    fn every_damaged_file_is_refused() {
        let data: Vec<u8> = (0..333u32).map(|i| (i * 13 % 256) as u8).collect();
        let f = encode("key A", &data);
        // Every truncation, including to nothing.
        for n in 0..f.len() {
            assert!(decode(&f[..n], "key A").is_err(), "truncated to {n}");
        }
        // Every single-bit flip anywhere.
        for i in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[i] ^= 1 << bit;
                assert!(decode(&g, "key A").is_err(), "byte {i} bit {bit}");
            }
        }
        // Extra bytes at the end, another key, another format.
        let mut longer = f.clone();
        longer.push(0);
        assert!(decode(&longer, "key A").unwrap_err().contains("longer"));
        assert!(decode(&f, "key B").unwrap_err().contains("another adapter"));
        assert!(decode(b"WGPUPLCH and then some bytes.....", "key A").unwrap_err().contains("not a Kiln"));
        // Lengths that claim more than the file or than any key may be.
        let mut huge = f.clone();
        huge[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge, "key A").is_err());
        let mut long_key = f.clone();
        long_key[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&long_key, "key A").unwrap_err().contains("key of"));
        assert_eq!(f.len(), FIXED_HEADER + 5 + data.len());
    }

    #[test]
    fn the_checksum_sees_where_the_bytes_are() {
        // Moving bytes between the key and the data changes it.
        assert_ne!(checksum(&[b"ab", b"c"]), checksum(&[b"a", b"bc"]));
        assert_ne!(checksum(&[&[0u8; 16]]), checksum(&[&[0u8; 17]]));
        assert_eq!(checksum(&[b"stable"]), checksum(&[b"stable"]));
    }
}
