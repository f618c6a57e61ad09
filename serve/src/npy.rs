//! .npy bytes to and from Kiln's (dtype, shape, bytes), through npyz: the one .npy codec of the
//! CLI (`kiln run`, cli/src/npy.rs reads files through it) and the service (uploads, downloads).
//! Pure functions on bytes, so the fuzz target calls them as they are.

use kiln_core::{f16, DType};

/// A decoded array: Kiln's dtype, the shape and the little-endian bytes Kiln stores.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
    /// The file held float64, converted to float32 (WGSL has no portable f64).
    pub from_f64: bool,
}

/// Bytes of header text a .npy file may have. numpy writes a dict of three short keys padded to
/// a multiple of 64 bytes: 128 for every array Kiln can hold (8 dimensions of 20 digits fit in
/// under 300). numpy itself refuses headers over 10000 bytes by default.
pub const MAX_HEADER_BYTES: usize = 1024;

/// Dimensions a .npy header may declare (numpy's own maximum is 64).
pub const MAX_HEADER_NDIM: usize = 32;

/// Checks a .npy header in one linear pass before npyz parses it: npyz's parser of the Python
/// literal backtracks exponentially on nested literals (a 132-byte file with `[[[[...]]]]` in
/// its header took months), so only what numpy writes gets through: the magic, a version of 1
/// to 3, a header of at most `MAX_HEADER_BYTES` that is exactly a dict of `'descr'` (a short
/// string), `'fortran_order'` (True or False) and `'shape'` (a tuple of at most
/// `MAX_HEADER_NDIM` decimal sizes), each once, padded with spaces and one newline.
pub fn check_header(bytes: &[u8]) -> Result<(), String> {
    let bad = |why: &str| Err(format!("not a .npy file: {why}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return bad("no .npy magic");
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        2 | 3 => return bad("truncated header"),
        v => return Err(format!("not a .npy file: format version {v} is not 1, 2 or 3")),
    };
    if len > MAX_HEADER_BYTES {
        return Err(format!(
            "not a .npy file: its header is {len} bytes, over the {MAX_HEADER_BYTES} a .npy header needs"
        ));
    }
    let Some(text) = bytes.get(start..start + len) else { return bad("truncated header") };
    HeaderCheck { s: text, i: 0 }.dict().map_err(|e| format!("not a .npy file: header: {e}"))
}

/// A cursor over the header text; every method moves forward only (no backtracking).
struct HeaderCheck<'a> {
    s: &'a [u8],
    i: usize,
}

impl HeaderCheck<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i] == b' ' {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        let hit = self.s.get(self.i) == Some(&c);
        self.i += hit as usize;
        hit
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.i))
        }
    }
    /// A quoted string of at most 32 plain characters (keys and dtype descriptors).
    fn string(&mut self) -> Result<&[u8], String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at byte {}", self.i)),
        };
        let from = self.i + 1;
        let mut j = from;
        while j < self.s.len() && self.s[j] != q {
            let c = self.s[j];
            if !(c.is_ascii_alphanumeric() || b"<>|=_".contains(&c)) || j - from >= 32 {
                return Err(format!("unexpected {:?} in a string at byte {j}", c as char));
            }
            j += 1;
        }
        if j >= self.s.len() {
            return Err("unterminated string".into());
        }
        self.i = j + 1;
        Ok(&self.s[from..j])
    }
    fn word(&mut self) -> &[u8] {
        self.ws();
        let from = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_alphanumeric() {
            self.i += 1;
        }
        &self.s[from..self.i]
    }
    fn shape(&mut self) -> Result<(), String> {
        self.expect(b'(')?;
        let mut n = 0;
        loop {
            if self.eat(b')') {
                return Ok(());
            }
            let w = self.word();
            if w.is_empty() || w.len() > 20 || !w.iter().all(u8::is_ascii_digit) {
                return Err(format!("a shape holds decimal sizes only (byte {})", self.i));
            }
            n += 1;
            if n > MAX_HEADER_NDIM {
                return Err(format!("a shape of more than {MAX_HEADER_NDIM} dimensions"));
            }
            if !self.eat(b',') {
                return self.expect(b')');
            }
        }
    }
    fn dict(&mut self) -> Result<(), String> {
        self.expect(b'{')?;
        let mut seen = [false; 3];
        loop {
            if self.eat(b'}') {
                break;
            }
            let key = self.string()?;
            let k = match key {
                b"descr" => 0,
                b"fortran_order" => 1,
                b"shape" => 2,
                _ => return Err(format!("unexpected key {:?}", String::from_utf8_lossy(key))),
            };
            if std::mem::replace(&mut seen[k], true) {
                return Err(format!("key {:?} given twice", String::from_utf8_lossy(key)));
            }
            self.expect(b':')?;
            match k {
                0 => drop(self.string()?),
                1 => {
                    if !matches!(self.word(), b"True" | b"False") {
                        return Err("fortran_order is True or False".into());
                    }
                }
                _ => self.shape()?,
            }
            if !self.eat(b',') {
                self.expect(b'}')?;
                break;
            }
        }
        if seen != [true; 3] {
            return Err("a header needs 'descr', 'fortran_order' and 'shape'".into());
        }
        // numpy's padding: spaces, then a newline (some writers add none).
        self.ws();
        match &self.s[self.i..] {
            b"" | b"\n" => Ok(()),
            _ => Err(format!("unexpected bytes after the dict at byte {}", self.i)),
        }
    }
}

