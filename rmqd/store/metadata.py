"""Broker metadata persisted as JSON in the Java broker's shapes (README §3.0, §5.5).

* :func:`atomic_write` – tmp + fsync, previous content kept as ``.bak``, atomic rename.
* :func:`load_json_file` – falls back to ``.bak``; the files are read as fastjson writes and reads them
  (:func:`rmqd.remoting.fastjson.loads_lenient`: unquoted integer keys ``{0:123}`` and the rest of its dialect).
* Managers: :class:`TopicConfigManager` (topics.json), :class:`SubscriptionGroupManager`
  (subscriptionGroup.json), :class:`ConsumerOffsetManager` (consumerOffset.json),
  :class:`DelayOffsetManager` (delayOffset.json).  All are thread-safe.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Generic, Mapping, Optional, TypeVar, cast

import orjson

from rmqd.common.constants import (BENCHMARK_TOPIC, DLQ_GROUP_TOPIC_PREFIX, OFFSET_MOVED_EVENT,  # noqa: F401 (re-exported)
                            PERM_INHERIT, PERM_PRIORITY, PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX,
                            SCHEDULE_TOPIC, SELF_TEST_TOPIC, TRACE_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
                            TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC)
from rmqd.common.constants import AUTO_CREATE_TOPIC_KEY_TOPIC as TBW102
from rmqd.common.backup_read import read_with_backup
from rmqd.common.data_version import DataVersion
from rmqd.common.fileutil import atomic_write  # noqa: F401  (re-exported for callers)
from rmqd.remoting.fastjson import loads_lenient

if TYPE_CHECKING:
    from typing import Required, TypedDict

    from rmqd.common.data_version import DataVersionJson
    from rmqd.remoting.fastjson import JsonValue

    # The JSON shapes of the Java broker's files and bodies (what decode trusts, what encode writes).
    class TopicConfigJson(TypedDict, total=False):
        topicName: Required[str]
        readQueueNums: int
        writeQueueNums: int
        perm: int
        topicFilterType: Optional[str]      # null in a name server's table: the default
        topicSysFlag: Optional[int]
        order: bool
        attributes: dict[str, str]

    class TopicsFileJson(TypedDict, total=False):          # TopicConfigSerializeWrapper
        dataVersion: DataVersionJson
        topicConfigTable: dict[str, TopicConfigJson]

    class SubscriptionGroupJson(TypedDict, total=False):
        groupName: Required[str]
        consumeEnable: bool
        consumeFromMinEnable: bool
        consumeBroadcastEnable: bool
        retryQueueNums: int
        retryMaxTimes: int
        brokerId: int
        whichBrokerWhenConsumeSlowly: int
        notifyConsumerIdsChangedEnable: bool
        consumeMessageOrderly: bool
        attributes: dict[str, str]

    class SubscriptionGroupsFileJson(TypedDict, total=False):  # SubscriptionGroupWrapper
        dataVersion: DataVersionJson
        subscriptionGroupTable: dict[str, SubscriptionGroupJson]
        forbiddenTable: dict[str, dict[str, int]]

    class ConsumerOffsetFileJson(TypedDict, total=False):
        offsetTable: dict[str, dict[str, int]]

    class DelayOffsetFileJson(TypedDict, total=False):
        offsetTable: dict[str, int]

log = logging.getLogger(__name__)

DocT = TypeVar("DocT", bound=Mapping[str, object])

REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
TOPIC_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")


# ---------------------------------------------------------------------------------- JSON I/O
def _parse_config_json(raw: bytes) -> "JsonValue":
    """A config file's JSON; ValueError when it is empty or corrupt (incl. UnicodeDecodeError: flipped bytes)."""
    if not raw.strip():
        raise ValueError("the file is empty")
    return loads_lenient(raw.decode("utf-8"))


def load_json_file(path: str) -> "Optional[JsonValue]":
    """Parse ``path``, falling back to ``path.bak`` if missing/empty/corrupt; None if neither."""
    found = read_with_backup(path, _parse_config_json, (ValueError,), "config file")
    return None if found is None else found[1]


