//! The one error type of Kiln, with the stable numeric codes every binding shares (docs/DESIGN.md).

/// Stable status codes. The numbers are part of the ABI: never renumber.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    Ok = 0,
    InvalidArgument = 1,
    NullPointer = 2,
    ShapeMismatch = 3,
    DTypeMismatch = 4,
    OutOfMemory = 5,
    QuotaExceeded = 6,
    Shader = 7,
    DeviceLost = 8,
    NoAdapter = 9,
    Timeout = 10,
    Unsupported = 11,
    Panic = 12,
    Internal = 13,
}

impl ErrorCode {
    /// The upper-case name used in docs/DESIGN.md and in every binding.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Ok => "OK",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::NullPointer => "NULL_POINTER",
            ErrorCode::ShapeMismatch => "SHAPE_MISMATCH",
            ErrorCode::DTypeMismatch => "DTYPE_MISMATCH",
            ErrorCode::OutOfMemory => "OUT_OF_MEMORY",
            ErrorCode::QuotaExceeded => "QUOTA_EXCEEDED",
            ErrorCode::Shader => "SHADER",
            ErrorCode::DeviceLost => "DEVICE_LOST",
            ErrorCode::NoAdapter => "NO_ADAPTER",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::Panic => "PANIC",
            ErrorCode::Internal => "INTERNAL",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("null pointer: {0}")]
    NullPointer(String),
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    #[error("dtype mismatch: {0}")]
    DTypeMismatch(String),
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    #[error("quota exceeded: {0}")]
    QuotaExceeded(String),
    #[error("shader error: {0}")]
    Shader(String),
    #[error("device lost: {0}")]
    DeviceLost(String),
    #[error("no adapter: {0}")]
    NoAdapter(String),
    #[error("timeout: {0}")]
    Timeout(String),
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("panic: {0}")]
    Panic(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
            Error::NullPointer(_) => ErrorCode::NullPointer,
            Error::ShapeMismatch(_) => ErrorCode::ShapeMismatch,
            Error::DTypeMismatch(_) => ErrorCode::DTypeMismatch,
            Error::OutOfMemory(_) => ErrorCode::OutOfMemory,
            Error::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
            Error::Shader(_) => ErrorCode::Shader,
            Error::DeviceLost(_) => ErrorCode::DeviceLost,
            Error::NoAdapter(_) => ErrorCode::NoAdapter,
            Error::Timeout(_) => ErrorCode::Timeout,
            Error::Unsupported(_) => ErrorCode::Unsupported,
            Error::Panic(_) => ErrorCode::Panic,
            Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The message without the category prefix (bindings show the code separately).
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::NullPointer(m)
            | Error::ShapeMismatch(m)
            | Error::DTypeMismatch(m)
            | Error::OutOfMemory(m)
            | Error::QuotaExceeded(m)
            | Error::Shader(m)
            | Error::DeviceLost(m)
            | Error::NoAdapter(m)
            | Error::Timeout(m)
            | Error::Unsupported(m)
            | Error::Panic(m)
            | Error::Internal(m) => m,
        }
    }

    /// Turns a caught panic payload into `Error::Panic` (used by every binding's boundary).
    pub fn from_panic(payload: Box<dyn std::any::Any + Send>) -> Error {
        let msg = if let Some(s) = payload.downcast_ref::<&str>() {
            s.to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "unknown panic payload".to_string()
        };
        Error::Panic(msg)
    }
}

impl From<wgpu::Error> for Error {
    fn from(e: wgpu::Error) -> Self {
        match e {
            wgpu::Error::OutOfMemory { .. } => Error::OutOfMemory(e.to_string()),
            wgpu::Error::Validation { description, .. } => Error::Internal(description),
            wgpu::Error::Internal { description, .. } => Error::Internal(description),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `ensure!(cond, Variant, "fmt", args)` returns `Err(Error::Variant(msg))` when `cond` is false.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $variant:ident, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::Error::$variant(format!($($fmt)+)));
        }
    };
}