/// Decodes a .npy file. The header is checked first (`check_header`); the declared shape is
/// checked against the bytes actually present before anything is allocated for it, so a
/// header declaring a huge array costs nothing.
pub fn decode(bytes: &[u8]) -> Result<Array, String> {
    check_header(bytes)?;
    // npyz multiplies the declared dimensions unchecked (a panic in debug builds): contained here.
    let mut data: &[u8] = bytes;
    let header = match std::panic::catch_unwind(move || npyz::NpyHeader::from_reader(&mut data).map(|h| (h, data))) {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => return Err(format!("not a .npy file: {e}")),
        Err(_) => return Err("not a .npy file: its header does not describe an array".into()),
    };
    // What the reader left is the data section.
    let (header, data) = header;
    let present = data.len();
    let npy = npyz::NpyFile::with_header(header, data);
    if npy.order() != npyz::Order::C {
        return Err("Fortran-order arrays are not supported; save it in C order".into());
    }
    let descr = npy.dtype().descr();
    let (dtype, item, from_f64) = match descr.trim_matches('\'') {
        "<f4" => (DType::F32, 4, false),
        "<f2" => (DType::F16, 2, false),
        "<i4" => (DType::I32, 4, false),
        "<u4" => (DType::U32, 4, false),
        "|b1" => (DType::Bool, 1, false),
        "<f8" => (DType::F32, 8, true),
        other => return Err(format!("dtype {other} is not supported (float32, float16, int32, uint32, bool)")),
    };
    let shape = npy.shape().iter().map(|&d| usize::try_from(d).ok()).collect::<Option<Vec<usize>>>();
    let declared = shape.as_ref().and_then(|s| s.iter().try_fold(item, |acc: usize, &d| acc.checked_mul(d)));
    let (Some(shape), Some(declared)) = (shape, declared) else {
        return Err("the declared shape is too large".into());
    };
    if declared != present {
        return Err(format!("the header declares {declared} bytes of data, the file has {present}"));
    }
    let bytes = match dtype {
        DType::F32 if from_f64 => {
            let v: Vec<f32> = npy.into_vec::<f64>().map_err(|e| e.to_string())?.into_iter().map(|x| x as f32).collect();
            bytemuck_bytes(&v)
        }
        DType::F32 => bytemuck_bytes(&npy.into_vec::<f32>().map_err(|e| e.to_string())?),
        DType::F16 => npy.into_vec::<f16>().map_err(|e| e.to_string())?.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::I32 => npy.into_vec::<i32>().map_err(|e| e.to_string())?.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::U32 => npy.into_vec::<u32>().map_err(|e| e.to_string())?.iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::Bool => npy.into_vec::<bool>().map_err(|e| e.to_string())?.into_iter().map(u8::from).collect(),
    };
    Ok(Array { dtype, shape, bytes, from_f64 })
}

fn bytemuck_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Encodes Kiln's bytes of `dtype` and `shape` as a .npy file.
pub fn encode(dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Vec<u8>, String> {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let le4 = |c: &[u8]| [c[0], c[1], c[2], c[3]];
    match dtype {
        DType::F32 => write(&shape, bytes.chunks_exact(4).map(|c| f32::from_le_bytes(le4(c)))),
        DType::F16 => write(&shape, bytes.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]))),
        DType::I32 => write(&shape, bytes.chunks_exact(4).map(|c| i32::from_le_bytes(le4(c)))),
        DType::U32 => write(&shape, bytes.chunks_exact(4).map(|c| u32::from_le_bytes(le4(c)))),
        DType::Bool => write(&shape, bytes.iter().map(|&b| b != 0)),
    }
}

