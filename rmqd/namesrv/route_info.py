"""RouteInfoManager: the name server's broker registry and topic routes (README §3.1, §6.13).

Tables (RocketMQ names): ``topicQueueTable`` topic → brokerName → QueueData; ``brokerAddrTable``
brokerName → BrokerData; ``clusterAddrTable`` cluster → {brokerName}; ``brokerLiveTable``
brokerAddr → BrokerLiveInfo; ``filterServerTable`` brokerAddr → [filter server addr].
Nothing here is persisted.  All methods take one lock (they normally run on the event loop).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Protocol

from rmqd.common.constants import MASTER_ID, PERM_READ, PERM_WRITE
from rmqd.namesrv.route_data import (
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    BrokerData,
    DataVersion,
    QueueData,
    TopicConfig,
)

if TYPE_CHECKING:
    from rmqd.remoting.fastjson import Encodable

log = logging.getLogger(__name__)


class BrokerChannel(Protocol):
    """What the registry needs of a broker's connection: its identity (compared with ``is``); the name server
    closes an expired one."""

    def close(self) -> None: ...


@dataclass
class BrokerLiveInfo:
    last_update: float  # time.monotonic() of the last REGISTER_BROKER (or unchanged QUERY_DATA_VERSION)
    data_version: DataVersion
    channel: Optional[BrokerChannel]  # the broker's Connection (None when registered out of band)
    ha_server_addr: str


@dataclass
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


class RouteInfoManager:
    """Broker registry + topic routes; see module doc."""

    def __init__(self, broker_expired_millis: int = 120000) -> None:
        self.broker_expired_millis = broker_expired_millis
        #: broker name -> its master's address as a controller in this process knows it (set by that controller)
        self.master_hint: Callable[[str], str | None] | None = None
        self.lock = threading.RLock()
        self.topicQueueTable: dict[str, dict[str, QueueData]] = {}
        self.brokerAddrTable: dict[str, BrokerData] = {}
        self.clusterAddrTable: dict[str, set[str]] = {}
        self.brokerLiveTable: dict[str, BrokerLiveInfo] = {}
        self.filterServerTable: dict[str, list[str]] = {}

    # -- registration ------------------------------------------------------------------------
    def register_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, data_version: DataVersion,
                        topic_configs: dict[str, TopicConfig] | None,
                        filter_server_list: list[str] | None,
                        channel: Optional[BrokerChannel]) -> RegisterBrokerResult:
        """Register or refresh a broker; only the master's registration updates topic queue data,
        and only on first registration or when its DataVersion changed."""
        result = RegisterBrokerResult()
        with self.lock:
            self.clusterAddrTable.setdefault(cluster_name, set()).add(broker_name)
            broker_data = self.brokerAddrTable.get(broker_name)
            register_first = broker_data is None
            if broker_data is None:
                broker_data = self.brokerAddrTable[broker_name] = BrokerData(cluster_name, broker_name)
            addrs = broker_data.brokerAddrs
            if broker_id == MASTER_ID and self._older_master(addrs.get(MASTER_ID), broker_addr, data_version):
                # 5.x (#6316, controller mode): a live master of a newer epoch keeps brokerId 0; the newcomer (a
                # master that has not heard of the election yet) is not routed
                self.brokerLiveTable.pop(broker_addr, None)
                log.warning("%s registers as master of %s at stateVersion %s, but %s is master at %s: ignored",
                            broker_addr, broker_name, data_version.stateVersion, addrs.get(MASTER_ID),
                            self.brokerLiveTable[addrs[MASTER_ID]].data_version.stateVersion)
                return result
            # The same address under another id: a slave became master (or vice versa).
            for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
                del addrs[other_id]
            old_addr = addrs.get(broker_id)
            addrs[broker_id] = broker_addr
            register_first = register_first or old_addr is None

            if topic_configs is not None and broker_id == MASTER_ID:
                if register_first or self._topic_config_changed(broker_addr, data_version):
                    for config in topic_configs.values():
                        self._create_and_update_queue_data(broker_name, config)

            previous = self.brokerLiveTable.get(broker_addr)
            self.brokerLiveTable[broker_addr] = BrokerLiveInfo(time.monotonic(), data_version, channel,
                                                               ha_server_addr)
            if previous is None:
                log.debug("new broker registered, %s HAServer: %s (%s/%s id %d)", broker_addr,
                         ha_server_addr, cluster_name, broker_name, broker_id)

            if filter_server_list:
                self.filterServerTable[broker_addr] = list(filter_server_list)
            else:
                self.filterServerTable.pop(broker_addr, None)

            if broker_id != MASTER_ID:
                self._answer_master(result, broker_name, broker_addr, addrs)
        return result

    def _answer_master(self, result: RegisterBrokerResult, broker_name: str, broker_addr: str,
                       addrs: dict[int, str]) -> None:
        """The master a registering slave is told (its HA client connects to the HA address): the one on record as
        brokerId 0, as Java's name server; with a controller in this process, the master that controller knows,
        once it has registered (none before). Java's answer can name an old master that registered a moment before
        the election, and a Java slave then points its HA client at it: the old master, a slave itself by then,
        still serves it and the slave never rejoins the SyncStateSet."""
        master_addr: str | None = addrs.get(MASTER_ID)
        if self.master_hint is not None:
            known = self.master_hint(broker_name)
            if known is not None:
                if known != master_addr:
                    log.info("%s (%s) registers while the controller's master is %s and the one on record %s: "
                             "told %s", broker_addr, broker_name, known, master_addr,
                             known if known in self.brokerLiveTable else "no master until it registers")
                master_addr = known
        if master_addr is None or master_addr == broker_addr:
            return
        master_live = self.brokerLiveTable.get(master_addr)
        if master_live is not None:
            result.ha_server_addr = master_live.ha_server_addr
            result.master_addr = master_addr

    def _older_master(self, current: str | None, newcomer: str, data_version: DataVersion) -> bool:
        """Whether ``newcomer`` registering as master is older than the live ``current`` master (both carry the
        5.x stateVersion, their master epoch; an equal one lets the newcomer in, as 5.x)."""
        if current is None or current == newcomer:
            return False
        live = self.brokerLiveTable.get(current)
        if live is None or live.data_version.stateVersion is None or data_version.stateVersion is None:
            return False
        return live.data_version.stateVersion > data_version.stateVersion

    def _create_and_update_queue_data(self, broker_name: str, config: TopicConfig) -> None:
        queue_data = QueueData(broker_name, config.read_queue_nums, config.write_queue_nums, config.perm,
                               config.topic_sys_flag)
        table = self.topicQueueTable.get(config.topic_name)
        if table is None:
            self.topicQueueTable[config.topic_name] = {broker_name: queue_data}
            log.debug("new topic registered, %s %s", config.topic_name, queue_data)
        elif table.get(broker_name) != queue_data:
            table[broker_name] = queue_data

    def _topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self.brokerLiveTable.get(broker_addr)
        return live is None or live.data_version != data_version

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        with self.lock:
            return self._topic_config_changed(broker_addr, data_version)

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        with self.lock:
            live = self.brokerLiveTable.get(broker_addr)
            return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, broker_addr: str) -> None:
        with self.lock:
            live = self.brokerLiveTable.get(broker_addr)
            if live is not None:
                live.last_update = time.monotonic()

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: add queue data of known brokers to a topic."""
        if not queue_datas:
            return
        with self.lock:
            table = self.topicQueueTable.setdefault(topic, {})
            for qd in queue_datas:
                if qd.brokerName in self.brokerAddrTable:
                    table[qd.brokerName] = qd
            if not table:
                del self.topicQueueTable[topic]

    # -- removal -----------------------------------------------------------------------------
    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        with self.lock:
            removed = self.brokerLiveTable.pop(broker_addr, None)
            self.filterServerTable.pop(broker_addr, None)
            log.debug("unregisterBroker, remove from brokerLiveTable %s, %s",
                     "OK" if removed is not None else "Failed", broker_addr)
            remove_name = False
            broker_data = self.brokerAddrTable.get(broker_name)
            if broker_data is not None:
                broker_data.brokerAddrs.pop(broker_id, None)
                if not broker_data.brokerAddrs:
                    del self.brokerAddrTable[broker_name]
                    remove_name = True
            if remove_name:
                names = self.clusterAddrTable.get(cluster_name)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.clusterAddrTable[cluster_name]
                self._remove_topic_by_broker_name(broker_name)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        for topic in list(self.topicQueueTable):
            table = self.topicQueueTable[topic]
            if table.pop(broker_name, None) is not None:
                log.debug("removeTopicByBrokerName, remove one broker's topic %s %s", broker_name, topic)
            if not table:
                log.debug("removeTopicByBrokerName, remove the topic all queue %s", topic)
                del self.topicQueueTable[topic]

    def on_channel_destroy(self, remote_addr: str, channel: Optional[BrokerChannel]) -> None:
        """A connection closed: drop the broker registered over it (if any)."""
        with self.lock:
            broker_addr = None
            if channel is not None:
                for addr, live in self.brokerLiveTable.items():
                    if live.channel is channel:
                        broker_addr = addr
                        break
            if broker_addr is None:
                if remote_addr not in self.brokerLiveTable:
                    return
                broker_addr = remote_addr
            log.info("the broker's channel destroyed, %s, clean it's data structure at once", broker_addr)
            self._remove_broker_addr(broker_addr)

    def _remove_broker_addr(self, broker_addr: str) -> None:
        self.brokerLiveTable.pop(broker_addr, None)
        self.filterServerTable.pop(broker_addr, None)
        removed_names = []
        for name in list(self.brokerAddrTable):
            data = self.brokerAddrTable[name]
            for broker_id in [i for i, a in data.brokerAddrs.items() if a == broker_addr]:
                del data.brokerAddrs[broker_id]
                log.info("remove brokerAddr[%d, %s] from brokerAddrTable, because channel destroyed",
                         broker_id, broker_addr)
            if not data.brokerAddrs:
                del self.brokerAddrTable[name]
                removed_names.append(name)
        for name in removed_names:
            for cluster in list(self.clusterAddrTable):
                names = self.clusterAddrTable[cluster]
                if name in names:
                    names.discard(name)
                    if not names:
                        del self.clusterAddrTable[cluster]
            self._remove_topic_by_broker_name(name)

    def scan_not_active_broker(self) -> list[tuple[str, Optional[BrokerChannel]]]:
        """Drop brokers silent for longer than ``broker_expired_millis``; returns (addr, channel)
        of each so the caller can close the channels."""
        expired = []
        deadline = time.monotonic() - self.broker_expired_millis / 1000.0
        with self.lock:
            for addr, live in list(self.brokerLiveTable.items()):
                if live.last_update < deadline:
                    log.warning("The broker channel expired, %s %dms", addr, self.broker_expired_millis)
                    expired.append((addr, live.channel))
                    self._remove_broker_addr(addr)
        return expired

    # -- topic admin -------------------------------------------------------------------------
    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        with self.lock:
            if not cluster_name:
                self.topicQueueTable.pop(topic, None)
                return
            table = self.topicQueueTable.get(topic)
            if table is None:
                return
            for name in self.clusterAddrTable.get(cluster_name, ()):
                table.pop(name, None)
            if not table:
                del self.topicQueueTable[topic]

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear the WRITE bit of ``broker_name``'s queue data in every topic; returns the count."""
        return self._change_perm_of_broker(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Set ``broker_name``'s queue data perm to READ|WRITE in every topic; returns the count."""
        return self._change_perm_of_broker(broker_name, lambda _perm: PERM_READ | PERM_WRITE)

    def _change_perm_of_broker(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        with self.lock:
            for table in self.topicQueueTable.values():
                qd = table.get(broker_name)
                if qd is not None:
                    qd.perm = change(qd.perm)
                    count += 1
        return count

    # -- queries -----------------------------------------------------------------------------
    def pickup_topic_route_data(self, topic: str) -> dict[str, Encodable] | None:
        """TopicRouteData for ``topic`` (``brokerDatas``, ``filterServerTable``, ``queueDatas``) or None (no queue
        data, or none of its brokers known)."""
        with self.lock:
            table = self.topicQueueTable.get(topic)
            if not table:
                return None
            names = sorted(table)
            queue_datas = [QueueData(**vars(table[n])) for n in names]
            broker_datas = []
            filter_servers: dict[str, list[str]] = {}
            for name in names:
                data = self.brokerAddrTable.get(name)
                if data is None:
                    continue
                broker_datas.append(data.clone())
                for addr in data.brokerAddrs.values():
                    servers = self.filterServerTable.get(addr)
                    if servers:
                        filter_servers[addr] = list(servers)
            if not broker_datas:
                return None
            return {"brokerDatas": broker_datas, "filterServerTable": filter_servers, "queueDatas": queue_datas}

    def get_all_cluster_info(self) -> dict[str, Encodable]:
        with self.lock:
            return {"brokerAddrTable": {n: d.clone() for n, d in self.brokerAddrTable.items()},
                    "clusterAddrTable": {c: set(names) for c, names in self.clusterAddrTable.items()}}

    def get_all_topic_list(self) -> list[str]:
        with self.lock:
            return sorted(self.topicQueueTable)

    def get_topics_by_cluster(self, cluster_name: str) -> list[str]:
        with self.lock:
            names = self.clusterAddrTable.get(cluster_name, set())
            return sorted(t for t, table in self.topicQueueTable.items() if names & table.keys())

    def get_system_topic_list(self) -> tuple[list[str], str | None]:
        """Cluster names and broker names (RocketMQ's "system topics"), plus one broker address."""
        with self.lock:
            topics: set[str] = set()
            for cluster, names in self.clusterAddrTable.items():
                topics.add(cluster)
                topics.update(names)
            broker_addr = None
            for name in sorted(self.brokerAddrTable):
                addrs = self.brokerAddrTable[name].brokerAddrs
                if addrs:
                    broker_addr = addrs[min(addrs)]
                    break
            return sorted(topics), broker_addr

    def _topics_by_sys_flag(self, predicate: Callable[[int], bool]) -> list[str]:
        with self.lock:
            out = []
            for topic, table in self.topicQueueTable.items():
                if table:
                    first = next(iter(table.values()))
                    if predicate(first.topicSysFlag):
                        out.append(topic)
            return sorted(out)

    def get_unit_topics(self) -> list[str]:
        return self._topics_by_sys_flag(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> list[str]:
        return self._topics_by_sys_flag(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    def get_has_unit_sub_un_unit_topic_list(self) -> list[str]:
        return self._topics_by_sys_flag(lambda f: not f & TOPIC_SYS_FLAG_UNIT and bool(f & TOPIC_SYS_FLAG_UNIT_SUB))
