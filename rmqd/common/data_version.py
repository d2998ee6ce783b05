"""DataVersion: the version stamp of a broker's topic and subscription configs.

The broker bumps it on every config change and sends it with each registration; the name server
compares it with the last one to decide whether the broker's topic configs changed.  Shared by the
store's metadata files and the name server's registration bodies, in RocketMQ's JSON shape.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from typing import Required, TypedDict

    class DataVersionJson(TypedDict, total=False):
        timestamp: Required[int]
        counter: Required[int]
        stateVersion: int


@dataclass(eq=False)
class DataVersion:
    """Equal when timestamp, counter (and the 5.x stateVersion) match."""

    timestamp: int = 0
    counter: int = 0
    stateVersion: int | None = None  # 5.x only; omitted from JSON when absent

    @classmethod
    def fresh(cls) -> "DataVersion":
        """A new version stamped now, counter 0 (Java's ``new DataVersion()``)."""
        return cls(int(time.time() * 1000), 0)

    def next_version(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def key(self) -> tuple[int, int, int]:
        return (self.timestamp, self.counter, self.stateVersion or 0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataVersion) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def to_json(self) -> "DataVersionJson":
        d: DataVersionJson = {"counter": self.counter, "timestamp": self.timestamp}
        if self.stateVersion is not None:
            d["stateVersion"] = self.stateVersion
        return d

    to_fastjson = to_json

    @classmethod
    def from_json(cls, d: "Optional[DataVersionJson]") -> "DataVersion":
        """Lenient: a missing or malformed version reads as 0/0."""
        if not isinstance(d, dict):
            return cls()
        sv = d.get("stateVersion")
        return cls(int(d.get("timestamp") or 0), int(d.get("counter") or 0), None if sv is None else int(sv))
