"""Broker and name-server configuration with the Java broker's property names: the one configuration path.

Attribute names are exactly the Java ``BrokerConfig``/``MessageStoreConfig``/``NettyServerConfig``
property names so a ``broker.conf`` written for the Java broker works unchanged and
GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG map one to one.

Every mapping from broker.conf to the settings of a part lives here: :func:`store_config_from` (the local
store), :func:`compaction_config_from`, :func:`tier_config_from` (the layers over it); HA and controller
settings get their ``*_config_from`` beside them.  The role is typed (:class:`BrokerRole`,
``BrokerConfig.role``).  A running broker changes its config only through
:meth:`BrokerConfig.apply_runtime`, which validates, applies and tells the subscribers which keys changed.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import os
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, TypeVar, Union

# Settings classes only: the store's modules load with the store (``store_config_from`` imports StoreConfig),
# so reading broker.conf (the CLI, the name server, the admin tool) does not load them.
from rmqd.store.compaction.config import CompactionConfig
from rmqd.store.tier.config import TierConfig, TieredStorageLevel, is_plugin_enabled, provider_name

if TYPE_CHECKING:
    from rmqd.store.config import StoreConfig

log = logging.getLogger(__name__)

class BrokerRole(enum.Enum):
    """``brokerRole`` of broker.conf (Java's ``BrokerRole``): the one typed place the role is compared."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"

    @classmethod
    def parse(cls, value: "str | BrokerRole") -> "BrokerRole":
        """The role named by a broker.conf value (case-insensitive, as Java's ``BrokerRole.valueOf`` after
        ``toUpperCase``); ValueError names the bad value."""
        if isinstance(value, BrokerRole):
            return value
        try:
            return cls(str(value).strip().upper())
        except ValueError:
            raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {value!r}") from None

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE


DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# Java spells a few properties in two ways over the versions; accept both.
ALIASES = {
    "mappedFileSizeCommitLog": "mapedFileSizeCommitLog",
    "mappedFileSizeConsumeQueue": "mapedFileSizeConsumeQueue",
}


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: ``k=v``, ``k: v``, ``k v``, comments, continuations."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        key, value = _split_key_value(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        ch = line[j]
        if ch == "\\":
            j += 2
            continue
        if ch in "=: \t\f":
            break
        j += 1
    key = line[:j]
    rest = line[j:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (j >= len(line) or line[j] in " \t\f" or line[j] in "=:"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and i + 5 < len(s):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


#: A property's typed value (the type of its default in ``_DEFAULTS``).
PropertyValue = Union[str, int, float, bool, None]


def _coerce(default: PropertyValue, value: str) -> PropertyValue:
    if isinstance(default, bool):
        return value.strip().lower() == "true"
    if isinstance(default, int):
        return int(value.strip())
    if isinstance(default, float):
        return float(value.strip())
    return value.strip()


@functools.lru_cache(maxsize=1)
def _keys_read_elsewhere() -> frozenset[str]:
    """broker.conf keys kept in ``extra`` and read by a part with its own settings class (5.4 priority and
    5.5 Lite Mode: rmqd.lite.config; TLS: rmqd.tls.settings; access control 2.0: rmqd.auth.config), so
    not reported as unused."""
    from rmqd.auth.config import auth_config_keys
    from rmqd.lite.config import LiteConfig, PriorityConfig
    from rmqd.tls.settings import ALL_KEYS as TLS_KEYS
    return frozenset(f.name for cls in (LiteConfig, PriorityConfig) for f in dataclasses.fields(cls)) | TLS_KEYS | \
        auth_config_keys()


class _PropertiesConfig:
    """Typed properties with Java names; unknown keys are kept in ``extra``."""

    _DEFAULTS: dict[str, PropertyValue] = {}

    def __init__(self, **overrides: object) -> None:
        for key, value in self._DEFAULTS.items():
            setattr(self, key, value)
        self.extra: dict[str, str] = {}
        self.update(overrides)

    def update(self, values: Mapping[str, object], source: str = "") -> list[str]:
        """Apply values (strings are coerced to the default's type); returns unknown keys."""
        unknown = []
        for key, value in values.items():
            key = ALIASES.get(key, key)
            if key in self._DEFAULTS:
                default = self._DEFAULTS[key]
                if value is None:
                    setattr(self, key, None)
                elif isinstance(value, str) and default is not None and not isinstance(default, str):
                    setattr(self, key, _coerce(default, value))
                else:
                    setattr(self, key, value)
            else:
                self.extra[key] = str(value)
                unknown.append(key)
        unused = [key for key in unknown if key not in _keys_read_elsewhere()]
        if unused:
            log.info("%s: keeping unknown properties (not used by rmqd): %s", source or "config", ", ".join(sorted(unused)))
        return unknown

    def load_file(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            self.update(parse_properties(f.read()), source=path)

    def to_properties(self) -> dict[str, str]:
        out = {}
        for key in self._DEFAULTS:
            value = getattr(self, key)
            if value is None:
                continue
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        out.update(self.extra)
        return out

    def to_properties_text(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in sorted(self.to_properties().items()))

    def keys(self) -> Iterable[str]:
        return self._DEFAULTS.keys()

    def copy(self) -> "_PropertiesConfig":
        """An independent copy (same values, same unknown keys)."""
        other = type(self)(**{k: getattr(self, k) for k in self.keys()})
        other.extra = dict(self.extra)
        return other


ConfigListener = Callable[["BrokerConfig", frozenset[str]], None]


class BrokerConfig(_PropertiesConfig):
    """Broker + store + remoting settings (Java property names, local-dev defaults)."""

    if TYPE_CHECKING:     # the properties of _DEFAULTS below, typed (tests/test_typecheck.py keeps them equal)
        brokerClusterName: str
        brokerName: str
        brokerId: int
        brokerIP1: str
        brokerIP2: str | None
        bindAddress: str | None
        listenPort: int
        haListenPort: int
        namesrvAddr: str | None
        brokerRole: str
        brokerPermission: int
        regionId: str
        traceOn: bool
        serverChannelMaxIdleTimeSeconds: int
        serverMaxFrameLength: int
        busyPollMicros: int
        registerNameServerPeriod: int
        haSendHeartbeatInterval: int
        haHousekeepingInterval: int
        haTransferBatchSize: int
        haSlaveFallbehindMax: int
        haMasterAddress: str | None
        slaveTimeout: int
        slaveReadEnable: bool
        enableControllerMode: bool
        controllerAddr: str
        controllerHeartBeatTimeoutMills: int
        brokerHeartbeatInterval: int
        syncBrokerMetadataPeriod: int
        checkSyncStateSetPeriod: int
        syncControllerMetadataPeriod: int
        brokerElectionPriority: int
        haMaxTimeSlaveNotCatchup: int
        allAckInSyncStateSet: bool
        inSyncReplicas: int
        minInSyncReplicas: int
        asyncLearner: bool
        syncFromLastFile: bool
        readUnCommitted: bool
        storePathEpochFile: str | None
        storePathBrokerIdentity: str | None
        offsetCheckInSlave: bool
        autoCreateTopicEnable: bool
        autoCreateSubscriptionGroup: bool
        defaultTopicQueueNums: int
        enablePropertyFilter: bool
        rejectTransactionMessage: bool
        recallMessageEnable: bool
        litePullMessageEnable: bool
        useServerSideResetOffset: bool
        allowRecallWhenBrokerNotWriteable: bool
        traceTopicEnable: bool
        defaultQueryMaxNum: int
        storeReplyMessageEnable: bool
        sendMessageThreadPoolNums: int
        pullMessageThreadPoolNums: int
        queryMessageThreadPoolNums: int
        adminBrokerThreadPoolNums: int
        clientManageThreadPoolNums: int
        consumerManageThreadPoolNums: int
        endTransactionThreadPoolNums: int
        sendThreadPoolQueueCapacity: int
        pullThreadPoolQueueCapacity: int
        queryThreadPoolQueueCapacity: int
        waitTimeMillsInSendQueue: int
        waitTimeMillsInPullQueue: int
        waitTimeMillsInTransactionQueue: int
        longPollingEnable: bool
        shortPollingTimeMills: int
        transactionTimeOut: int
        transactionCheckMax: int
        transactionCheckInterval: int
        storePathRootDir: str
        storePathCommitLog: str | None
        mapedFileSizeCommitLog: int
        mapedFileSizeConsumeQueue: int
        flushDiskType: str
        flushIntervalCommitLog: int
        flushCommitLogLeastPages: int
        syncFlushTimeout: int
        maxMessageSize: int
        messageDelayLevel: str
        deleteWhen: str
        fileReservedTime: int
        diskMaxUsedSpaceRatio: int
        maxHashSlotNum: int
        maxIndexNum: int
        flushConsumerOffsetInterval: int
        flushDelayOffsetInterval: int
        maxTransferBytesOnMessageInMemory: int
        maxTransferCountOnMessageInMemory: int
        accessMessageInMemoryMaxRatio: int
        enableCompaction: bool
        compactionMappedFileSize: int
        compactionCqMappedFileSize: int
        compactionScheduleInternal: int
        maxOffsetMapSize: int
        compactionThreadNum: int
        messageStorePlugIn: str
        tieredBackendServiceProvider: str
        tieredStoreFilePath: str
        tieredStorageLevel: str
        tieredStoreCommitLogMaxSize: int
        tieredStoreConsumeQueueMaxSize: int
        tieredStoreIndexFileMaxHashSlotNum: int
        tieredStoreIndexFileMaxIndexNum: int
        tieredStoreFileReservedTime: int
        tieredStoreDeleteFileInterval: int
        commitLogRollingInterval: int
        commitLogRollingMinimumSize: int
        tieredStoreGroupCommitCount: int
        tieredStoreGroupCommitSize: int
        tieredStoreGroupCommitTimeout: int
        objectStoreEndpoint: str
        objectStoreBucket: str
        objectStoreAccessKey: str
        objectStoreSecretKey: str
        objectStoreRegion: str
        tieredStoreDispatchInterval: int
        metricsExporterType: str
        metricsPromExporterPort: int
        metricsPromExporterHost: str
        metricsLabel: str
        aclEnable: bool
        aclFile: str | None
        reviveQueueNum: int
        defaultMessageRequestMode: str
        popExecutorCapacity: int
        grpcServerPort: int
        minInvisibleTimeMillsForRecv: int
        grpcClientConsumerMaxLongPollingTimeoutMillis: int
        grpcClientIdleTimeMills: int
        grpcClientConsumerMinLongPollingTimeoutMillis: int
        maxInvisibleTimeMills: int
        enableTopicMessageTypeCheck: bool
        enableMessageBodyEmptyCheck: bool
        maxUserPropertySize: int
        userPropertyMaxNum: int
        maxMessageGroupSize: int
        maxDelayTimeMills: int
        maxTransactionRecoverySecond: int

    def __init__(self, **overrides: object) -> None:
        self._role_cache: tuple[object, BrokerRole] | None = None
        self._listeners: list[ConfigListener] = []
        super().__init__(**overrides)

    def update(self, values: Mapping[str, object], source: str = "") -> list[str]:
        """Apply values (see :meth:`_PropertiesConfig.update`); a ``brokerRole`` that is not a role raises
        ValueError, as the Java broker refuses to start with one."""
        unknown = super().update(values, source)
        if "brokerRole" in values:
            BrokerRole.parse(self.brokerRole)
        return unknown

    @property
    def role(self) -> BrokerRole:
        """``brokerRole`` typed (parsed once per value: the pull path asks on every commit)."""
        raw = self.brokerRole
        cached = self._role_cache
        if cached is None or cached[0] is not raw:
            cached = self._role_cache = (raw, BrokerRole.parse(raw))
        return cached[1]

    # ------------------------------------------------------------------ runtime updates
    def subscribe(self, listener: ConfigListener) -> None:
        """Call ``listener(config, changed_keys)`` after every :meth:`apply_runtime` that changed something."""
        self._listeners.append(listener)

    def apply_runtime(self, props: Mapping[str, object], source: str = "updateBrokerConfig") -> frozenset[str]:
        """The one runtime-update path (UPDATE_BROKER_CONFIG): validate every value first (ValueError or
        TypeError, and nothing changes), apply them, then tell each subscriber which keys changed.

        Returns the changed keys (Java names; aliases resolved).  A subscriber that fails is logged and the
        others still run: the new values are in place either way."""
        self.copy().update(props, source=source)          # raises before touching this config
        keys = [ALIASES.get(k, k) for k in props]
        before = {k: (getattr(self, k) if k in self._DEFAULTS else self.extra.get(k)) for k in keys}
        self.update(props, source=source)
        changed = frozenset(k for k in keys
                            if (getattr(self, k) if k in self._DEFAULTS else self.extra.get(k)) != before[k])
        if changed:
            for listener in list(self._listeners):
                try:
                    listener(self, changed)
                except Exception:
                    log.exception("applying the changed broker config keys %s in %s failed", sorted(changed),
                                  getattr(listener, "__qualname__", listener))
        return changed

    _DEFAULTS = {
        # identity and network
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": 0,
        "brokerIP1": "127.0.0.1",
        "brokerIP2": None,
        # the address the broker's sockets bind (Java's NettyServerConfig.bindAddress, 0.0.0.0 there); unset:
        # brokerIP1 for the remoting ports, brokerIP2 (else brokerIP1) for the HA port, so a broker advertising
        # an address is reachable at it and a default one stays on loopback
        "bindAddress": None,
        "listenPort": 10911,
        "haListenPort": 10912,
        "namesrvAddr": None,
        "brokerRole": "ASYNC_MASTER",
        "brokerPermission": 6,
        "regionId": "DefaultRegion",
        "traceOn": True,
        "serverChannelMaxIdleTimeSeconds": 120,   # a connection with no read or write for this long is closed
        "serverMaxFrameLength": 16 * 1024 * 1024,
        # rmqd: keep the loop polling this long after a request instead of sleeping (0 = off);
        # see rmqd.remoting.busy_poll
        "busyPollMicros": 300,
        "registerNameServerPeriod": 30000,
        # master/slave replication (Java MessageStoreConfig / BrokerConfig names; rmqd.store.ha): haListenPort is
        # always listenPort + 1 as BrokerStartup sets it, haMasterAddress pins a slave's master (else the name
        # server's answer), slaveTimeout bounds a SYNC_MASTER send's wait for the slave
        "haSendHeartbeatInterval": 5000,
        "haHousekeepingInterval": 20000,
        "haTransferBatchSize": 32 * 1024,
        "haSlaveFallbehindMax": 256 * 1024 * 1024,
        "haMasterAddress": None,
        "slaveTimeout": 3000,
        "slaveReadEnable": False,
        # controller mode (RocketMQ 5 automatic failover; rmqd.replicas.controller_mode): the controllers assign the
        # brokerId and the role; a master that lost the controller's confirmation for half of
        # controllerHeartBeatTimeoutMills refuses writes. storePathEpochFile / storePathBrokerIdentity default to
        # <storePathRootDir>/epochFileCheckpoint and <storePathRootDir>/brokerIdentity
        "enableControllerMode": False,
        "controllerAddr": "",
        "controllerHeartBeatTimeoutMills": 10000,
        "brokerHeartbeatInterval": 1000,
        "syncBrokerMetadataPeriod": 5000,
        "checkSyncStateSetPeriod": 5000,
        "syncControllerMetadataPeriod": 10000,
        "brokerElectionPriority": 2147483647,
        "haMaxTimeSlaveNotCatchup": 15000,
        "allAckInSyncStateSet": False,
        "inSyncReplicas": 1,
        "minInSyncReplicas": 1,
        "asyncLearner": False,          # a slave that never joins the SyncStateSet (5.x)
        "syncFromLastFile": False,      # an empty slave starts from the master's last CommitLog file (5.x)
        "readUnCommitted": False,       # consumers may read past the confirmOffset (5.x)
        "storePathEpochFile": None,
        "storePathBrokerIdentity": None,
        "offsetCheckInSlave": False,
        # topics and groups
        "autoCreateTopicEnable": True,
        "autoCreateSubscriptionGroup": True,
        "defaultTopicQueueNums": 8,
        "enablePropertyFilter": True,
        "rejectTransactionMessage": False,
        # 5.x: recall of timer messages (RECALL_MESSAGE; Java's default is off), also on a broker not writable
        "recallMessageEnable": False,
        "litePullMessageEnable": True,      # 5.x: LITE_PULL_MESSAGE (a 5.x DefaultLitePullConsumer's pulls)
        # 5.x: INVOKE_BROKER_TO_RESET_OFFSET resets on the broker (each queue's next pull moves the consumer), not
        # by a push to the clients (4.9.8's only way, kept when false)
        "useServerSideResetOffset": True,
        "allowRecallWhenBrokerNotWriteable": True,
        "traceTopicEnable": False,
        "defaultQueryMaxNum": 32,
        "storeReplyMessageEnable": True,
        # pools and fast failure
        "sendMessageThreadPoolNums": 4,
        "pullMessageThreadPoolNums": 8,
        "queryMessageThreadPoolNums": 4,
        "adminBrokerThreadPoolNums": 4,
        "clientManageThreadPoolNums": 4,
        "consumerManageThreadPoolNums": 4,
        "endTransactionThreadPoolNums": 4,
        "sendThreadPoolQueueCapacity": 10000,
        "pullThreadPoolQueueCapacity": 100000,
        "queryThreadPoolQueueCapacity": 20000,
        "waitTimeMillsInSendQueue": 200,
        "waitTimeMillsInPullQueue": 5000,
        "waitTimeMillsInTransactionQueue": 3000,
        # long polling
        "longPollingEnable": True,
        "shortPollingTimeMills": 1000,
        # transactions
        "transactionTimeOut": 6000,
        "transactionCheckMax": 15,
        "transactionCheckInterval": 60000,
        # store
        "storePathRootDir": os.path.join(os.path.expanduser("~"), ".rmqd", "store"),
        "storePathCommitLog": None,
        "mapedFileSizeCommitLog": 1024 * 1024 * 1024,
        "mapedFileSizeConsumeQueue": 300000 * 20,
        "flushDiskType": "ASYNC_FLUSH",
        "flushIntervalCommitLog": 500,
        "flushCommitLogLeastPages": 4,
        "syncFlushTimeout": 5000,
        "maxMessageSize": 4 * 1024 * 1024,
        "messageDelayLevel": DEFAULT_DELAY_LEVELS,
        "deleteWhen": "04",
        "fileReservedTime": 72,
        "diskMaxUsedSpaceRatio": 75,
        "maxHashSlotNum": 5000000,
        "maxIndexNum": 5000000 * 4,
        "flushConsumerOffsetInterval": 5000,
        "flushDelayOffsetInterval": 10000,
        "maxTransferBytesOnMessageInMemory": 256 * 1024,
        "maxTransferCountOnMessageInMemory": 32,
        "accessMessageInMemoryMaxRatio": 40,
        "enableCompaction": True,
        # compaction topics (RocketMQ 5.x names; compactionScheduleInternal is Java's spelling)
        "compactionMappedFileSize": 100 * 1024 * 1024,
        "compactionCqMappedFileSize": 10 * 1024 * 1024,
        "compactionScheduleInternal": 15 * 60 * 1000,
        "maxOffsetMapSize": 100 * 1024 * 1024,
        "compactionThreadNum": 6,
        # tiered storage (RocketMQ 5.x tieredstore names; see the README's "Tiered storage")
        "messageStorePlugIn": "",
        "tieredBackendServiceProvider": "org.apache.rocketmq.tieredstore.provider.MemoryFileSegment",
        "tieredStoreFilePath": "",
        "tieredStorageLevel": "NOT_IN_DISK",
        "tieredStoreCommitLogMaxSize": 1024 * 1024 * 1024,
        "tieredStoreConsumeQueueMaxSize": 100 * 1024 * 1024,
        "tieredStoreIndexFileMaxHashSlotNum": 5000000,
        "tieredStoreIndexFileMaxIndexNum": 5000000 * 4,
        "tieredStoreFileReservedTime": 72,
        "tieredStoreDeleteFileInterval": 3600 * 1000,
        "commitLogRollingInterval": 24,
        "commitLogRollingMinimumSize": 16 * 1024 * 1024,
        "tieredStoreGroupCommitCount": 4096,
        "tieredStoreGroupCommitSize": 4 * 1024 * 1024,
        "tieredStoreGroupCommitTimeout": 30000,
        "objectStoreEndpoint": "",
        "objectStoreBucket": "",
        "objectStoreAccessKey": "",
        "objectStoreSecretKey": "",
        "objectStoreRegion": "",          # rmqd: the S3 backend's region (default us-east-1)
        "tieredStoreDispatchInterval": 1000,   # rmqd: ms between the copier's rounds
        # metrics (RocketMQ 5.x names): PROM serves /metrics on metricsPromExporterHost:Port
        "metricsExporterType": "DISABLE",
        "metricsPromExporterPort": 5557,
        "metricsPromExporterHost": "",
        "metricsLabel": "",
        # access control (plain_acl.yml); aclFile is rmqd's own: the default ACL file (`rmqd serve --acl`)
        "aclEnable": False,
        "aclFile": None,
        # POP consumption (RocketMQ 5.x names): revive queues, server-side rebalance default;
        # popExecutorCapacity is rmqd's own (POP requests in flight before SYSTEM_BUSY / TOO_MANY_REQUESTS)
        "reviveQueueNum": 8,
        "defaultMessageRequestMode": "PULL",
        "popExecutorCapacity": 1024,
        # gRPC endpoint for 5.x clients (the 5.x proxy's names): port 0 turns it off;
        # minInvisibleTimeMillsForRecv is the smallest invisible duration a ReceiveMessage may ask for;
        # grpcClientConsumerMaxLongPollingTimeoutMillis caps a receive's long poll (and is the one the Settings
        # give consumers); a client silent for grpcClientIdleTimeMills is let go (registrations, auto-renewals)
        "grpcServerPort": 8081,
        "minInvisibleTimeMillsForRecv": 10000,
        "grpcClientConsumerMaxLongPollingTimeoutMillis": 20000,
        "grpcClientIdleTimeMills": 120000,
        # the 5.x proxy's request limits and checks for gRPC clients (its names and defaults): receive long polls
        # last at least grpcClientConsumerMinLongPollingTimeoutMillis (capped by the max); invisible times at most
        # maxInvisibleTimeMills; a send is refused when its type does not match its topic's message.type
        # (enableTopicMessageTypeCheck), its body is empty (enableMessageBodyEmptyCheck), its user properties are
        # too many or too large, its message group too long, its delivery time too far or its transaction
        # recovery time too long
        "grpcClientConsumerMinLongPollingTimeoutMillis": 5000,
        "maxInvisibleTimeMills": 12 * 3600 * 1000,
        "enableTopicMessageTypeCheck": True,
        "enableMessageBodyEmptyCheck": True,
        "maxUserPropertySize": 16 * 1024,
        "userPropertyMaxNum": 128,
        "maxMessageGroupSize": 64,
        "maxDelayTimeMills": 24 * 3600 * 1000,
        "maxTransactionRecoverySecond": 3600,
    }

    @property
    def broker_addr(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def bind_host(self) -> str:
        """Where the remoting ports listen: ``bindAddress``, else ``brokerIP1``."""
        return str(self.bindAddress or self.brokerIP1 or "127.0.0.1")

    @property
    def ha_bind_host(self) -> str:
        """Where the HA port listens: ``bindAddress``, else the address slaves are told (brokerIP2, brokerIP1)."""
        return str(self.bindAddress or self.brokerIP2 or self.brokerIP1 or "127.0.0.1")

    @property
    def vip_port(self) -> int:
        return self.listenPort - 2 if self.listenPort >= 2 else 0

    @property
    def namesrv_addrs(self) -> list[str]:
        if not self.namesrvAddr:
            return []
        return [a.strip() for a in str(self.namesrvAddr).split(";") if a.strip()]


class NamesrvConfig(_PropertiesConfig):
    """Name server settings (Java NamesrvConfig + NettyServerConfig names)."""

    if TYPE_CHECKING:     # the properties of _DEFAULTS below, typed (tests/test_typecheck.py keeps them equal)
        listenPort: int
        bindAddress: str
        orderMessageEnable: bool
        kvConfigPath: str
        serverMaxFrameLength: int
        busyPollMicros: int
        brokerExpiredMillis: int
        scanNotActiveBrokerInterval: int
        enableControllerInNamesrv: bool
        rocketmqHome: str
        configStorePath: str
        productEnvName: str
        clusterTest: bool
        configBlackList: str
        serverWorkerThreads: int
        serverCallbackExecutorThreads: int
        serverSelectorThreads: int
        serverOnewaySemaphoreValue: int
        serverAsyncSemaphoreValue: int
        serverChannelMaxIdleTimeSeconds: int
        serverSocketSndBufSize: int
        serverSocketRcvBufSize: int
        writeBufferHighWaterMark: int
        writeBufferLowWaterMark: int
        serverSocketBacklog: int
        serverPooledByteBufAllocatorEnable: bool
        useEpollNativeSelector: bool

    _DEFAULTS = {
        "listenPort": 9876,
        "bindAddress": "127.0.0.1",             # Java's NettyServerConfig.bindAddress (0.0.0.0 there)
        "orderMessageEnable": False,
        "kvConfigPath": os.path.join(os.path.expanduser("~"), ".rmqd", "namesrv", "kvConfig.json"),
        "serverMaxFrameLength": 16 * 1024 * 1024,
        # rmqd: keep the loop polling this long after a request instead of sleeping (0 = off);
        # see rmqd.remoting.busy_poll
        "busyPollMicros": 300,
        "brokerExpiredMillis": 120000,
        "scanNotActiveBrokerInterval": 10000,
        "enableControllerInNamesrv": False,     # run a controller (rmqd.controller) in this process
        # the rest of Java's NamesrvConfig and NettyServerConfig (GET_NAMESRV_CONFIG lists them all)
        "rocketmqHome": os.environ.get("ROCKETMQ_HOME") or os.path.join(os.path.expanduser("~"), ".rmqd"),
        "configStorePath": os.path.join(os.path.expanduser("~"), "namesrv", "namesrv.properties"),
        "productEnvName": "center",
        "clusterTest": False,
        "configBlackList": "configBlackList;configStorePath;kvConfigPath",
        "serverWorkerThreads": 8,
        "serverCallbackExecutorThreads": 0,
        "serverSelectorThreads": 3,
        "serverOnewaySemaphoreValue": 256,
        "serverAsyncSemaphoreValue": 64,
        "serverChannelMaxIdleTimeSeconds": 120,
        "serverSocketSndBufSize": 0,
        "serverSocketRcvBufSize": 0,
        "writeBufferHighWaterMark": 0,
        "writeBufferLowWaterMark": 0,
        "serverSocketBacklog": 1024,
        "serverPooledByteBufAllocatorEnable": True,
        "useEpollNativeSelector": False,
    }


# ---------------------------------------------------------------------------------- the parts' settings
#: How a broker.conf value becomes a part's field (``int``, ``float``, ``str``, ``bool`` or :func:`_same`).
FieldConversion = Callable[[Union[str, int, float]], object]
_PartT = TypeVar("_PartT")


def _same(value: object) -> object:
    return value


def _fields_from(c: BrokerConfig, table: Mapping[str, tuple[str, FieldConversion]]) -> dict[str, object]:
    """``table``'s broker.conf keys of ``c`` as the part's fields: {field: conversion(value)}."""
    return {name: conv(getattr(c, key)) for key, (name, conv) in table.items()}


def _part_from(part: type[_PartT], fields: Mapping[str, object]) -> _PartT:
    """``part(**fields)``: the field tables above name its fields (tests/test_config.py builds each part)."""
    return part(**fields)


#: broker.conf name -> (StoreConfig field, conversion): what :func:`store_config_from` maps.
STORE_FIELDS: dict[str, tuple[str, FieldConversion]] = {
    "storePathRootDir": ("store_root_dir", _same),
    "mapedFileSizeCommitLog": ("mapped_file_size_commitlog", int),
    "mapedFileSizeConsumeQueue": ("mapped_file_size_consume_queue", int),
    "flushDiskType": ("flush_disk_type", _same),
    "flushIntervalCommitLog": ("flush_interval_commitlog_ms", int),
    "flushCommitLogLeastPages": ("flush_least_pages", int),
    "syncFlushTimeout": ("sync_flush_timeout_ms", int),
    "maxMessageSize": ("max_message_size", int),
    "fileReservedTime": ("file_reserved_time_hours", float),
    "deleteWhen": ("delete_when", str),
    "diskMaxUsedSpaceRatio": ("disk_max_used_space_ratio", int),
    "maxHashSlotNum": ("max_hash_slot_num", int),
    "maxIndexNum": ("max_index_num", int),
    "maxTransferBytesOnMessageInMemory": ("max_transfer_bytes_on_message_in_memory", int),
    "maxTransferCountOnMessageInMemory": ("max_transfer_count_on_message_in_memory", int),
    "accessMessageInMemoryMaxRatio": ("access_message_in_memory_max_ratio", int),
    "messageDelayLevel": ("message_delay_level", _same),
}
#: Store settings fixed once the store has started (the directory and the file sizes).
STORE_STATIC_KEYS = frozenset({"storePathRootDir", "mapedFileSizeCommitLog", "mapedFileSizeConsumeQueue"})


def store_config_from(c: BrokerConfig) -> StoreConfig:
    """The local store's settings from their broker.conf names."""
    from rmqd.store.config import StoreConfig
    return _part_from(StoreConfig, _fields_from(c, STORE_FIELDS))


def store_runtime_changes(c: BrokerConfig, changed: Iterable[str]) -> dict[str, object]:
    """The StoreConfig fields a running store takes from the ``changed`` broker.conf keys (it reads them on
    each use: flush intervals, retention, message size...); the directory and file sizes are left out."""
    return {STORE_FIELDS[k][0]: STORE_FIELDS[k][1](getattr(c, k)) for k in changed
            if k in STORE_FIELDS and k not in STORE_STATIC_KEYS}


#: broker.conf name -> (CompactionConfig field, conversion): what :func:`compaction_config_from` maps.
COMPACTION_FIELDS: dict[str, tuple[str, FieldConversion]] = {
    "enableCompaction": ("enabled", bool),
    "compactionMappedFileSize": ("log_file_size", int),
    "compactionCqMappedFileSize": ("cq_file_size", int),
    "compactionScheduleInternal": ("schedule_interval_ms", int),
    "maxOffsetMapSize": ("max_offset_map_size", int),
    "compactionThreadNum": ("thread_num", int),
}

#: broker.conf name -> (TierConfig field, conversion): the tier's numeric settings (:func:`tier_config_from`).
TIER_NUMERIC_FIELDS: dict[str, tuple[str, FieldConversion]] = {
    "tieredStoreCommitLogMaxSize": ("commitlog_max_size", int),
    "tieredStoreConsumeQueueMaxSize": ("consume_queue_max_size", int),
    "tieredStoreIndexFileMaxHashSlotNum": ("index_slots", int),
    "tieredStoreIndexFileMaxIndexNum": ("index_max_items", int),
    "tieredStoreFileReservedTime": ("file_reserved_hours", float),
    "tieredStoreDeleteFileInterval": ("delete_file_interval_ms", int),
    "commitLogRollingInterval": ("rolling_interval_hours", float),
    "commitLogRollingMinimumSize": ("rolling_min_size", int),
    "tieredStoreGroupCommitCount": ("group_commit_count", int),
    "tieredStoreGroupCommitSize": ("group_commit_size", int),
    "tieredStoreGroupCommitTimeout": ("group_commit_timeout_ms", int),
    "tieredStoreDispatchInterval": ("dispatch_interval_ms", int),
}


def compaction_config_from(c: BrokerConfig) -> CompactionConfig:
    """The compaction store's settings from their RocketMQ 5.x broker.conf names."""
    return _part_from(CompactionConfig, _fields_from(c, COMPACTION_FIELDS))


def tier_config_from(c: BrokerConfig) -> TierConfig:
    """The tiered store's settings from their RocketMQ 5.x ``tieredstore`` names (plus rmqd's own).

    ``messageIndexEnable`` is not one of rmqd's typed keys: it is read from the unknown ones, true unless
    "false".  A TierConfig whose index file would pass 2 GiB raises ValueError."""
    return _part_from(TierConfig, {
        "enabled": is_plugin_enabled(c.messageStorePlugIn),
        "cluster": str(c.brokerClusterName or "DefaultCluster"),
        "broker": str(c.brokerName or "broker-a"),
        "provider": provider_name(str(c.tieredBackendServiceProvider or "memory")),
        "file_path": str(c.tieredStoreFilePath or ""),
        "storage_level": TieredStorageLevel.parse(c.tieredStorageLevel or "NOT_IN_DISK"),
        "message_index_enable": str(c.extra.get("messageIndexEnable", True)).lower() != "false",
        "endpoint": str(c.objectStoreEndpoint or ""),
        "bucket": str(c.objectStoreBucket or ""),
        "access_key": str(c.objectStoreAccessKey or ""),
        "secret_key": str(c.objectStoreSecretKey or ""),
        "region": str(c.objectStoreRegion or ""),
        **_fields_from(c, TIER_NUMERIC_FIELDS),
    })


def broker_config_from(props: Mapping[str, object]) -> BrokerConfig:
    """A BrokerConfig from plain broker.conf properties (tools that read a broker's file)."""
    c = BrokerConfig()
    c.update(props, source="broker.conf")
    return c
