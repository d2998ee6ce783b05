"""KVConfigManager: the name server's namespaced key/value store (RocketMQ's KVConfigManager).

Persisted to ``NamesrvConfig.kvConfigPath`` as ``{"configTable":{ns:{k:v}}}``.  Mutations update
memory at once (on the loop); :meth:`persist` snapshots the table on the caller's thread and writes
the file on a single-thread executor (tmp + fsync + rename + directory fsync), so writes land in
order and the loop never blocks on the disk.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from typing import TYPE_CHECKING, cast

from rmqd.common.fileutil import atomic_write
from rmqd.remoting.fastjson import dumps, loads_lenient

if TYPE_CHECKING:
    from typing import TypedDict

    class KVConfigFileJson(TypedDict, total=False):     # the kvConfig.json file (Java's KVConfigSerializeWrapper)
        configTable: dict[str, dict[str, str]]

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
#: rmqd's brokers keep their gRPC ports here while they run (rmqd.grpc.advertise)
NAMESPACE_GRPC_ENDPOINT = "RMQD_GRPC_ENDPOINT"
#: Namespaces whose entries live as long as their writers do, like the broker table: kept in memory only (a name
#: server that restarts has them again from the live writers), written and removed without INFO lines.
LIVE_NAMESPACES = frozenset({NAMESPACE_GRPC_ENDPOINT})


class KVConfigManager:
    """Namespaced KV config with crash-safe, off-loop persistence."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.configTable: dict[str, dict[str, str]] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        """Read the file if it exists (startup, before serving)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        if not data.strip():
            return
        try:
            # decoded JSON, read as the file's shape (another shape raises AttributeError)
            table = cast("KVConfigFileJson", loads_lenient(data) or {}).get("configTable") or {}
        except ValueError:
            log.exception("kv config file %s is corrupt; starting with an empty KV table", self.path)
            return
        with self.lock:
            self.configTable = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()
                                if str(ns) not in LIVE_NAMESPACES}
        if self.configTable:
            log.info("loaded %d KV namespaces from %s", len(self.configTable), self.path)

    def close(self) -> None:
        """Wait for pending writes and stop the writer thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- operations --------------------------------------------------------------------------
    def put(self, namespace: str, key: str, value: str) -> None:
        with self.lock:
            table = self.configTable.setdefault(namespace, {})
            previous = table.get(key)
            table[key] = value
        level = logging.DEBUG if namespace in LIVE_NAMESPACES else logging.INFO
        if previous is None:
            log.log(level, "putKVConfig create new Namespace: %s Key: %s Value: %s", namespace, key, value)
        else:
            log.log(level, "putKVConfig update config item, Namespace: %s Key: %s Value: %s", namespace, key, value)

    def delete(self, namespace: str, key: str) -> bool:
        with self.lock:
            table = self.configTable.get(namespace)
            if table is None or key not in table:
                return False
            value = table.pop(key)
        log.log(logging.DEBUG if namespace in LIVE_NAMESPACES else logging.INFO,
                "deleteKVConfig delete a config item, Namespace: %s Key: %s Value: %s", namespace, key, value)
        return True

    def get(self, namespace: str, key: str) -> str | None:
        with self.lock:
            return self.configTable.get(namespace, {}).get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> bytes | None:
        """KVTable JSON of one namespace, or None when the namespace does not exist."""
        with self.lock:
            table = self.configTable.get(namespace)
            if table is None:
                return None
            return dumps({"table": dict(table)})

    # -- persistence -------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        with self.lock:
            return dumps({"configTable": {ns: dict(kv) for ns, kv in self.configTable.items()
                                          if ns not in LIVE_NAMESPACES}})

    def persist_sync(self) -> None:
        atomic_write(self.path, self.snapshot(), keep_backup=False)

    async def persist(self) -> None:
        """Snapshot now, write on the KV writer thread; errors are logged (as Java does)."""
        data = self.snapshot()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="namesrv-kv-writer")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, atomic_write, self.path, data, False)
        except OSError:
            log.exception("persist kvconfig to %s failed", self.path)