def dumps_pretty(obj: Mapping[str, object]) -> str:
    """Pretty, key-sorted JSON like the Java broker's files (orjson: the stdlib encoder falls back
    to pure Python when indenting, which made every topic change O(topics) slow)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


class ConfigManager(Generic[DocT]):
    """Base: ``encode() -> DocT`` / ``decode(DocT)`` + load/persist with .bak fallback. ``DocT`` is the file's
    JSON shape; a file of another shape fails in ``decode`` and the backup is tried."""

    file_name = ""

    def __init__(self, config_dir: str) -> None:
        self.config_dir = config_dir
        self.path = os.path.join(config_dir, self.file_name)
        self._lock = threading.RLock()

    def load(self) -> bool:
        data = load_json_file(self.path)
        if data is None:
            return False
        try:
            with self._lock:
                self.decode(cast(DocT, data))
        except Exception as e:   # well-formed JSON of the wrong shape: a damaged file
            log.error("config file %s does not decode (%r); trying the backup", self.path, e)
            data = load_json_file(self.path + ".bak")
            try:
                with self._lock:
                    self.decode(cast(DocT, data or {}))
            except Exception as e2:
                log.error("backup of %s does not decode either (%r); starting from defaults", self.path, e2)
                return False
        return True

    def persist(self) -> None:
        with self._lock:
            text = dumps_pretty(self.encode())
        atomic_write(self.path, text)

    def encoded(self) -> DocT:
        """``encode()`` under the manager's lock: a consistent copy (e.g. for a response body)."""
        with self._lock:
            return self.encode()

    def encode(self) -> DocT:  # pragma: no cover - abstract
        raise NotImplementedError

    def decode(self, data: DocT) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


