"""Name-server value types in RocketMQ's JSON shapes (README §3.0): DataVersion, QueueData, BrokerData, and the
RegisterBrokerBody codec (JSON and the ``compressed`` zlib form) of the brokers' TopicConfig (rmqd.store.metadata)."""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Union, cast

from rmqd.common.constants import PERM_READ, PERM_WRITE
from rmqd.common.data_version import DataVersion  # noqa: F401  (re-exported: part of the body types)
from rmqd.remoting.fastjson import dumps, loads_lenient
from rmqd.store.metadata import TopicConfig

if TYPE_CHECKING:
    from typing import Required, TypedDict

    from rmqd.common.data_version import DataVersionJson
    from rmqd.remoting.fastjson import Encodable, JsonValue
    from rmqd.store.metadata import TopicsFileJson

    # The JSON shapes the decoders read a body as (a body of another shape raises there).
    class QueueDataJson(TypedDict, total=False):
        brokerName: Required[str]
        readQueueNums: int
        writeQueueNums: int
        perm: int
        topicSysFlag: Optional[int]

    class TopicRouteDataJson(TypedDict, total=False):    # what REGISTER_TOPIC_IN_NAMESRV's body is read for
        queueDatas: list[QueueDataJson]

    class RegisterBrokerBodyJson(TypedDict, total=False):
        topicConfigSerializeWrapper: TopicsFileJson
        filterServerList: list[str]

TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2


@dataclass
class QueueData:
    """One broker's queues of one topic (route ``queueDatas`` entry)."""

    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int = 0

    def to_fastjson(self) -> dict[str, Union[str, int]]:
        return {"brokerName": self.brokerName, "perm": self.perm, "readQueueNums": self.readQueueNums,
                "topicSysFlag": self.topicSysFlag, "writeQueueNums": self.writeQueueNums}

    @classmethod
    def from_json(cls, d: QueueDataJson) -> "QueueData":
        return cls(str(d["brokerName"]), int(d.get("readQueueNums", 0)), int(d.get("writeQueueNums", 0)),
                   int(d.get("perm", PERM_READ | PERM_WRITE)), int(d.get("topicSysFlag") or 0))


@dataclass
class BrokerData:
    """A broker group: cluster, name and id → address (0 = master)."""

    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = field(default_factory=dict)

    def clone(self) -> "BrokerData":
        return BrokerData(self.cluster, self.brokerName, dict(self.brokerAddrs))

    def to_fastjson(self) -> dict[str, Union[str, dict[int, str]]]:
        return {"brokerAddrs": self.brokerAddrs, "brokerName": self.brokerName, "cluster": self.cluster}


@dataclass
class RegisterBrokerBody:
    """REGISTER_BROKER body: TopicConfigSerializeWrapper + filter server list."""

    data_version: DataVersion = field(default_factory=DataVersion)
    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)
    filter_server_list: list[str] = field(default_factory=list)

    def to_fastjson(self) -> dict[str, Encodable]:
        return {"filterServerList": self.filter_server_list,
                "topicConfigSerializeWrapper": {"dataVersion": self.data_version,
                                                "topicConfigTable": self.topic_configs}}

    def encode(self, compressed: bool = False) -> bytes:
        """The body a Java broker sends (``RegisterBrokerBody.encode(compress)``)."""
        if not compressed:
            return dumps(self)
        out = bytearray()

        def chunk(data: bytes) -> None:
            out.extend(struct.pack(">i", len(data)))
            out.extend(data)

        chunk(dumps(self.data_version))
        out.extend(struct.pack(">i", len(self.topic_configs)))
        for tc in self.topic_configs.values():
            chunk(tc.encode_compact().encode("utf-8"))
        chunk(dumps(self.filter_server_list))
        return zlib.compress(bytes(out), 9)

    @classmethod
    def decode(cls, body: bytes, compressed: bool = False, wrapper_only: bool = False) -> "RegisterBrokerBody":
        """Parse a REGISTER_BROKER body; ``wrapper_only`` = pre-3.0.11 brokers (bare wrapper JSON)."""
        if compressed:
            return cls._decode_compressed(body)
        doc = loads_lenient(body) or {}
        data = cast("RegisterBrokerBodyJson", doc)          # decoded JSON, read as its shape
        wrapper = cast("TopicsFileJson", doc) if wrapper_only else (data.get("topicConfigSerializeWrapper") or {})
        table = wrapper.get("topicConfigTable") or {}
        configs = {}
        for name, tc in table.items():
            config = TopicConfig.from_json(tc)
            configs[str(name)] = config
        filters = [] if wrapper_only else [str(a) for a in (data.get("filterServerList") or [])]
        return cls(DataVersion.from_json(wrapper.get("dataVersion")), configs, filters)

    @classmethod
    def _decode_compressed(cls, body: bytes) -> "RegisterBrokerBody":
        raw = zlib.decompress(body)
        pos = 0

        def read_int() -> int:
            nonlocal pos
            if pos + 4 > len(raw):
                raise ValueError("End of compressed data has reached")
            value: int = struct.unpack_from(">i", raw, pos)[0]
            pos += 4
            return value

        def read_bytes(n: int) -> bytes:
            nonlocal pos
            if n < 0 or pos + n > len(raw):
                raise ValueError("End of compressed data has reached")
            data = raw[pos:pos + n]
            pos += n
            return data

        # decoded JSON: DataVersion.from_json is lenient (anything but an object reads as 0/0)
        version = DataVersion.from_json(cast("Optional[DataVersionJson]", loads_lenient(read_bytes(read_int()))))
        configs = {}
        for _ in range(read_int()):
            tc = TopicConfig.decode_compact(read_bytes(read_int()).decode("utf-8"))
            configs[tc.topic_name] = tc
        filters = cast("list[JsonValue]", loads_lenient(read_bytes(read_int())) or [])     # decoded JSON
        return cls(version, configs, [str(a) for a in filters])
