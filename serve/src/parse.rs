//! Everything the service reads from a request, as pure functions on strings and bytes: ids in
//! paths, query strings, JSON bodies, uploads (.npy or raw bytes with dtype and shape). The
//! handlers only call these; the fuzz target (serve/fuzz) calls them directly.

use crate::error::{ApiError, ApiResult};
use crate::npy;
use kiln_core::DType;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Most dimensions an uploaded tensor may declare (more is a mistake or an attack).
pub const MAX_NDIM: usize = 8;

/// An id in a path: decimal digits only. Anything else is simply not found, like an id of
/// another tenant.
pub fn parse_id(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TensorQuery {
    /// `npy` or `raw` (upload and download).
    pub format: Option<String>,
    /// Raw uploads: the dtype (`float32`, `float16`, `int32`, `uint32`, `bool`).
    pub dtype: Option<String>,
    /// Raw uploads: the shape as comma-separated sizes (empty: a scalar).
    pub shape: Option<String>,
}

pub fn parse_query<T: DeserializeOwned + Default>(query: Option<&str>) -> ApiResult<T> {
    match query {
        None | Some("") => Ok(T::default()),
        Some(q) => serde_urlencoded::from_str(q).map_err(|e| ApiError::bad_request(format!("query string: {e}"))),
    }
}

/// `2,3,5` -> [2, 3, 5]; the empty string is a scalar.
pub fn parse_shape(s: &str) -> ApiResult<Vec<usize>> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    let dims: Vec<usize> = s
        .split(',')
        .map(|d| {
            d.trim().parse::<usize>().map_err(|_| ApiError::bad_request(format!("shape {s:?}: {d:?} is not a size")))
        })
        .collect::<ApiResult<_>>()?;
    if dims.len() > MAX_NDIM {
        return Err(ApiError::bad_request(format!("shape has {} dimensions; at most {MAX_NDIM}", dims.len())));
    }
    Ok(dims)
}

pub fn parse_dtype(s: &str) -> ApiResult<DType> {
    DType::parse(s).map_err(|e| ApiError::bad_request(e.message().to_string()))
}

/// Decodes an upload: raw bytes when the query says `format=raw` or gives a dtype, else .npy.
/// The body's length must be exactly what the dtype and shape take (so a truncated upload or a
/// huge declared shape is refused before anything is allocated).
pub fn decode_upload(q: &TensorQuery, body: &[u8]) -> ApiResult<npy::Array> {
    let raw = match q.format.as_deref() {
        Some("raw") => true,
        Some("npy") => false,
        Some(f) => return Err(ApiError::bad_request(format!("format {f:?}: npy or raw"))),
        None => q.dtype.is_some(),
    };
    if !raw {
        if q.dtype.is_some() || q.shape.is_some() {
            return Err(ApiError::bad_request(".npy uploads carry their own dtype and shape"));
        }
        let a = npy::decode(body).map_err(ApiError::bad_request)?;
        check_ndim(&a.shape)?;
        return Ok(a);
    }
    let dtype = parse_dtype(q.dtype.as_deref().ok_or_else(|| ApiError::bad_request("raw upload without dtype"))?)?;
    let shape = parse_shape(q.shape.as_deref().ok_or_else(|| ApiError::bad_request("raw upload without shape"))?)?;
    let want = shape.iter().try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
    match want {
        Some(n) if n == body.len() => {}
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "{dtype} {shape:?} takes {n} bytes; the body has {}",
                body.len()
            )))
        }
        None => return Err(ApiError::bad_request("the declared shape is too large")),
    }
    Ok(npy::Array { dtype, shape, bytes: body.to_vec(), from_f64: false })
}

fn check_ndim(shape: &[usize]) -> ApiResult<()> {
    if shape.len() > MAX_NDIM {
        return Err(ApiError::bad_request(format!("{} dimensions; at most {MAX_NDIM}", shape.len())));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Download {
    Npy,
    Raw,
}

/// A download's format: the query's `format`, else the Accept header (`application/octet-stream`
/// is raw), else .npy.
pub fn download_format(q: &TensorQuery, accept: Option<&str>) -> ApiResult<Download> {
    match q.format.as_deref() {
        Some("npy") => Ok(Download::Npy),
        Some("raw") => Ok(Download::Raw),
        Some(f) => Err(ApiError::bad_request(format!("format {f:?}: npy or raw"))),
        None if accept.is_some_and(|a| a.contains("application/octet-stream")) => Ok(Download::Raw),
        None => Ok(Download::Npy),
    }
}

/// A JSON body of type `T`; unknown fields are refused so that a typo is not silently ignored.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("JSON body: {e}")))
}

/// `POST /v1/sessions`: an optional body; `device` pins the session to that adapter index
/// (else the server places it, serve/src/placement.rs).
#[derive(Debug, Default, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SessionRequest {
    pub device: Option<usize>,
}

