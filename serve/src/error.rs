//! The service's one error shape, `{"error": {"code": "...", "message": "..."}}`, and the fixed
//! map from a code to an HTTP status (docs/DESIGN.md, "kiln serve"). Kiln's stable codes
//! (`kiln_core::ErrorCode` names) pass through unchanged; the service adds its own for what only
//! HTTP can get wrong (auth, routing, bodies).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Codes only the service gives (Kiln's own come from `kiln_core::ErrorCode::name`).
pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
pub const NOT_FOUND: &str = "NOT_FOUND";
pub const BAD_REQUEST: &str = "BAD_REQUEST";
pub const METHOD_NOT_ALLOWED: &str = "METHOD_NOT_ALLOWED";
pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
pub const TOO_MANY_SESSIONS: &str = "TOO_MANY_SESSIONS";
pub const NOT_READY: &str = "NOT_READY";
/// A request still running when the shutdown grace period ended.
pub const SHUTTING_DOWN: &str = "SHUTTING_DOWN";
/// A request body that stopped arriving (`body_read_timeout_ms`).
pub const REQUEST_TIMEOUT: &str = "REQUEST_TIMEOUT";

/// Every code the service may answer, with its status: the documented map.
pub const STATUS_MAP: &[(&str, u16)] = &[
    (BAD_REQUEST, 400),
    ("INVALID_ARGUMENT", 400),
    ("NULL_POINTER", 400),
    ("SHAPE_MISMATCH", 400),
    ("DTYPE_MISMATCH", 400),
    ("SHADER", 400),
    (UNAUTHORIZED, 401),
    (NOT_FOUND, 404),
    (METHOD_NOT_ALLOWED, 405),
    (REQUEST_TIMEOUT, 408),
    (PAYLOAD_TOO_LARGE, 413),
    ("UNSUPPORTED", 422),
    ("QUOTA_EXCEEDED", 429),
    ("COMPUTE_LIMIT", 429),
    (TOO_MANY_SESSIONS, 429),
    ("PANIC", 500),
    ("INTERNAL", 500),
    ("OUT_OF_MEMORY", 507),
    ("DEVICE_LOST", 503),
    ("NO_ADAPTER", 503),
    (NOT_READY, 503),
    (SHUTTING_DOWN, 503),
    ("TIMEOUT", 504),
];

/// The status of `code` (500 for a code missing from the map, which a test rules out).
pub fn status_of(code: &str) -> u16 {
    STATUS_MAP.iter().find(|(c, _)| *c == code).map(|(_, s)| *s).unwrap_or(500)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: &'static str,
    pub message: String,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(BAD_REQUEST, message)
    }
    /// The one answer for a session, tensor or kernel that is not the caller's: the same for
    /// another tenant's id as for one that never existed.
    pub fn not_found(what: &str, id: &str) -> ApiError {
        ApiError::new(NOT_FOUND, format!("no {what} {id:?}"))
    }
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(status_of(self.code)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": {"code": self.code, "message": self.message}})
    }
}

impl From<kiln_core::Error> for ApiError {
    fn from(e: kiln_core::Error) -> ApiError {
        ApiError { code: e.code().name(), message: e.message().to_string() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status(), axum::Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::ErrorCode;

    #[test]
    fn every_kiln_code_but_ok_has_a_status() {
        for &c in ErrorCode::ALL {
            if c == ErrorCode::Ok {
                continue;
            }
            assert!(STATUS_MAP.iter().any(|(n, _)| *n == c.name()), "{} has no HTTP status", c.name());
        }
        for (code, status) in STATUS_MAP {
            assert!((400..600).contains(status), "{code}");
        }
        // A lost device is the service's trouble, not the caller's: 503, never 500.
        let lost: ApiError = kiln_core::Error::DeviceLost("gone".into()).into();
        assert_eq!((lost.code, lost.status().as_u16()), ("DEVICE_LOST", 503));
    }
}
