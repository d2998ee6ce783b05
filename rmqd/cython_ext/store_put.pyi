"""Typed interface of store_put.pyx (the C put engine); see the .pyx for the behaviour."""
import enum
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Optional

from _typeshed import ReadableBuffer, WriteableBuffer

from rmqd.store.commitlog import CommitLog
from rmqd.store.config import StoreConfig
from rmqd.store.consume_queue import ConsumeQueue
from rmqd.store.consume_queues import ConsumeQueueTable
from rmqd.store.index_file import IndexService
from rmqd.store.mapped_file import MappedFile
from rmqd.store.message import Host
from rmqd.store.message_store import ListenerEntry


class PutMessageStatus(enum.IntEnum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9


class MapPtr:
    """One writable buffer export of a mapping and its raw address (NULL once released)."""

    def __init__(self, obj: WriteableBuffer) -> None: ...
    def release(self) -> None: ...
    @property
    def alive(self) -> bool: ...


def index_put_key(ptr: MapPtr, slots: int, max_index: int, key_hash: int, phy: int, ts: int) -> bool: ...


class MessageToStore:
    """A message handed to ``put_message(s)``; ``properties`` is the encoded ``k\\x01v\\x02`` string."""

    topic: str
    queue_id: int
    body: ReadableBuffer
    properties: str
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: Host
    store_host: Host
    reconsume_times: int
    prepared_transaction_offset: int
    tags_code: int
    keys: Optional[str]
    uniq_key: Optional[str]
    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __init__(self, topic: str, queue_id: int, body: ReadableBuffer, properties: str = "", flag: int = 0,
                 sys_flag: int = 0, born_timestamp: int = 0, born_host: Host = ("127.0.0.1", 0),
                 store_host: Host = ("127.0.0.1", 10911), reconsume_times: int = 0,
                 prepared_transaction_offset: int = 0, tags_code: int = 0, keys: Optional[str] = None,
                 uniq_key: Optional[str] = None) -> None: ...
    @classmethod
    def create(cls, topic: str, queue_id: int, body: ReadableBuffer,
               properties: Optional[dict[str, Optional[str]]] = None, *, flag: int = ..., sys_flag: int = ...,
               born_timestamp: int = ..., born_host: Host = ..., store_host: Host = ...,
               reconsume_times: int = ..., prepared_transaction_offset: int = ..., tags_code: int = ...,
               keys: Optional[str] = ..., uniq_key: Optional[str] = ...) -> "MessageToStore": ...
    def __eq__(self, other: object, /) -> bool: ...


class DispatchRequest:
    """One appended message, as handed to dispatch listeners."""

    topic: str
    queue_id: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: Optional[str]
    uniq_key: Optional[str]
    sys_flag: int
    properties: str

    def __init__(self, topic: str, queue_id: int, commitlog_offset: int, size: int, tags_code: int,
                 store_timestamp: int, queue_offset: int, keys: Optional[str], uniq_key: Optional[str],
                 sys_flag: int, properties: str) -> None: ...


class PutMessageResult:
    """Outcome of a put (``ok``: stored, possibly not yet flushed)."""

    status: PutMessageStatus
    wrote_offsets: list[int]
    queue_offset: int
    msg_count: int
    store_timestamp: int
    wrote_bytes: int
    remark: str
    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __init__(self, status: PutMessageStatus, wrote_offsets: Optional[Iterable[int]] = None,
                 queue_offset: int = 0, msg_count: int = 0, store_timestamp: int = 0, wrote_bytes: int = 0,
                 remark: str = "") -> None: ...
    @property
    def end_offset(self) -> int:
        """The CommitLog offset just past the last record written."""
    @property
    def ok(self) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...


class TopicPutCounter:
    """Messages and bytes stored for one topic since start."""

    nums: int
    size: int


class QueueState:
    """Write cursor of one consume queue (its last mapped file)."""

    cq: ConsumeQueue
    next_qoff: int


class PutEngine:
    """Appends messages for a MessageStore; see the .pyx."""

    clock: Optional[Callable[[], int]]
    listeners: list[ListenerEntry]
    states: dict[tuple[str, int], QueueState]
    topic_counters: dict[str, TopicPutCounter]
    running: bool
    disk_full: bool
    last_store_ts: int
    put_times_total: int
    put_size_total: int
    put_failed_total: int
    begin_time_in_lock: int
    dispatched_where: int
    put_latency_max_ms: float
    latency_by_caller: bool

    def __init__(self, config: StoreConfig, commitlog: CommitLog, index: IndexService,
                 consume_queues: ConsumeQueueTable, lock: threading.Lock,
                 delay_tags: Callable[[str, str, int], int], pack_host: Callable[[Host], bytes],
                 listeners: list[ListenerEntry], max_message_size: int, max_record_size: int,
                 clock: Optional[Callable[[], int]] = None) -> None: ...
    def reset(self) -> None: ...
    def drop_topic(self, topic: str) -> None: ...
    def queue_offset(self, topic: str, queue_id: int) -> int: ...
    def active_cq_files(self) -> list[MappedFile]: ...
    def dispatch_range(self, start: int, end: int, notify: bool = True) -> int: ...
    def lock_time_mills(self) -> int: ...
    def record_latency(self, ms: float) -> None: ...
    def put_distribution(self) -> list[int]: ...
    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutMessageResult: ...
    def put_message(self, msg: MessageToStore) -> PutMessageResult: ...


def populate(ptr: MapPtr, start: int, end: int) -> int: ...
