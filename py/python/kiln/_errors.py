"""Kiln's exception classes. Each carries the stable numeric ``code`` shared by every binding
(docs/DESIGN.md); the Rust extension picks the class from the code in one place (src/errors.rs)."""

import builtins

__all__ = [
    "KilnError", "InvalidArgumentError", "ShapeError", "DTypeError", "OutOfMemoryError",
    "QuotaExceededError", "ShaderError", "DeviceLostError", "NoAdapterError", "TimeoutError",
    "UnsupportedError", "InternalError", "CODE_NAMES",
]

#: The stable error codes, by number.
CODE_NAMES = {
    0: "OK", 1: "INVALID_ARGUMENT", 2: "NULL_POINTER", 3: "SHAPE_MISMATCH", 4: "DTYPE_MISMATCH",
    5: "OUT_OF_MEMORY", 6: "QUOTA_EXCEEDED", 7: "SHADER", 8: "DEVICE_LOST", 9: "NO_ADAPTER",
    10: "TIMEOUT", 11: "UNSUPPORTED", 12: "PANIC", 13: "INTERNAL",
}


class KilnError(Exception):
    """Base class of every Kiln error. ``code`` is the stable numeric code, ``code_name`` its
    name (``"SHAPE_MISMATCH"``, ...) and ``message`` the human message."""

    code: int = 13

    def __init__(self, message: str = "", code: int = 13) -> None:
        super().__init__(message)
        self.message = message
        self.code = int(code)

    @property
    def code_name(self) -> str:
        """The upper-case name of ``code``."""
        return CODE_NAMES.get(self.code, "UNKNOWN")

    def __str__(self) -> str:
        return f"[{self.code_name}] {self.message}"

    def __reduce__(self):
        return (type(self), (self.message, self.code))


class InvalidArgumentError(KilnError, ValueError):
    """A bad value: axis out of range, negative size, unknown option (code 1, also 2)."""


class ShapeError(KilnError, ValueError):
    """Shapes that do not broadcast, multiply or reshape (code 3)."""


class DTypeError(KilnError, TypeError):
    """Dtypes that differ or that an op does not take (code 4)."""


class OutOfMemoryError(KilnError, MemoryError):
    """The device or Kiln's pool could not allocate (code 5)."""


class QuotaExceededError(KilnError):
    """A configured limit was hit (code 6)."""


class ShaderError(KilnError):
    """WGSL that failed to parse or validate; the message has line:column (code 7)."""


class DeviceLostError(KilnError):
    """The device was lost; the next call on a new tensor re-creates it (code 8)."""


class NoAdapterError(KilnError, RuntimeError):
    """No adapter matched (code 9)."""


class TimeoutError(KilnError, builtins.TimeoutError):
    """GPU work ran past its time limit (code 10)."""


class UnsupportedError(KilnError):
    """The adapter lacks a feature, such as float16 (code 11)."""


class InternalError(KilnError, RuntimeError):
    """An internal error or a caught panic (codes 12 and 13)."""