/// A session request: an empty body (or only whitespace) asks for nothing.
pub fn parse_session_request(body: &[u8]) -> ApiResult<SessionRequest> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(SessionRequest::default());
    }
    let bad = |e: String| {
        ApiError::bad_request(format!(
            "JSON body: {e}; a session request is {{\"device\": N}} (N an adapter index, as GET /health lists) or empty"
        ))
    };
    // An object only: serde would also read `[1]` as the struct's fields in order.
    match serde_json::from_slice::<Value>(body).map_err(|e| bad(e.to_string()))? {
        v @ Value::Object(_) => serde_json::from_value(v).map_err(|e| bad(e.to_string())),
        _ => Err(bad("not an object".into())),
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamedInput {
    pub name: String,
    pub id: u64,
}

/// `POST /v1/sessions/{s}/ops/{op}`: input tensors by name (in order: `concat` takes them all)
/// and the op's parameters as in the conformance manifest.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OpRequest {
    #[serde(default)]
    pub inputs: Vec<NamedInput>,
    #[serde(default)]
    pub params: Map<String, Value>,
}

/// `POST /v1/sessions/{s}/kernels`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KernelRequest {
    pub source: String,
    #[serde(default = "main_entry")]
    pub entry: String,
}

fn main_entry() -> String {
    "main".into()
}

/// `POST /v1/sessions/{s}/kernels/{k}/dispatch`: the tensors bound in binding order, the
/// uniform bytes as hex, the workgroup counts.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DispatchRequest {
    pub tensors: Vec<u64>,
    #[serde(default)]
    pub uniforms: Option<String>,
    pub workgroups: [u32; 3],
}

pub fn parse_hex(s: &str) -> ApiResult<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad_request("uniforms: an even number of hex digits"));
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| ApiError::bad_request("uniforms: bad hex")))
        .collect()
}

/// A bearer token from an Authorization header value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_plain_decimal() {
        assert_eq!(parse_id("42"), Some(42));
        for bad in ["", "-1", "+1", "1e3", "0x10", "99999999999999999999999", " 1"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn raw_uploads_must_match_their_declared_size() {
        let q = |d: &str, s: &str| TensorQuery { format: None, dtype: Some(d.into()), shape: Some(s.into()) };
        let a = decode_upload(&q("float32", "2,3"), &[0u8; 24]).unwrap();
        assert_eq!((a.dtype, a.shape), (DType::F32, vec![2, 3]));
        assert!(decode_upload(&q("float32", "2,3"), &[0u8; 23]).is_err());
        let huge = format!("{0},{0},{0}", usize::MAX / 2);
        assert!(decode_upload(&q("float32", &huge), &[]).unwrap_err().message.contains("too large"));
        assert!(decode_upload(&q("float64", "1"), &[0u8; 8]).is_err());
        assert!(decode_upload(&q("float32", "1,1,1,1,1,1,1,1,1"), &[0u8; 4]).is_err());
        assert_eq!(decode_upload(&q("int32", ""), &[1, 0, 0, 0]).unwrap().shape, Vec::<usize>::new());
    }

    #[test]
    fn npy_round_trips_and_truncation_is_refused() {
        let bytes: Vec<u8> = [1.5f32, -0.0, f32::NAN, f32::INFINITY].iter().flat_map(|x| x.to_le_bytes()).collect();
        let file = npy::encode(DType::F32, &[2, 2], &bytes).unwrap();
        let a = decode_upload(&TensorQuery::default(), &file).unwrap();
        assert_eq!((a.dtype, a.shape.as_slice(), a.bytes.as_slice()), (DType::F32, &[2usize, 2][..], &bytes[..]));
        assert!(decode_upload(&TensorQuery::default(), &file[..file.len() - 1]).is_err());
        assert!(decode_upload(&TensorQuery::default(), &file[..20]).is_err());
        // A header declaring 2^62 elements over 16 bytes of data.
        let s = String::from_utf8_lossy(&file).replace("(2, 2)", "(4611686018427387904, 2)");
        assert!(decode_upload(&TensorQuery::default(), s.as_bytes()).is_err());
    }

    #[test]
    fn bodies_and_headers() {
        assert!(parse_json::<OpRequest>(b"{\"inputs\": [{\"name\": \"x\", \"id\": 1}], \"params\": {}}").is_ok());
        assert!(parse_json::<OpRequest>(b"{\"inputz\": []}").is_err());
        assert!(parse_json::<DispatchRequest>(b"{\"tensors\": [1], \"workgroups\": [1, 1]}").is_err());
        assert_eq!(parse_hex("00ff10").unwrap(), vec![0, 255, 16]);
        assert!(parse_hex("0g").is_err() && parse_hex("abc").is_err());
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(parse_shape("2, 3").unwrap(), vec![2, 3]);
        assert!(parse_shape("2,-3").is_err());
    }
}