fn write<T: npyz::AutoSerialize>(shape: &[u64], data: impl Iterator<Item = T>) -> Result<Vec<u8>, String> {
    use npyz::WriterBuilder;
    let mut out = Vec::new();
    {
        let mut w = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(shape)
            .writer(&mut out)
            .begin_nd()
            .map_err(|e| e.to_string())?;
        w.extend(data).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A header of `dict` text in a version-1 .npy file with `data` after it.
    fn file(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        v.extend_from_slice(dict.as_bytes());
        v.extend_from_slice(data);
        v
    }

    /// Runs `decode` on another thread and fails (instead of hanging) past `limit`.
    fn decode_within(bytes: Vec<u8>, limit: Duration) -> (Result<Array, String>, Duration) {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let r = decode(&bytes);
            let _ = tx.send((r, t0.elapsed()));
        });
        rx.recv_timeout(limit).expect("decode did not finish in time (npyz's backtracking parser?)")
    }

    /// The case: a nested literal under an extra key, 40 levels (months in npyz's parser).
    #[test]
    fn a_nested_literal_in_the_header_is_refused_in_milliseconds() {
        for depth in [22, 40, 1000] {
            let dict = format!(
                "{{'descr':'<f4','fortran_order':False,'shape':(1,),'x':{}{}}}",
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let bytes = file(&dict, &[0; 4]);
            if depth == 40 {
                assert!(bytes.len() < 160, "{}", bytes.len());
            }
            let (r, took) = decode_within(bytes, Duration::from_secs(2));
            let e = r.unwrap_err();
            assert!(e.contains("unexpected key \"x\"") || (depth == 1000 && e.contains("over the 1024")), "{e}");
            assert!(took < Duration::from_millis(50), "{took:?}");
        }
    }

    #[test]
    #[allow(clippy::useless_format)] // one shape for every attack in the list
    fn only_what_numpy_writes_gets_to_npyz() {
        // What numpy writes (and variants it accepts) decodes.
        let ok = [
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2)}          \n", 8),
            ("{\"descr\": \"<i4\", \"shape\": (), \"fortran_order\": False}", 4),
            ("{'shape':(0,3),'fortran_order':False,'descr':'|b1'}", 0),
        ];
        for (dict, n) in ok {
            let (r, _) = decode_within(file(dict, &vec![0; n]), Duration::from_secs(2));
            assert!(r.is_ok(), "{dict}: {r:?}");
        }
        let enc = encode(DType::F16, &[3, 1, 2], &[0; 12]).unwrap();
        assert_eq!(decode(&enc).unwrap().shape, vec![3, 1, 2]);
        // Attacks: nesting in every key, long headers, huge and many dimensions, odd values.
        let deep = |open: &str, close: &str| format!("{}1{}", open.repeat(200), close.repeat(200));
        let bad = [
            format!("{{'descr':{},'fortran_order':False,'shape':(1,)}}", deep("[", "]")),
            format!("{{'descr':'<f4','fortran_order':False,'shape':{}}}", deep("(", ")")),
            format!("{{'descr':'<f4','fortran_order':{},'shape':(1,)}}", deep("{", "}")),
            format!("{{'descr':[('a','<f4')],'fortran_order':False,'shape':(1,)}}"),
            format!("{{'descr':'<f4','fortran_order':False,'shape':(1,)}}{}", " ".repeat(2000)),
            format!("{{'descr':'{}','fortran_order':False,'shape':(1,)}}", "f".repeat(100)),
            format!("{{'descr':'<f4','fortran_order':False,'shape':({})}}", "1,".repeat(33)),
            format!("{{'descr':'<f4','fortran_order':False,'shape':(1{},)}}", "0".repeat(30)),
            format!("{{'descr':'<f4','fortran_order':False,'shape':(-1,)}}"),
            format!("{{'descr':'<f4','fortran_order':0,'shape':(1,)}}"),
            format!("{{'descr':'<f4','fortran_order':False,'shape':(1,),'shape':(1,)}}"),
            format!("{{'descr':'<f4','fortran_order':False}}"),
            format!("{{'descr':'<f4','fortran_order':False,'shape':(1,)}} x"),
            format!("{{'descr':'<f4\\'','fortran_order':False,'shape':(1,)}}"),
            format!("{{'descr':'<f4','fortran_order':False,'shape':(1,)"),
        ];
        for dict in &bad {
            let (r, took) = decode_within(file(dict, &[0; 4]), Duration::from_secs(2));
            assert!(r.is_err(), "{dict}");
            assert!(took < Duration::from_millis(50), "{dict}: {took:?}");
        }
        // A declared header length past the bytes present, and a v2 header of 4 GiB.
        let mut f = file("{'descr':'<f4','fortran_order':False,'shape':(1,)}", &[0; 4]);
        f[8] = 0xff;
        assert!(decode(&f).is_err());
        let mut v2 = b"\x93NUMPY\x02\x00\xff\xff\xff\xff".to_vec();
        v2.extend_from_slice(&[b' '; 64]);
        assert!(decode(&v2).unwrap_err().contains("over the"));
        // Huge shapes within the syntax are refused by the size check, without allocating.
        let huge = format!("{{'descr':'<f4','fortran_order':False,'shape':({0},{0},{0})}}", u64::MAX);
        assert!(decode(&file(&huge, &[0; 4])).is_err());
        let big = format!("{{'descr':'<f4','fortran_order':False,'shape':({})}}", "4294967296,".repeat(8));
        assert!(decode(&file(&big, &[0; 4])).is_err());
    }
}
