"""Collecting every problem of one hand-validated YAML file, each located in the file.

Used where a file is validated key by key (studies, what-if proposals) rather
than by one pydantic model: ``P.at(path, msg)`` records
``file:line:col key.path: msg``; ``P.check_keys`` reports unknown keys with a
"did you mean" and missing required ones; ``raise_if_any`` raises them all at
once as one SpecError.
"""

from __future__ import annotations

import re

from dse.errors import SpecError, did_you_mean
from dse.spec.yamlio import key_loc, locate

_LOC = re.compile(r"^(<input>|<string>):\d+:\d+ ")


def strip_location(msg: str) -> str:
    """'<input>:1:1 units: ...' (a located message about a dict built in memory) -> 'units: ...'."""
    return _LOC.sub("", msg)


class Problems:
    """Every problem of one file, located ``file:line:col key.path: message``."""

    def __init__(self, data, file: str):
        self.data, self.file, self.items = data, file, []

    def at(self, path: tuple, msg: str, key: bool = False) -> None:
        f, (line, col) = (key_loc if key else locate)(self.data, path)
        dotted = ".".join(str(p) for p in path)
        self.items.append(f"{f}:{line}:{col} {dotted}: {msg}" if dotted else f"{f}:{line}:{col}: {msg}")

    def extend(self, path: tuple, err: SpecError, key: bool = False) -> None:
        for m in err.problems:
            self.at(path, strip_location(m), key)

    def check_keys(self, known, required=()) -> None:
        """Unknown top-level keys (with a suggestion) and missing required ones."""
        for k in self.data:
            if k not in known:
                self.at((k,), f"unknown key{did_you_mean(str(k), known)}; known keys: {', '.join(known)}", key=True)
        for k in required:
            if k not in self.data:
                self.at((), f"missing required key '{k}'")

    def raise_if_any(self) -> None:
        if self.items:
            raise SpecError(self.items)
