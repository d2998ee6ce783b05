"""The controller's Raft log entries: one event per state change (Java's ``impl/event`` package).

Types keep Java's ``EventType`` numbers (1 AlterSyncStateSet, 2 ApplyBrokerId, 3 ElectMaster,
5 CleanBrokerData, 6 UpdateBrokerAddress; 4, Java's "read" event, is the Raft barrier here and carries
no event).  An entry is a JSON array of events, so the events of one request commit together.

Unlike Java's, the events that change a replica group's epochs carry the epochs they were computed
against (``expect*``); applying one whose expectation no longer holds changes nothing and reports
False.  Two controllers that both believed they led (or a request retried across a leader change)
therefore cannot both move the same group.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Optional, Union

import orjson


@dataclass(frozen=True)
class AlterSyncStateSetEvent:
    TYPE: ClassVar[int] = 1
    brokerName: str
    newSyncStateSet: tuple[int, ...]
    expectMasterEpoch: Optional[int] = None
    expectSyncStateSetEpoch: Optional[int] = None


@dataclass(frozen=True)
class ApplyBrokerIdEvent:
    TYPE: ClassVar[int] = 2
    clusterName: str
    brokerName: str
    brokerAddress: str
    newBrokerId: int
    registerCheckCode: str


@dataclass(frozen=True)
class ElectMasterEvent:
    TYPE: ClassVar[int] = 3
    brokerName: str
    newMasterElected: bool
    newMasterBrokerId: Optional[int] = None
    expectMasterEpoch: Optional[int] = None


@dataclass(frozen=True)
class CleanBrokerDataEvent:
    TYPE: ClassVar[int] = 5
    brokerName: str
    brokerIdSetToClean: Optional[tuple[int, ...]] = None


@dataclass(frozen=True)
class UpdateBrokerAddressEvent:
    TYPE: ClassVar[int] = 6
    clusterName: str
    brokerName: str
    brokerAddress: str
    brokerId: int


Event = Union[AlterSyncStateSetEvent, ApplyBrokerIdEvent, ElectMasterEvent, CleanBrokerDataEvent,
              UpdateBrokerAddressEvent]
_BY_TYPE: dict[int, type[Event]] = {cls.TYPE: cls for cls in (AlterSyncStateSetEvent, ApplyBrokerIdEvent,
                                                              ElectMasterEvent, CleanBrokerDataEvent,
                                                              UpdateBrokerAddressEvent)}
_ID_SETS = ("newSyncStateSet", "brokerIdSetToClean")


def event_to_dict(event: Event) -> dict[str, object]:
    out: dict[str, object] = {"type": event.TYPE}
    for f in fields(event):
        value = getattr(event, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def event_from_dict(data: object) -> Event:
    """Inverse of :func:`event_to_dict`; ValueError for anything that is not a known, well-formed event."""
    if not isinstance(data, dict):
        raise ValueError(f"event is not an object: {data!r}")
    type_code = data.get("type")
    cls = _BY_TYPE.get(type_code) if isinstance(type_code, int) else None
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    kwargs = {k: v for k, v in data.items() if k != "type"}
    for name in _ID_SETS:
        if kwargs.get(name) is not None:
            kwargs[name] = tuple(sorted(int(x) for x in kwargs[name]))
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"malformed {cls.__name__}: {exc}") from None


def encode_events(events: list[Event]) -> bytes:
    """One Raft entry: the events of one request."""
    return orjson.dumps([event_to_dict(e) for e in events])


def decode_events(payload: bytes) -> list[Event]:
    data = orjson.loads(payload)
    if not isinstance(data, list):
        raise ValueError("a controller log entry is a JSON array of events")
    return [event_from_dict(item) for item in data]
