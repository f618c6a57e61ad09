"""Random tensors. Kiln's generator is counter based (Philox): the same ``seed`` gives the same
numbers on every device and in every language. ``seed=None`` draws a fresh seed from the OS."""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

from . import _kiln

__all__ = ["uniform", "normal"]

ShapeLike = Union[int, Sequence[int]]


def _seed(seed: Optional[int]) -> int:
    if seed is None:
        return int.from_bytes(os.urandom(8), "little")
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return seed


def uniform(shape: ShapeLike, seed: Optional[int] = None, low: float = 0.0, high: float = 1.0,
            dtype: Any = None) -> "_kiln.Tensor":
    """Uniform random numbers in ``[low, high)`` of ``shape`` (float32 or float16)."""
    return _kiln.random_uniform(shape, _seed(seed), float(low), float(high), dtype)


def normal(shape: ShapeLike, seed: Optional[int] = None, mean: float = 0.0, std: float = 1.0,
           dtype: Any = None) -> "_kiln.Tensor":
    """Normally distributed random numbers with ``mean`` and ``std`` (float32 or float16)."""
    return _kiln.random_normal(shape, _seed(seed), float(mean), float(std), dtype)
