"""SlaveSynchronize: a slave copies its master's metadata (Java's ``broker/slave/SlaveSynchronize``).

Every 10 s after a first 3 s (Java's schedule), each with a 3 s timeout, from the master address the name server
answered the last registration with:

=====================================  =========================  =========================================
request                                port                       applied
=====================================  =========================  =========================================
GET_ALL_TOPIC_CONFIG (21)              VIP port (listen port - 2)  when its DataVersion differs: replaces all
GET_ALL_CONSUMER_OFFSET (43)           listen port                always: the master's entries overwrite
GET_ALL_DELAY_OFFSET (45)              listen port                always: delayOffset.json
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) listen port                when its DataVersion differs: replaces all
=====================================  =========================  =========================================

The VIP call falls back to the listen port when nothing listens on port - 2 (an rmqd master started on port 0
has its VIP port elsewhere). Between rounds, an rmqd slave of an rmqd master also holds a WAIT_METADATA_CHANGE
(rmqd's code 9010) on the master, naming the versions it last copied: the topic and subscription-group
DataVersions and the master's consumer-offset change count. The master answers as soon as its topic or group
DataVersion differs (at once) or its offsets moved (at most every ``OFFSET_PUSH_S`` per slave), saying what changed
(``what=topic,group,offset``), and the slave copies just that. A topic or group created on the master reaches the
slave in milliseconds, and a committed consumer offset within ``OFFSET_PUSH_S`` + ``WAIT_POLL_S`` + one round trip
(~0.3 s on loopback) instead of up to 10 s. A Java master answers that code with REQUEST_CODE_NOT_SUPPORTED and
the slave falls back to the rounds alone.

Access control 2.0's users and ACLs (rmqd.auth) travel the same way between rmqd brokers: rmqd's
GET_AUTH_METADATA (9020) answers the master's whole store with its DataVersion, copied each round when it differs and
at once when WAIT_METADATA_CHANGE says ``auth`` changed. 5.x has no such copy (mqadmin's cluster forms write every
broker); a Java master answers REQUEST_CODE_NOT_SUPPORTED and the slave stops asking.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Collection, Optional, cast

from rmqd.common.data_version import DataVersion
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request, new_response
from rmqd.remoting.fastjson import loads_lenient
from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

if TYPE_CHECKING:
    from rmqd.auth.store import AuthStore
    from rmqd.common.data_version import DataVersionJson
    from rmqd.remoting.client import RemotingClient
    from rmqd.replicas.handles import RunBlocking
    from rmqd.replicas.role_manager import RoleManager
    from rmqd.store.metadata import (ConsumerOffsetFileJson, ConsumerOffsetManager, DelayOffsetFileJson,
                                     DelayOffsetManager, SubscriptionGroupManager, SubscriptionGroupsFileJson,
                                     TopicConfigManager, TopicsFileJson)

log = logging.getLogger(__name__)

FIRST_DELAY_S = 3.0
PERIOD_S = 10.0
CALL_TIMEOUT_S = 3.0
WAIT_METADATA_CHANGE = 9010          # rmqd only: held by the master until its topics or groups change
GET_AUTH_METADATA = 9020             # rmqd only: the master's users and ACLs (rmqd.auth.store snapshot)
WAIT_HOLD_S = 30.0
WAIT_POLL_S = 0.05
RETRY_S = 5.0
OFFSET_PUSH_S = 0.25                 # a slave hears of moved consumer offsets at most this often


def vip_address(addr: str) -> str:
    """Java's ``MixAll.brokerVIPChannel(true, addr)``: the same host, port - 2."""
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) - 2}"


def _version_ext(v: DataVersion, prefix: str) -> dict[str, str]:
    return {f"{prefix}Timestamp": str(v.timestamp), f"{prefix}Counter": str(v.counter)}


