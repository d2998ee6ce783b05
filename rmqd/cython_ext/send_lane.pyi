"""Typed interface of send_lane.pyx (the single-message send fast path); see the .pyx for the behaviour."""
from collections.abc import Callable
from typing import Optional, Union

from rmqd.config import BrokerConfig
from rmqd.cython_ext.remoting_codec import RemotingCommand
from rmqd.remoting.command import BodyPart
from rmqd.cython_ext.store_put import PutEngine, PutMessageStatus
from rmqd.remoting.connection import Connection
from rmqd.remoting.dispatch import RequestHook
from rmqd.store.metadata import TopicConfigManager

SERVER_VERSION: int

# (end_offset, ok_frame, timeout_frame): a SYNC_FLUSH answer that waits for the flush
_FlushWait = tuple[int, bytes, bytes]


def java_string_hash(s: str) -> int: ...
def encode_frame(cmd: RemotingCommand) -> list[BodyPart]: ...
def prepare_reply(request: RemotingCommand, response: RemotingCommand) -> RemotingCommand: ...


class LaneTopicCounter:
    """Messages and bytes the lane stored for one topic, with message-size bucket counts."""

    nums: int
    size: int

    def bucket_counts(self) -> tuple[int, ...]: ...


class LaneMetrics:
    """Counters of the sends the lane served."""

    topics: dict[str, LaneTopicCounter]

    def __init__(self) -> None: ...
    def rpc_latency(self) -> list[tuple[int, bool, tuple[int, ...], float]]:
        """[(request code, oneway, bucket counts (non-cumulative), sum in ms)]."""


class SendLane:
    """Fast path for single-message sends; the owner fills the fields and keeps them current."""

    enabled: bool
    engine: PutEngine
    ok_status: PutMessageStatus
    topic_manager: TopicConfigManager
    broker_config: BrokerConfig
    valid_topics: set[str]
    markers: tuple[str, ...]
    store_host: tuple[str, int]
    max_body: int
    sync_flush: bool
    flush_waiter: Callable[[Connection, int, bytes, bytes], None]
    request_hook: Optional[RequestHook]
    served: int
    served_raw: int
    metrics: LaneMetrics
    msg_id_prefix: str

    def __init__(self) -> None: ...
    def handle(self, peer: tuple[str, int], cmd: RemotingCommand) -> Union[bytes, _FlushWait, None]: ...
    def serve_data(self, conn: Connection, data: bytes, out: list[BodyPart]) -> None: ...
