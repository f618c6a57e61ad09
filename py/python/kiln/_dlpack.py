"""DLPack, the Array API's interchange protocol, for Kiln tensors.

Kiln's memory is a WebGPU device's, which no DLPack consumer can address (DLPack names a WebGPU
device type, but nothing reads it), so both directions copy, by a stated rule:

- export (``t.__dlpack__()``, so ``numpy.from_dlpack(t)``, ``torch.from_dlpack(t)``, ...): a
  fresh host copy of the tensor, handed over through numpy's own DLPack producer; hence
  ``t.__dlpack_device__()`` is ``(kDLCPU, 0)``, where the exported data lives. ``copy=False``
  (a consumer asking for the tensor's own memory) and any ``dl_device`` other than the CPU
  raise ``BufferError``, as the standard asks of a producer that cannot comply.
- import (``kiln.from_dlpack(x)``): any host (kDLCPU) producer, read through
  ``numpy.from_dlpack`` (strides and byte order honoured) and uploaded as ``kiln.asarray``
  would (the same dtype rules: int64 narrowed only where every value fits, float64 to float32
  with a warning). A producer on another device (a CUDA tensor) must be moved to the host
  first; ``copy=False`` raises ``BufferError`` (an upload is always a copy).
"""

from __future__ import annotations

import numpy as _np

#: DLPack's device types (dlpack.h's DLDeviceType).
KDL_CPU = 1


def dlpack_device(self):
    """``(kDLCPU, 0)``: a DLPack export of a Kiln tensor is a host copy (see the module doc)."""
    return (KDL_CPU, 0)


def dlpack(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of a fresh host copy of this tensor (see the module doc)."""
    if copy is False:
        raise BufferError(
            "kiln: a tensor's memory is on the GPU and cannot be shared through DLPack; "
            "export with copy=None or copy=True (a host copy)"
        )
    if dl_device is not None and tuple(dl_device) != (KDL_CPU, 0):
        raise BufferError(f"kiln: DLPack export only to the host (kDLCPU, 0), not to device {tuple(dl_device)}")
    if stream is not None:
        # The standard: for a CPU export the stream must be None.
        raise ValueError(f"kiln: a host export takes no stream, got {stream!r}")
    host = _np.asarray(self.numpy(), order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    return host.__dlpack__() if max_version is None else host.__dlpack__(max_version=max_version)


def from_dlpack(x, /, *, device=None, copy=None):
    """A Kiln tensor from any object with ``__dlpack__`` on the host (see the module doc)."""
    from . import asarray

    if copy is False:
        raise BufferError("kiln.from_dlpack: an upload to the GPU is always a copy; pass copy=None or True")
    try:
        host = _np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError) as e:
        raise BufferError(
            f"kiln.from_dlpack: only host (kDLCPU) DLPack producers can be read ({e}); move the array to the CPU first"
        ) from e
    return asarray(host, device=device)
