"""Reader/writer options (case-insensitive, as Spark hands them over) and offset specs.

Offsets JSON is the RocketMQ connector's: ``{"topic": {"brokerName": {"queueId": offset}}}``, with -2 =
earliest and -1 = latest (Kafka's convention); ``earliest`` / ``latest`` apply to every queue.
"""
from __future__ import annotations

import json
from typing import Mapping, Optional, Union, overload

from rmqd.spark.remote import ConnectorError

EARLIEST, LATEST = -2, -1
DEFAULT_GROUP = "spark_rmqd_reader"
DEFAULT_PRODUCER_GROUP = "spark_rmqd_writer"

#: ``"earliest"``, ``"latest"`` or {topic: {brokerName: {queueId: offset}}}
OffsetSpec = Union[str, dict[str, dict[str, dict[str, int]]]]


class Options:
    def __init__(self, raw: Mapping[str, object]) -> None:
        self.raw = {str(k).lower(): v for k, v in dict(raw).items()}

    @overload
    def get(self, name: str) -> Optional[str]: ...

    @overload
    def get(self, name: str, default: str) -> str: ...

    @overload
    def get(self, name: str, default: Optional[str]) -> Optional[str]: ...

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        v = self.raw.get(name.lower())
        return default if v is None or v == "" else str(v)

    @overload
    def int(self, name: str) -> Optional[int]: ...

    @overload
    def int(self, name: str, default: int) -> int: ...

    def int(self, name: str, default: Optional[int] = None) -> Optional[int]:
        v = self.get(name)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            raise ConnectorError(f"option '{name}': {v!r} is not an integer") from None

    def bool(self, name: str, default: bool) -> bool:
        v = self.get(name)
        if v is None:
            return default
        if v.strip().lower() not in ("true", "false"):
            raise ConnectorError(f"option '{name}': {v!r} is not true or false")
        return v.strip().lower() == "true"

    def offsets(self, name: str, default: str) -> OffsetSpec:
        """``"earliest"``/``"latest"`` or the parsed JSON {topic: {broker: {qid: offset}}}."""
        v = self.get(name, default)
        if v.strip().lower() in ("earliest", "latest"):
            return v.strip().lower()
        try:
            spec: object = json.loads(v)
        except ValueError as exc:
            raise ConnectorError(f"option '{name}': not 'earliest', 'latest' or offsets JSON ({exc})") from None
        if not isinstance(spec, dict) or not all(
                isinstance(b, dict) and all(isinstance(q, dict) and all(_is_int(o) for o in q.values())
                                            for q in b.values()) for b in spec.values()):
            raise ConnectorError(f"option '{name}': expected {{\"topic\": {{\"brokerName\": {{\"queueId\": "
                                 f"offset}}}}}} with integer offsets (-2 earliest, -1 latest), got {v}")
        return spec

    def expression(self) -> tuple[str, str]:
        """(expressionType, expression) of the pull subscription: ``sql`` wins over ``subExpression``."""
        sql = self.get("sql")
        if sql is not None:
            if self.get("subExpression") not in (None, "*"):
                raise ConnectorError("set only one of the options 'subExpression' and 'sql'")
            return "SQL92", sql
        return "TAG", self.get("subExpression", "*")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def pick(spec: OffsetSpec, topic: str, broker: str, queue_id: int, default: int) -> int:
    """The offset a spec gives one queue: EARLIEST, LATEST or a number (missing queues: ``default``)."""
    if spec == "earliest":
        return EARLIEST
    if spec == "latest":
        return LATEST
    if isinstance(spec, str):          # Options.offsets gives only the two words above or the JSON
        raise ConnectorError(f"offsets {spec!r}: not 'earliest', 'latest' or offsets JSON")
    return int(spec.get(topic, {}).get(broker, {}).get(str(queue_id), default))