# ---------------------------------------------------------------------------------- topics
@dataclass
class TopicConfig:
    """A topic's config (Java's common TopicConfig): the broker's topics.json entries, the wrapper a broker
    registers with the name servers, the name server's view of them."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> "TopicConfigJson":
        d: TopicConfigJson = {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
             "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
             "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}
        if self.attributes:
            d["attributes"] = dict(self.attributes)
        return d

    def to_fastjson(self) -> "TopicConfigJson":
        """The bean as :func:`rmqd.remoting.fastjson.dumps` writes it (the same fields as :meth:`to_json`)."""
        return self.to_json()

    def java_str(self) -> str:
        """TopicConfig.toString() of 4.9.8 (quoted in some remarks), perm as PermName.perm2String."""
        perm = ("R" if self.perm & PERM_READ else "-") + ("W" if self.perm & PERM_WRITE else "-") + \
            ("X" if self.perm & 1 else "-")
        return (f"TopicConfig [topicName={self.topic_name}, readQueueNums={self.read_queue_nums}, "
                f"writeQueueNums={self.write_queue_nums}, perm={perm}, topicFilterType={self.topic_filter_type}, "
                f"topicSysFlag={self.topic_sys_flag}, order={'true' if self.order else 'false'}]")

    @classmethod
    def from_json(cls, d: "TopicConfigJson") -> "TopicConfig":
        """A JSON TopicConfig; a missing or null field takes its default."""
        return cls(topic_name=str(d["topicName"]), read_queue_nums=int(d.get("readQueueNums", 16)),
                   write_queue_nums=int(d.get("writeQueueNums", 16)),
                   perm=int(d.get("perm", PERM_READ | PERM_WRITE)),
                   topic_filter_type=str(d.get("topicFilterType") or "SINGLE_TAG"),
                   topic_sys_flag=int(d.get("topicSysFlag") or 0), order=bool(d.get("order", False)),
                   attributes=dict(d.get("attributes") or {}))

    def encode_compact(self) -> str:
        """TopicConfig.encode(): ``"name readQ writeQ perm FILTERTYPE"`` (compressed register body)."""
        return f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} {self.topic_filter_type}"

    @classmethod
    def decode_compact(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        if len(parts) < 5:
            raise ValueError(f"bad compact TopicConfig {text!r}")
        return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_valid_topic_name(topic: str) -> bool:
    return bool(topic) and len(topic) <= 127 and bool(TOPIC_NAME_RE.match(topic))


class TopicConfigManager(ConfigManager["TopicsFileJson"]):
    """topics.json: TopicConfigSerializeWrapper ``{"dataVersion":…, "topicConfigTable":{…}}``.

    ``on_change(topic_config | None)`` is called after a change is persisted (e.g. to re-register
    with the name server); it may be called from any thread. ``on_change_many(topic_configs)``, when set, is
    called instead, once, for the configs :meth:`update_many` stored under one data version (a name server
    takes one registration per data version: one per topic would register only the first).
    """

    file_name = "topics.json"

    def __init__(self, config_dir: str, broker_cluster_name: str = "DefaultCluster",
                 broker_name: str = "broker-a", auto_create_topic_enable: bool = True,
                 default_topic_queue_nums: int = 8, cluster_topic_enable: bool = True,
                 broker_topic_enable: bool = True, trace_topic_enable: bool = False,
                 on_change: Optional[Callable[[Optional[TopicConfig]], None]] = None,
                 on_change_many: Optional[Callable[[list[TopicConfig]], None]] = None,
                 transaction_topics_at_start: bool = False) -> None:
        super().__init__(config_dir)
        self.cluster = broker_cluster_name
        self.broker_name = broker_name
        self.auto_create_topic_enable = auto_create_topic_enable
        self.data_version = DataVersion.fresh()
        self.table: dict[str, TopicConfig] = {}
        self.on_change = on_change
        self.on_change_many = on_change_many
        self.system_topics: set[str] = set()
        self._add_system(TopicConfig(SELF_TEST_TOPIC, 1, 1))
        if auto_create_topic_enable:
            self._add_system(TopicConfig(TBW102, default_topic_queue_nums, default_topic_queue_nums,
                                         PERM_INHERIT | PERM_READ | PERM_WRITE))
        self._add_system(TopicConfig(BENCHMARK_TOPIC, 1024, 1024))
        perm = PERM_INHERIT | ((PERM_READ | PERM_WRITE) if cluster_topic_enable else 0)
        self._add_system(TopicConfig(broker_cluster_name, 16, 16, perm))
        perm = PERM_INHERIT | ((PERM_READ | PERM_WRITE) if broker_topic_enable else 0)
        self._add_system(TopicConfig(broker_name, 1, 1, perm))
        self._add_system(TopicConfig(OFFSET_MOVED_EVENT, 1, 1))
        self._add_system(TopicConfig(SCHEDULE_TOPIC, 18, 18))
        if trace_topic_enable:
            self._add_system(TopicConfig(TRACE_TOPIC, 1, 1))
        self._add_system(TopicConfig(f"{broker_cluster_name}_{REPLY_TOPIC_POSTFIX}", 1, 1))
        # the transaction topics appear when first used, as in Java 4.x: the half topic in the checker's first
        # round, the op-half and check-max-time topics when first written (TransactionalMessageBridge). 5.x
        # (RIP-32) creates the half and op-half topics at start; rmqd does too in controller mode (a 5.x-only
        # deployment), where it matters: Java 5.5.0 slaves copy the master's topic table, and one promoted that
        # then creates the half topic in its first check while it is demoted again stalls for 90 s (its
        # changeTransactionCheckServiceStatus holds the BrokerController monitor while joining the check thread,
        # which waits for that monitor in registerIncrementBrokerData)
        if transaction_topics_at_start:
            self._add_system(TopicConfig(TRANS_HALF_TOPIC, 1, 1))
            self._add_system(TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1))
        self.system_topics.update((TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC))

    def _add_system(self, tc: TopicConfig) -> None:
        self.table[tc.topic_name] = tc
        self.system_topics.add(tc.topic_name)

    def add_system_topic(self, tc: TopicConfig) -> None:
        """Add a broker-internal topic (e.g. the POP revive topic) to the table, not persisted."""
        with self._lock:
            self._add_system(tc)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic.startswith("rmq_sys_")

    # -- persistence
    def encode(self) -> "TopicsFileJson":
        return {"dataVersion": self.data_version.to_json(),
                "topicConfigTable": {k: v.to_json() for k, v in sorted(self.table.items())}}

    def decode(self, data: "TopicsFileJson") -> None:
        for name, d in (data.get("topicConfigTable") or {}).items():
            tc = TopicConfig.from_json(d)
            if name == TBW102 and not self.auto_create_topic_enable:
                tc.perm = PERM_READ | PERM_WRITE
            self.table[name] = tc
        self.data_version = DataVersion.from_json(data.get("dataVersion"))

    def wrapper(self, only: Optional[TopicConfig | list[TopicConfig]] = None) -> "TopicsFileJson":
        """TopicConfigSerializeWrapper for REGISTER_BROKER / GET_ALL_TOPIC_CONFIG; with ``only`` (a config or a
        list of them), the same shape holding just those topics (incremental registration)."""
        with self._lock:
            if only is None:
                return self.encode()
            tcs = only if isinstance(only, list) else [only]
            return {"dataVersion": self.data_version.to_json(),
                    "topicConfigTable": {tc.topic_name: tc.to_json() for tc in tcs}}

    # -- access
    def get(self, topic: str) -> Optional[TopicConfig]:
        return self.table.get(topic)

    def bump_version(self) -> None:
        """A new data version without a table change (the broker's permission changed: re-register)."""
        with self._lock:
            self.data_version.next_version()

    def topics(self) -> list[str]:
        return list(self.table)

    def _changed(self) -> None:
        """Under the lock: a new data version, persisted. The caller then calls :meth:`_notify` outside it."""
        self.data_version.next_version()
        self.persist()

    def _notify(self, tc: Optional[TopicConfig]) -> None:
        """``on_change`` after the lock is released: the broker's callback builds a registration body, which takes
        its own lock and then this table's (called under this lock, a registration built at the same moment by
        another thread deadlocked both for good: the transaction checker creating the half topic)."""
        if self.on_change is not None:
            try:
                self.on_change(tc)
            except Exception:
                log.exception("topic change callback failed for %s", tc.topic_name if tc else None)

    def update(self, tc: TopicConfig) -> None:
        """Create or replace a topic config, persist and notify."""
        with self._lock:
            old = self.table.get(tc.topic_name)
            self.table[tc.topic_name] = tc
            log.debug("topic config %s: %s -> %s", "updated" if old else "created", old, tc)
            self._changed()
        self._notify(tc)

    def update_many(self, tcs: list[TopicConfig]) -> None:
        """Create or replace several topic configs: one persist, then one notification per topic."""
        if not tcs:
            return
        with self._lock:
            for tc in tcs:
                self.table[tc.topic_name] = tc
            self._changed()
        if self.on_change_many is not None:
            try:
                self.on_change_many(list(tcs))
            except Exception:
                log.exception("topic change callback failed for %s", [tc.topic_name for tc in tcs])
        else:
            for tc in tcs:
                self._notify(tc)

    def delete(self, topic: str) -> Optional[TopicConfig]:
        with self._lock:
            old = self.table.pop(topic, None)
            if old is not None:
                log.debug("topic config deleted: %s", old)
                self._changed()
        if old is not None:
            self._notify(None)
        return old

    def create_topic_in_send_message_method(self, topic: str, default_topic: str, remote_addr: str,
                                            client_default_topic_queue_nums: int,
                                            topic_sys_flag: int = 0) -> Optional[TopicConfig]:
        """Auto-create ``topic`` from ``default_topic`` (README §6.11); None if not allowed."""
        with self._lock:
            tc = self.table.get(topic)
            if tc is not None:
                return tc
            dflt = self.table.get(default_topic)
            if dflt is None:
                log.warning("create topic %s from %s (%s): default topic does not exist", topic,
                            default_topic, remote_addr)
                return None
            perm = dflt.perm
            if default_topic == TBW102 and not self.auto_create_topic_enable:
                perm = PERM_READ | PERM_WRITE
            if not perm & PERM_INHERIT:
                log.warning("create topic %s from %s (%s): default topic has no inherit perm (%d)",
                            topic, default_topic, remote_addr, perm)
                return None
            n = max(0, min(client_default_topic_queue_nums, dflt.write_queue_nums))
            tc = TopicConfig(topic, n, n, perm & ~PERM_INHERIT, dflt.topic_filter_type, topic_sys_flag)
            self.table[topic] = tc
            log.debug("auto-created topic %s from %s for %s: %s", topic, default_topic, remote_addr, tc)
            self._changed()
        self._notify(tc)
        return tc

    def create_topic_in_send_message_back_method(self, topic: str, client_queue_nums: int,
                                                 perm: int = PERM_READ | PERM_WRITE,
                                                 topic_sys_flag: int = 0) -> TopicConfig:
        """Create retry/DLQ topics (independent of autoCreateTopicEnable)."""
        with self._lock:
            tc = self.table.get(topic)
            if tc is not None:
                return tc
            tc = TopicConfig(topic, client_queue_nums, client_queue_nums, perm, "SINGLE_TAG",
                             topic_sys_flag)
            self.table[topic] = tc
            self._changed()
        self._notify(tc)
        return tc

    def create_retry_topic(self, group: str, retry_queue_nums: int = 1) -> TopicConfig:
        return self.create_topic_in_send_message_back_method(retry_topic(group), retry_queue_nums)

    def create_dlq_topic(self, group: str) -> TopicConfig:
        return self.create_topic_in_send_message_back_method(dlq_topic(group), 1)


# ---------------------------------------------------------------------------------- groups
@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False         # 5.x: a FIFO group (POP hands each queue out in order)
    attributes: dict[str, str] = field(default_factory=dict)

    _MAP = (("group_name", "groupName"), ("consume_enable", "consumeEnable"),
            ("consume_from_min_enable", "consumeFromMinEnable"),
            ("consume_broadcast_enable", "consumeBroadcastEnable"),
            ("retry_queue_nums", "retryQueueNums"), ("retry_max_times", "retryMaxTimes"),
            ("broker_id", "brokerId"),
            ("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly"),
            ("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable"),
            ("consume_message_orderly", "consumeMessageOrderly"))

    def to_json(self) -> "SubscriptionGroupJson":
        d = cast("SubscriptionGroupJson", {j: getattr(self, p) for p, j in self._MAP})
        if not self.consume_message_orderly:       # 4.9 has no such field: written only when set (5.x)
            del d["consumeMessageOrderly"]
        if self.attributes:
            d["attributes"] = dict(self.attributes)
        return d

    @classmethod
    def from_json(cls, d: "SubscriptionGroupJson") -> "SubscriptionGroupConfig":
        """The fields ``d`` has (as they are: Java's values), the defaults for the others."""
        fields: Mapping[str, object] = d
        kw = {p: fields[j] for p, j in cls._MAP if j in fields}
        kw["attributes"] = dict(d.get("attributes") or {})
        return cls(**kw)  # type: ignore[arg-type]  # the file's values, unchecked as Java binds them


# The groups SubscriptionGroupManager creates at start (4.9.8); CID_SYS_RMQ_TRANS (the transaction
# checker's) is a system group too but Java never writes a config for it.
DEFAULT_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                  "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")
SYSTEM_GROUPS = DEFAULT_GROUPS + ("CID_SYS_RMQ_TRANS",)


