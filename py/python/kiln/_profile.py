"""``kiln.profile()``: per-op GPU time of everything dispatched inside a ``with`` block."""

from __future__ import annotations

from typing import Any, Dict, List

from . import _kiln


class Profile:
    """The result of ``with kiln.profile() as p:``, filled in when the block ends.

    ``p.rows``: one dict per op (``op``, ``calls``, ``timed``, ``total_s``, ``mean_s``,
    ``share``), most time first; ``p.clock``: ``"gpu_timestamps"``, or ``"wall_clock"`` where the
    adapter has no timestamp queries (each op then ran submitted and waited for alone, so its time
    includes that overhead); ``print(p)`` shows the table. While the block runs every dispatch
    gets a compute pass of its own, so profiled code runs slower. One profile at a time per
    process; it sees the work of every thread.
    """

    def __init__(self) -> None:
        self.rows: List[Dict[str, Any]] = []
        self.clock: str = ""
        self.total_s: float = 0.0
        self.wall_s: float = 0.0
        self._text = "(profile still running)"

    def __enter__(self) -> Profile:
        _kiln._profile_start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self._text, self.clock, self.total_s, self.wall_s, self.rows = _kiln._profile_stop()
        return False

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"kiln.Profile({len(self.rows)} ops, {self.total_s:.6f} s, clock={self.clock!r})"


def profile() -> Profile:
    """A context manager that profiles every dispatch in its block (see ``Profile``)."""
    return Profile()