class SlaveSynchronize:
    """Pulls the master's metadata into the slave's managers (see the module docstring)."""

    def __init__(self, role: "RoleManager", client: "RemotingClient", topics: "TopicConfigManager",
                 groups: "SubscriptionGroupManager", offsets: "ConsumerOffsetManager",
                 delay_offsets: "DelayOffsetManager", own_address: Callable[[], str], run_blocking: "RunBlocking",
                 on_topics_replaced: Optional[Callable[[list[TopicConfig]], None]] = None,
                 auth_store: Optional["AuthStore"] = None) -> None:
        self.role = role
        self.auth_store = auth_store        # rmqd.auth.store.AuthStore, or None
        self.master_auth_version: Optional[DataVersion] = None      # of the last users-and-ACLs copy
        self.auth_supported: Optional[bool] = None                  # False: the master does not know 9020
        self.client = client
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.delay_offsets = delay_offsets
        self.own_address = own_address
        self.run_blocking = run_blocking
        self.on_topics_replaced = on_topics_replaced
        self.rounds = 0
        self.pushes = 0
        self.push_supported: Optional[bool] = None
        self.master_topic_version: Optional[DataVersion] = None     # of the last topic table copied
        self.master_group_version: Optional[DataVersion] = None     # of the last subscription-group table copied
        self.master_offset_version = ""     # the master's offset change count when it last said they moved
        self.offset_pushes = 0
        self.last_offset_copy_ms = 0
        self._lock = asyncio.Lock()

    def _master(self) -> Optional[str]:
        addr = self.role.master_addr
        if not self.role.is_slave or not addr or addr == self.own_address():
            return None
        return addr

    # ------------------------------------------------------------------ rounds
    async def sync_all(self) -> None:
        """One round of the four syncs (each failure logged on its own, as Java does)."""
        if self._master() is None:
            return
        async with self._lock:
            for step in (self.sync_topic_config, self.sync_consumer_offset, self.sync_delay_offset,
                         self.sync_subscription_group_config, self.sync_auth):
                master = self._master()
                if master is None:
                    return
                try:
                    await step(master)
                except Exception as exc:
                    log.error("SlaveSynchronize %s from %s failed: %r", step.__name__, master, exc)
            self.rounds += 1

    async def _call(self, addr: str, code: int) -> bytes:
        resp = await self.client.invoke(addr, new_request(code), CALL_TIMEOUT_S)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {code} answered {resp.code} {resp.remark}")
        return resp.body_bytes() if resp.body is not None else b""

    async def sync_topic_config(self, master: str) -> None:
        try:
            body = await self._call(vip_address(master), RequestCode.GET_ALL_TOPIC_CONFIG)
        except (ConnectionError, OSError):
            body = await self._call(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = cast("TopicsFileJson", loads_lenient(body))       # the JSON boundary: the master's topics.json
        version = DataVersion.from_json(wrapper.get("dataVersion"))
        self.master_topic_version = version
        if version == self.topics.data_version:
            return
        changed = await self.run_blocking(self._replace_topics, wrapper, version)
        log.info("Update slave topic config from master, %s", master)
        if changed and self.on_topics_replaced is not None:
            self.on_topics_replaced(changed)

    def _replace_topics(self, wrapper: "TopicsFileJson", version: DataVersion) -> list[TopicConfig]:
        mgr = self.topics
        table = {name: TopicConfig.from_json(d) for name, d in (wrapper.get("topicConfigTable") or {}).items()}
        with mgr._lock:                 # held over the write too: another persist would race for the temp file
            changed = [tc for name, tc in table.items() if mgr.table.get(name) != tc]
            mgr.table.clear()
            mgr.table.update(table)
            mgr.data_version = version
            mgr.persist()
        return changed

    async def sync_consumer_offset(self, master: str) -> None:
        await self._copy_offsets(master, True)

    async def _copy_offsets(self, master: str, persist: bool) -> None:
        body = await self._call(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        data = cast("ConsumerOffsetFileJson", loads_lenient(body))     # the JSON boundary: consumerOffset.json
        table = {k: {int(q): int(o) for q, o in (v or {}).items()} for k, v in (data.get("offsetTable") or {}).items()}
        await self.run_blocking(self._apply_offsets, table, persist)
        self.last_offset_copy_ms = int(time.time() * 1000)
        log.debug("Update slave consumer offset from master, %s", master)

    def _apply_offsets(self, table: dict[str, dict[int, int]], persist: bool = True) -> None:
        """The master's entries overwrite; a pushed copy (several a second) is persisted by the manager's own
        5 s flush, a round's at once (Java's)."""
        mgr = self.offsets
        with mgr._lock:
            mgr.table.update(table)
            if not persist:
                mgr._dirty = True
                return
            mgr.persist()

    async def sync_delay_offset(self, master: str) -> None:
        body = await self._call(master, RequestCode.GET_ALL_DELAY_OFFSET)
        if not body:
            return
        data = cast("DelayOffsetFileJson", loads_lenient(body))        # the JSON boundary: delayOffset.json
        table = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}
        await self.run_blocking(self._apply_delay_offsets, table)
        log.debug("Update slave delay offset from master, %s", master)

    def _apply_delay_offsets(self, table: dict[int, int]) -> None:
        mgr = self.delay_offsets
        with mgr._lock:
            mgr.table = table
            mgr.persist()

    async def sync_subscription_group_config(self, master: str) -> None:
        body = await self._call(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        # the JSON boundary: the master's subscriptionGroup.json
        wrapper = cast("SubscriptionGroupsFileJson", loads_lenient(body))
        version = DataVersion.from_json(wrapper.get("dataVersion"))
        mgr = self.groups
        self.master_group_version = version
        if version == mgr.data_version:
            return
        table = {name: SubscriptionGroupConfig.from_json(d)
                 for name, d in (wrapper.get("subscriptionGroupTable") or {}).items()}
        await self.run_blocking(self._replace_groups, table, version)
        log.info("Update slave Subscription Group from master, %s", master)

    def _replace_groups(self, table: dict[str, SubscriptionGroupConfig], version: DataVersion) -> None:
        mgr = self.groups
        with mgr._lock:
            mgr.table.clear()
            mgr.table.update(table)
            mgr.data_version = version
            mgr.persist()

    async def sync_auth(self, master: str) -> None:
        """The master's users and ACLs when their version differs from the copy held (rmqd masters only)."""
        if self.auth_store is None or self.auth_supported is False:
            return
        resp = await self.client.invoke(master, new_request(GET_AUTH_METADATA), CALL_TIMEOUT_S)
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            self.auth_supported = False
            log.info("master %s does not serve its users and ACLs (not rmqd): they are not copied", master)
            return
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {GET_AUTH_METADATA} answered {resp.code} {resp.remark}")
        self.auth_supported = True
        data = loads_lenient(resp.body_bytes())
        if not isinstance(data, dict):
            raise ValueError(f"the master's users and ACLs are not a JSON object: {type(data).__name__}")
        # the JSON boundary: the snapshot's DataVersion (from_json reads anything else as 0/0)
        self.master_auth_version = DataVersion.from_json(cast("Optional[DataVersionJson]", data.get("dataVersion")))
        auth_store = self.auth_store
        if self.master_auth_version == auth_store.state.version:
            return
        if await self.run_blocking(auth_store.replace, data):
            log.info("Update slave users and ACLs from master, %s", master)

    # ------------------------------------------------------------------ push (rmqd <-> rmqd)
    async def follow_changes(self) -> None:
        """Hold WAIT_METADATA_CHANGE on the master and copy what it says changed (runs until cancelled; stops for
        good when the master does not know the code)."""
        while True:
            master = self._master()
            if master is None:
                await asyncio.sleep(0.1)             # until the name server names the master
                continue
            ext = {**_version_ext(self.master_topic_version or DataVersion(0, 0), "topic"),
                   **_version_ext(self.master_group_version or DataVersion(0, 0), "group"),
                   **(_version_ext(self.master_auth_version or DataVersion(0, 0), "auth")
                      if self.auth_store is not None and self.auth_supported is not False else {}),
                   "offsetVersion": self.master_offset_version,
                   "holdMillis": str(int(WAIT_HOLD_S * 1000)),
                   "brokerId": str(self.role.broker_id)}       # the master counts who holds which version
            try:
                resp = await self.client.invoke(master, new_request(WAIT_METADATA_CHANGE, ext), WAIT_HOLD_S + 5)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("WAIT_METADATA_CHANGE on %s failed: %r", master, exc)
                await asyncio.sleep(RETRY_S)
                continue
            if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                self.push_supported = False
                log.info("master %s does not push metadata changes: SlaveSynchronize every %.0f s only", master,
                         PERIOD_S)
                return
            self.push_supported = True
            got = resp.ext_fields or {}
            if got.get("changed") != "true":
                continue
            self.pushes += 1
            what = set((got.get("what") or "topic").split(","))      # an older rmqd master pushes topics only
            async with self._lock:
                try:
                    if "topic" in what:
                        await self.sync_topic_config(master)
                    if "group" in what:
                        await self.sync_subscription_group_config(master)
                    if "auth" in what:
                        await self.sync_auth(master)
                    if "offset" in what:
                        version = got.get("offsetVersion", "")
                        await self._copy_offsets(master, False)
                        self.master_offset_version = version
                        self.offset_pushes += 1
                except Exception as exc:
                    log.error("SlaveSynchronize %s from %s failed: %r", ",".join(sorted(what)), master, exc)
                    await asyncio.sleep(RETRY_S)


class MetadataChangeWaiter:
    """The master's side of WAIT_METADATA_CHANGE: answers once its topic or subscription-group DataVersion differs
    from the one the slave names, or its consumer offsets moved since the change count the slave names (at most
    every ``OFFSET_PUSH_S`` per slave), or after ``holdMillis`` (at most 60 s) with changed=false."""

    def __init__(self, topics: "TopicConfigManager", groups: Optional["SubscriptionGroupManager"] = None,
                 offsets: Optional["ConsumerOffsetManager"] = None, auth: Optional["AuthStore"] = None) -> None:
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.auth = auth                    # rmqd.auth.store.AuthStore (its state's version), or None
        #: brokerId -> (timestamp, counter) of the users-and-ACLs version that slave last said it holds
        self.copied_auth: dict[int, tuple[str, str]] = {}
        #: brokerId -> (timestamp, counter) of the topic table that slave last said it holds
        self.copied: dict[int, tuple[str, str]] = {}
        #: brokerId -> (timestamp, counter) of the subscription-group table that slave last said it holds
        self.copied_groups: dict[int, tuple[str, str]] = {}
        # brokerId (None: a slave that named none) -> loop time it was last told offsets moved
        self._offsets_told: dict[Optional[int], float] = {}
        #: notified (from the loop) whenever a slave names the versions it holds; the master's pool threads wait on it
        self.copied_changed = threading.Condition()

    def wait_copied(self, members: Callable[[], Collection[int]], holds: Callable[[int], bool],
                    timeout_s: float) -> list[int]:
        """From a pool thread: until every broker id of ``members()`` ``holds``, or ``timeout_s``; the ids still
        missing (none: all hold it). ``members()`` is read again at least every 100 ms (the set can shrink)."""
        deadline = time.monotonic() + timeout_s
        with self.copied_changed:
            while True:
                missing = [m for m in members() if not holds(m)]
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    return missing
                self.copied_changed.wait(min(left, 0.1))

    def holds(self, broker_id: int, timestamp: int, counter: int) -> bool:
        """Has slave ``broker_id`` said it holds this topic table version (or a later one of it)?"""
        return self._holds(self.copied, broker_id, timestamp, counter)

    def holds_groups(self, broker_id: int, timestamp: int, counter: int) -> bool:
        """Has slave ``broker_id`` said it holds this subscription-group table version (or a later one of it)?"""
        return self._holds(self.copied_groups, broker_id, timestamp, counter)

    def holds_auth(self, broker_id: int, timestamp: int, counter: int) -> bool:
        """Has slave ``broker_id`` said it holds this users-and-ACLs version (or a later one of it)?"""
        return self._holds(self.copied_auth, broker_id, timestamp, counter)

    @staticmethod
    def _holds(table: dict[int, tuple[str, str]], broker_id: int, timestamp: int, counter: int) -> bool:
        got = table.get(broker_id)
        return got is not None and got[0] == str(timestamp) and int(got[1]) >= counter

    @staticmethod
    def _version_differs(v: DataVersion, ext: dict[str, str], prefix: str) -> bool:
        return str(v.timestamp) != ext.get(f"{prefix}Timestamp") or str(v.counter) != ext.get(f"{prefix}Counter")

    def _changes(self, ext: dict[str, str], broker_id: Optional[int], now: float) -> list[str]:
        what = []
        if self._version_differs(self.topics.data_version, ext, "topic"):
            what.append("topic")
        if self.groups is not None and "groupCounter" in ext and \
                self._version_differs(self.groups.data_version, ext, "group"):
            what.append("group")
        if self.auth is not None and "authCounter" in ext and \
                self._version_differs(self.auth.state.version, ext, "auth"):
            what.append("auth")
        if self.offsets is not None and "offsetVersion" in ext and \
                str(self.offsets.change_count) != ext["offsetVersion"] and \
                now - self._offsets_told.get(broker_id, -OFFSET_PUSH_S) >= OFFSET_PUSH_S:
            what.append("offset")
        return what

    def _record(self, table: dict[int, tuple[str, str]], ext: dict[str, str], prefix: str, broker_id: int) -> None:
        if ext.get(f"{prefix}Counter"):
            table[broker_id] = (ext.get(f"{prefix}Timestamp", ""), ext[f"{prefix}Counter"])

    async def wait(self, conn: object, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        broker_id: Optional[int] = None
        if ext.get("brokerId"):
            try:
                broker_id = int(ext["brokerId"])
            except ValueError:
                log.info("WAIT_METADATA_CHANGE from %s with a bad brokerId %r", getattr(conn, "remote_address", "?"),
                         ext.get("brokerId"))
        if broker_id is not None:
            with self.copied_changed:
                self._record(self.copied, ext, "topic", broker_id)
                self._record(self.copied_groups, ext, "group", broker_id)
                self._record(self.copied_auth, ext, "auth", broker_id)
                self.copied_changed.notify_all()
        try:
            hold = min(60.0, max(0.0, int(ext.get("holdMillis") or 0) / 1000))
        except ValueError:
            hold = WAIT_HOLD_S
        loop = asyncio.get_running_loop()
        deadline = loop.time() + hold
        what = self._changes(ext, broker_id, loop.time())
        while not what and loop.time() < deadline and not getattr(conn, "closed", False):
            await asyncio.sleep(WAIT_POLL_S)
            what = self._changes(ext, broker_id, loop.time())
        out = {"changed": "true" if what else "false"}
        if what:
            out["what"] = ",".join(what)
        if "offset" in what and self.offsets is not None:      # "offset" is only found with offsets
            self._offsets_told[broker_id] = loop.time()
            out["offsetVersion"] = str(self.offsets.change_count)
        return new_response(ResponseCode.SUCCESS, None, out)