class SubscriptionGroupManager(ConfigManager["SubscriptionGroupsFileJson"]):
    """subscriptionGroup.json: ``{"dataVersion":…, "subscriptionGroupTable":{…}}``."""

    file_name = "subscriptionGroup.json"

    def __init__(self, config_dir: str, auto_create_subscription_group: bool = True) -> None:
        super().__init__(config_dir)
        self.auto_create = auto_create_subscription_group
        self.data_version = DataVersion.fresh()
        self.table: dict[str, SubscriptionGroupConfig] = {}
        # 5.x: group -> topic -> forbidden permission bits (UPDATE_AND_GET_GROUP_FORBIDDEN; bit 2: read)
        self.forbidden: dict[str, dict[str, int]] = {}
        for g in DEFAULT_GROUPS:
            self.table[g] = SubscriptionGroupConfig(g, consume_broadcast_enable=True)

    def encode(self) -> "SubscriptionGroupsFileJson":
        out: SubscriptionGroupsFileJson = {"dataVersion": self.data_version.to_json(),
               "subscriptionGroupTable": {k: v.to_json() for k, v in sorted(self.table.items())}}
        if self.forbidden:              # 5.x's key; written only when something is forbidden (4.9 has none)
            out["forbiddenTable"] = {g: dict(t) for g, t in sorted(self.forbidden.items())}
        return out

    def decode(self, data: "SubscriptionGroupsFileJson") -> None:
        for name, d in (data.get("subscriptionGroupTable") or {}).items():
            self.table[name] = SubscriptionGroupConfig.from_json(d)
        self.forbidden = {str(g): {str(t): int(v) for t, v in (topics or {}).items() if int(v) > 0}
                          for g, topics in (data.get("forbiddenTable") or {}).items() if topics}
        self.data_version = DataVersion.from_json(data.get("dataVersion"))

    def get_forbidden(self, group: str, topic: str, index: int) -> bool:
        """Whether permission bit ``index`` of ``topic`` is forbidden to ``group`` (SubscriptionGroupManager)."""
        return bool(self.forbidden.get(group, {}).get(topic, 0) >> index & 1)

    def update_forbidden(self, group: str, topic: str, index: int, forbid: bool) -> None:
        """Set or clear one forbidden bit and persist (a topic left with no bit set is dropped)."""
        with self._lock:
            topics = self.forbidden.get(group, {})
            old = topics.get(topic, 0)
            value = old | (1 << index) if forbid else old & ~(1 << index)
            if value == old:
                return
            if value:
                self.forbidden.setdefault(group, {})[topic] = value
            else:
                topics.pop(topic, None)
                if not topics:
                    self.forbidden.pop(group, None)
            log.info("group forbidden %s@%s: %d -> %d", group, topic, old, value)
            self.data_version.next_version()
            self.persist()

    def find(self, group: str) -> Optional[SubscriptionGroupConfig]:
        """Config of ``group``; auto-created (and persisted) when enabled."""
        sg = self.table.get(group)
        if sg is None and self.auto_create:
            with self._lock:
                sg = self.table.get(group)
                if sg is None:
                    sg = SubscriptionGroupConfig(group)
                    self.table[group] = sg
                    log.debug("auto-created subscription group %s", group)
                    self.data_version.next_version()
                    self.persist()
        return sg

    def update(self, sg: SubscriptionGroupConfig) -> None:
        with self._lock:
            self.table[sg.group_name] = sg
            self.data_version.next_version()
            self.persist()

    def delete(self, group: str) -> Optional[SubscriptionGroupConfig]:
        with self._lock:
            old = self.table.pop(group, None)
            if old is not None:
                self.data_version.next_version()
                self.persist()
            return old


