"""Kiln's exception classes. Each carries the stable numeric ``code`` shared by every binding;
the codes and their names come from kiln-core's error table (``_kiln.error_codes()``), and
``_class_for`` (called by src/errors.rs for every error) picks the class from the code: a code
without a class of its own here raises ``KilnError``."""

import builtins

from . import _kiln

__all__ = [
    "KilnError", "InvalidArgumentError", "ShapeError", "DTypeError", "OutOfMemoryError",
    "QuotaExceededError", "ShaderError", "DeviceLostError", "NoAdapterError", "TimeoutError",
    "UnsupportedError", "InternalError", "ComputeLimitError", "CODE_NAMES",
]

#: The stable error codes, by number (kiln-core's error table).
CODE_NAMES = {code: name for code, name, _meaning in _kiln.error_codes()}


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
    """A session's memory quota would be exceeded; the allocation was refused (code 6)."""


class ComputeLimitError(KilnError):
    """A session's compute budget was hit: operations per dispatch or in total (refused), or a
    kernel's loop budget (it stopped early; what it wrote is invalid) (code 14)."""


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


#: The class of each code name; the names come from kiln-core's table, the classes are Python's.
_CLASS_OF_NAME = {
    "INVALID_ARGUMENT": InvalidArgumentError,
    "NULL_POINTER": InvalidArgumentError,
    "SHAPE_MISMATCH": ShapeError,
    "DTYPE_MISMATCH": DTypeError,
    "OUT_OF_MEMORY": OutOfMemoryError,
    "QUOTA_EXCEEDED": QuotaExceededError,
    "SHADER": ShaderError,
    "DEVICE_LOST": DeviceLostError,
    "NO_ADAPTER": NoAdapterError,
    "TIMEOUT": TimeoutError,
    "UNSUPPORTED": UnsupportedError,
    "PANIC": InternalError,
    "INTERNAL": InternalError,
    "COMPUTE_LIMIT": ComputeLimitError,
}


def _class_for(code: int) -> type:
    """The exception class for a stable error code (KilnError for one without its own)."""
    return _CLASS_OF_NAME.get(CODE_NAMES.get(code, ""), KilnError)
