"""The timeline kernel's scratch arrays: one set per worker thread and scan, written into pass after pass.

glibc gives the top of a thread's heap back to the system whenever enough of it is free, so per-line arrays made
and dropped every pass were faulted in again every pass (about 235k page faults a GiB). The kernel's common steps
write into these arrays instead (numpy's ``out=``), so a pass allocates nothing of a pass's size and no pass pays
for page faults. An array grows to the largest size asked and stays so until the scan ends.

A pass's arrays are attributes of one ``PassArrays`` (views of the pass's length, made once per pass: a lookup
per array and step would cost more than the step on small passes). ``t0``..``t5`` are temporaries of one step
(``t0i`` is ``t0``'s memory as ``intp``), except that a pass's minutes and days end in ``t4`` and ``t5``; every
other name holds one value while the pass needs it. The arrays are few, for memory and the core's cache.
"""

from __future__ import annotations

import threading
from typing import Any


def _np() -> Any:
    import numpy

    return numpy


_TEMPORARIES = 6
_U64 = (
    *(f"t{index}" for index in range(_TEMPORARIES)),
    *(f"word{index}" for index in range(8)),
    "level_word",
    "source",
    "tally_day",
)
_INTP = ("ends", "level", "direct", "tally_level", "tally_minute")
_TWINS = tuple(f"t{index}" for index in range(_TEMPORARIES))  # also seen as intp, as ``<name>i``
_FLAGS = (
    "taken",
    "f1",
    "f2",
    "f3",
    "f4",
    "level_same",
    "direct_same",
    "could_err",
    "with_level",
    "undecided",
    "not_taken",
    "candidates",
)
_U8 = ("after",)


class PassArrays:
    """One pass's arrays, each as long as the pass (see the module's docstring for the names)."""

    words: tuple[Any, ...]

    def __getattr__(self, name: str) -> Any:  # every array is set in __init__; this only tells mypy so
        raise AttributeError(name)

    def __init__(self, bases: dict[str, Any], size: int) -> None:
        np = _np()
        for name, base in bases.items():
            setattr(self, name, base[:size])
        for name in _TWINS:
            setattr(self, f"{name}i", bases[name][:size].view(np.intp))
        self.words = tuple(getattr(self, f"word{index}") for index in range(8))


class Scratch:
    """One thread's arrays: those of a pass (``for_pass``), and those of a slice's line starts (``u64``,
    ``intp``, ``flags``: named, sized as asked)."""

    def __init__(self) -> None:
        self.np = _np()
        self._bases: dict[str, Any] = {}
        self._capacity = 0
        self._current: PassArrays | None = None
        self._size = -1
        self._slice: dict[str, Any] = {}

    def for_pass(self, size: int) -> PassArrays:
        """The arrays of a pass of ``size`` lines (the previous pass's, if it had as many)."""
        if size == self._size and self._current is not None:
            return self._current
        if size > self._capacity or not self._bases:
            np = self.np
            kinds = ((_U64, np.uint64), (_INTP, np.intp), (_FLAGS, np.bool_), (_U8, np.uint8))
            self._capacity = size + size // 8  # the next passes may be a little longer
            self._bases = {name: np.empty(self._capacity, dtype=dtype) for names, dtype in kinds for name in names}
        self._current, self._size = PassArrays(self._bases, size), size
        return self._current

    def _take(self, name: str, size: int, dtype: Any) -> Any:
        array = self._slice.get(name)
        if array is None or len(array) < size:
            array = self.np.empty(size + size // 8, dtype=dtype)  # the next slices may be a little longer
            self._slice[name] = array
        return array[:size]

    def u64(self, name: str, size: int) -> Any:
        return self._take(name, size, self.np.uint64)

    def intp(self, name: str, size: int) -> Any:
        return self._take(name, size, self.np.intp)

    def flags(self, name: str, size: int) -> Any:
        return self._take(name, size, self.np.bool_)


class Scratches:
    """A scan's scratch arrays, one set per thread that counts for it; dropped with the scan."""

    def __init__(self) -> None:
        self._local = threading.local()

    def mine(self) -> Scratch:
        scratch: Scratch | None = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = Scratch()
            self._local.scratch = scratch
        return scratch