# ---------------------------------------------------------------------------------- offsets
def _topic_group(key: str) -> tuple[str, str]:
    """(topic, group) of a consumer offset table key ``topic@group``."""
    topic, _, group = key.partition("@")
    return topic, group


class PeriodicConfigManager(ConfigManager[DocT]):
    """A config file persisted every ``interval_s`` when dirty, and on :meth:`shutdown`."""

    interval_s = 5.0

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self._dirty = False
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self, first_delay_s: Optional[float] = None) -> None:
        def loop() -> None:
            if self._stopping.wait(self.interval_s if first_delay_s is None else first_delay_s):
                return
            while True:
                try:
                    self.persist_if_dirty()
                except Exception:
                    log.exception("persisting %s failed", self.path)
                if self._stopping.wait(self.interval_s):
                    return
        self._thread = threading.Thread(target=loop, name=f"rmqd-persist-{self.file_name}",
                                        daemon=True)
        self._thread.start()

    def persist_if_dirty(self) -> bool:
        with self._lock:
            if not self._dirty:
                return False
            self._dirty = False
        self.persist()
        return True

    def shutdown(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        self.persist()


class ConsumerOffsetManager(PeriodicConfigManager["ConsumerOffsetFileJson"]):
    """consumerOffset.json ``{"offsetTable":{"T@G":{"0":123}}}``; persisted every 5 s if changed."""

    file_name = "consumerOffset.json"
    interval_s = 5.0

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self.reset_table: dict[str, dict[int, int]] = {}     # "topic@group" -> queue -> pending reset offset
        self.table: dict[str, dict[int, int]] = {}
        #: bumped on every change in this process (a master's slaves copy the table when it moved: rmqd.replicas)
        self.change_count = 0

    def encode(self) -> "ConsumerOffsetFileJson":
        return {"offsetTable": {k: {str(q): o for q, o in sorted(v.items())}
                                for k, v in self.table.items()}}

    def decode(self, data: "ConsumerOffsetFileJson") -> None:
        self.table = {k: {int(q): int(o) for q, o in (v or {}).items()}
                      for k, v in (data.get("offsetTable") or {}).items()}

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int,
                      offset: int) -> None:
        key = f"{topic}@{group}"
        with self._lock:
            m = self.table.setdefault(key, {})
            prev = m.get(queue_id)
            m[queue_id] = offset
            self._dirty = True
            self.change_count += 1
        if prev is not None and offset < prev:
            log.debug("offset of %s q%d moved back %d -> %d by %s", key, queue_id, prev, offset,
                      client_host)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Committed offset or -1; a queue with a server-side reset pending answers the reset offset."""
        key = f"{topic}@{group}"
        if self.reset_table:
            reset = self.reset_table.get(key)
            if reset and queue_id in reset:
                return reset[queue_id]
        m = self.table.get(key)
        return m.get(queue_id, -1) if m else -1

    # 5.x server-side offset reset (useServerSideResetOffset): a reset is kept apart until the queue's next pull
    # takes it (queryThenEraseResetOffset); meanwhile the queue answers the reset offset and a client's commit of
    # an older position is ignored.
    def assign_reset_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """ConsumerOffsetManager.assignResetOffset: pending for the next pull, and committed at once."""
        if not topic or not group or queue_id < 0 or offset < 0:
            log.warning("illegal reset offset %s@%s q%d -> %d ignored", topic, group, queue_id, offset)
            return
        key = f"{topic}@{group}"
        with self._lock:
            self.reset_table.setdefault(key, {})[queue_id] = offset
            self.table.setdefault(key, {})[queue_id] = offset
            self._dirty = True
            self.change_count += 1

    def has_offset_reset(self, topic: str, group: str, queue_id: int) -> bool:
        reset = self.reset_table.get(f"{topic}@{group}")
        return queue_id in reset if reset else False

    def query_then_erase_reset_offset(self, topic: str, group: str, queue_id: int) -> Optional[int]:
        """The pending reset of the queue, taken (None when there is none)."""
        if not self.reset_table:
            return None
        with self._lock:
            reset = self.reset_table.get(f"{topic}@{group}")
            if not reset:
                return None
            offset = reset.pop(queue_id, None)
            if not reset:
                self.reset_table.pop(f"{topic}@{group}", None)
            return offset

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}@{group}", {}))

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return {k.split("@", 1)[0] for k in list(self.table) if k.split("@", 1)[1] == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        return {k.split("@", 1)[1] for k in list(self.table) if k.split("@", 1)[0] == topic}

    def remove_offset(self, group: str, topic: Optional[str] = None) -> int:
        """Drop offsets of ``group`` (all topics, or just ``topic``); returns entries removed."""
        return self._remove_where(lambda t, g: g == group and (topic is None or t == topic))

    def remove_topic(self, topic: str) -> int:
        return self._remove_where(lambda t, g: t == topic)

    def _remove_where(self, match: Callable[[str, str], bool]) -> int:
        """Drop the offsets whose ``topic@group`` key ``match(topic, group)``; returns entries removed."""
        with self._lock:
            gone = [k for k in self.table if match(*_topic_group(k))]
            for k in gone:
                del self.table[k]
            if gone:
                self._dirty = True
                self.change_count += 1
            return len(gone)

    def table_copy(self) -> dict[str, dict[int, int]]:
        """``topic@group`` -> {queue id: offset}, copied under the lock."""
        with self._lock:
            return {k: dict(v) for k, v in self.table.items()}

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        with self._lock:
            m = self.table.get(f"{topic}@{src_group}")
            if m is not None:
                self.table[f"{topic}@{dest_group}"] = dict(m)
                self._dirty = True
                self.change_count += 1


class DelayOffsetManager(PeriodicConfigManager["DelayOffsetFileJson"]):
    """delayOffset.json ``{"offsetTable":{1:0,2:17}}`` (level → next SCHEDULE queue offset)."""

    file_name = "delayOffset.json"
    interval_s = 10.0

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self.table: dict[int, int] = {}

    def encode(self) -> "DelayOffsetFileJson":
        return {"offsetTable": {str(k): v for k, v in sorted(self.table.items())}}

    def decode(self, data: "DelayOffsetFileJson") -> None:
        self.table = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}

    def update(self, level: int, offset: int) -> None:
        with self._lock:
            self.table[level] = offset
            self._dirty = True

    def get(self, level: int) -> int:
        return self.table.get(level, 0)

    def table_copy(self) -> dict[int, int]:
        """level -> next SCHEDULE_TOPIC_XXXX queue offset, copied under the lock."""
        with self._lock:
            return dict(self.table)
