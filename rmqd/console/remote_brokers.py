"""RemoteBrokers: the console's cluster overview (every broker with its runtime figures and each slave's lag),
a broker's page (runtime and config), and the feature pages of what the brokers run (tier, controller mode).
"""
from __future__ import annotations

import logging
from typing import cast

from rmqd.admin.client import AdminError
from rmqd.admin.ha_status import GET_BROKER_HA_STATUS
from rmqd.console.admin_bodies import HaStatusBody, TierStatusBody
from rmqd.console.remote_cluster import RemoteCluster
from rmqd.console.view_base import BrokerRow, JsonObject, ViewError
from rmqd.processors.admin_tier import GET_TIER_STATUS
from rmqd.remoting.codes import RequestCode

log = logging.getLogger(__name__)


class RemoteBrokers(RemoteCluster):
    """The broker pages over the remoting admin codes."""

    def overview(self) -> JsonObject:
        brokers = self.brokers()
        for b in brokers:
            try:
                rt = self.broker_runtime(b["addr"])
            except (AdminError, OSError) as exc:
                b["error"] = str(exc)
                continue
            b["version"] = rt.get("brokerVersionDesc", "")
            b["putTps"] = rt.get("putTps", "")
            b["getTransferredTps"] = rt.get("getTransferedTps", rt.get("getTransferredTps", ""))
            b["msgPutTotalTodayNow"] = rt.get("msgPutTotalTodayNow", "")
            b["msgGetTotalTodayNow"] = rt.get("msgGetTotalTodayNow", "")
            b["commitLogDiskRatio"] = rt.get("commitLogDiskRatio", "")
            b["bootTimestamp"] = rt.get("bootTimestamp", "")
            b["commitLogMaxOffset"] = int(rt.get("commitLogMaxOffset", 0) or 0)
        self._replication(brokers)
        return {"namesrv": self.namesrv_addr, "mode": self.mode, "brokers": brokers,
                "clusters": sorted({b["cluster"] for b in brokers})}

    def _replication(self, brokers: list[BrokerRow]) -> None:
        """Each slave's lag behind its master: bytes from the CommitLog max offsets, milliseconds from the
        master's GET_BROKER_HA_STATUS (rmqd; a Java 4.9.8 master has none), slaves and connections paired in
        offset order; each master's count of slaves in sync."""
        groups: dict[str, list[BrokerRow]] = {}
        for b in brokers:
            if "error" not in b:
                groups.setdefault(b["brokerName"], []).append(b)
        for members in groups.values():
            master = next((b for b in members if b["brokerId"] == 0), None)
            slaves = sorted((b for b in members if b["brokerId"] != 0), key=lambda b: b["commitLogMaxOffset"])
            if master is None or not slaves:
                continue
            for b in slaves:
                b["lagBytes"] = max(0, master["commitLogMaxOffset"] - b["commitLogMaxOffset"])
            try:
                ha = self._answer(HaStatusBody, master["addr"], GET_BROKER_HA_STATUS)
            except AdminError:
                continue                  # a broker without the code (Java 4.9.8): bytes only
            conns = sorted(ha.get("haConnectionInfo") or [], key=lambda c: c.get("slaveAckOffset", 0))
            master["inSyncSlaves"] = ha.get("inSyncSlaveNums", 0)
            if len(conns) == len(slaves):
                for b, c in zip(slaves, conns):
                    b["lagMillis"] = c.get("lagMillis", 0)

    def broker(self, addr: str) -> JsonObject:
        known = {b["addr"] for b in self.brokers()}
        if addr not in known:
            raise ViewError(f"no broker at {addr}", 404)
        resp = self.call(lambda a: a.call(addr, RequestCode.GET_BROKER_CONFIG))
        text = resp.body_bytes().decode("utf-8", "replace") if resp.body is not None else ""
        from rmqd.config import parse_properties
        return {"addr": addr, "runtime": self.broker_runtime(addr), "config": parse_properties(text)}

    # ------------------------------------------------------------------ extension points
    def extensions(self) -> dict[str, JsonObject]:
        """Feature pages (name -> status dict, absent when no broker runs the feature). Over the
        remoting codes: the tier page, from rmqd's admin code 9003 on every master (a broker without
        a tier, or one that does not know the code, such as the Java broker, is left out)."""
        from rmqd.console.feature_pages import tier_page_of
        statuses: list[tuple[str, TierStatusBody]] = []
        for name, addr in sorted(self.masters().items()):
            try:
                st = self._json(addr, GET_TIER_STATUS)
            except AdminError as exc:
                log.debug("console: no tier status from %s (%s): %s", name, addr, exc)
                continue
            except (OSError, TimeoutError) as exc:
                log.warning("console: tier status of %s (%s) unavailable: %s", name, addr, exc)
                continue
            if isinstance(st, dict):
                # the JSON decode boundary: rmqd's GET_TIER_STATUS body
                statuses.append((name, cast(TierStatusBody, st)))
        page = tier_page_of(statuses)
        out = {"tier": page} if page is not None else {}
        return self._with_failover(out)

    def _with_failover(self, pages: dict[str, JsonObject]) -> dict[str, JsonObject]:
        """Add the controller-mode page (rmqd.console.failover_page) when a broker runs in controller mode."""
        from rmqd.console.failover_page import failover_page
        try:
            page = failover_page(self)
        except (AdminError, OSError, TimeoutError) as exc:
            log.warning("console: the failover page is unavailable: %s", exc)
            page = {"error": f"status unavailable: {exc}"}
        if page is not None:
            pages["failover"] = page
        return pages
