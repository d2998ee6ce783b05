"""The console's "failover" feature page (``/features/failover``): RocketMQ 5 controller mode as the brokers and
the controllers see it.

- **brokers**: per broker in controller mode, from its GET_BROKER_HA_STATUS (907) answer's ``rmqdReplicaStatus``
  (``rmqd.replicas.wiring.Replication.replica_status``): role, brokerId, master epoch, the SyncStateSet and its
  epoch as the master holds them, fenced or not, and the time and cause of its last role switch;
- **controllers**: each controller the brokers name (their ``controllerAddr``), from CONTROLLER_GET_METADATA_INFO
  (1005): the leader, whether it leads, its peers;
- **groups**: the leader's CONTROLLER_GET_SYNC_STATE_DATA (1006) for those brokers' groups: master, master epoch,
  SyncStateSet epoch, in-sync and not-in-sync replicas (a dead broker shows here, ``alive=false``).

Everything goes over the remoting codes, so ``rmqd console -n`` and a broker's own console show the same page.
None (no page) when no broker runs in controller mode.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Optional, cast

from rmqd.admin.client import AdminError
from rmqd.admin.ha_status import GET_BROKER_HA_STATUS
from rmqd.controller.codes import ControllerRequestCode as R
from rmqd.remoting import fastjson

if TYPE_CHECKING:
    from rmqd.console.admin_bodies import ReplicaMemberBody, ReplicasInfoBody, ReplicaStatusBody, SyncStateDataBody
    from rmqd.console.remote_cluster import RemoteCluster
    from rmqd.console.view_base import BrokerRow, JsonObject

log = logging.getLogger(__name__)

_UNREACHABLE = (OSError, TimeoutError, ConnectionError)


def when(ms: Optional[int]) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}" if ms else "never"


def broker_statuses(view: "RemoteCluster") -> list[tuple["BrokerRow", "ReplicaStatusBody"]]:
    """(name-server row, rmqdReplicaStatus) of every registered broker that runs in controller mode."""
    from rmqd.console.remote_cluster import RemoteCluster
    # every broker the name servers know (a broker's own console lists only itself when it has no name server)
    brokers = RemoteCluster.brokers(view) if view.namesrv_addr else view.brokers()
    out: list[tuple[BrokerRow, ReplicaStatusBody]] = []
    for b in brokers:
        try:
            body = view._json(b["addr"], GET_BROKER_HA_STATUS) or {}
        except AdminError as exc:                 # a broker without the code (Java 4.9.8)
            log.debug("console: no HA status from %s: %s", b["addr"], exc)
            continue
        except _UNREACHABLE as exc:
            log.warning("console: HA status of %s unavailable: %s", b["addr"], exc)
            continue
        st = body.get("rmqdReplicaStatus") if isinstance(body, dict) else None
        if isinstance(st, dict) and st.get("controllerMode"):
            out.append((b, cast("ReplicaStatusBody", st)))      # the JSON decode boundary: rmqd's replica status
    return out


def controller_view(view: "RemoteCluster", controllers: list[str],
                    groups: list[str]) -> tuple[list[list[str]], dict[str, "ReplicasInfoBody"], Optional[str]]:
    """(rows per controller, the leader's replicas info per group, the leader's address)."""
    rows: list[list[str]] = []
    leader: Optional[str] = None
    for addr in controllers:
        try:
            md = dict(view.call(lambda a: a.call(addr, R.CONTROLLER_GET_METADATA_INFO)).ext_fields or {})
        except (AdminError, *_UNREACHABLE) as exc:
            rows.append([addr, "unreachable", "", "", "", str(exc)])
            continue
        is_leader = str(md.get("isLeader")).lower() == "true"
        leader = addr if is_leader else leader or None
        rows.append([addr, "leader" if is_leader else "follower", md.get("controllerLeaderId") or "",
                     md.get("controllerLeaderAddress") or "", md.get("group") or "", md.get("peers") or ""])
    table: dict[str, ReplicasInfoBody] = {}
    if leader is None:
        leader = next((r[3] for r in rows if r[3]), None)
    if leader and groups:
        try:
            # the JSON decode boundary: the controller's SyncStateSet data
            data = cast("SyncStateDataBody | None", view.call(
                lambda a: a.call_json(leader, R.CONTROLLER_GET_SYNC_STATE_DATA, body=fastjson.dumps(sorted(groups)))))
            table = (data or {}).get("replicasInfoTable") or {}
        except (AdminError, *_UNREACHABLE) as exc:
            log.warning("console: SyncStateSet data from controller %s unavailable: %s", leader, exc)
    return rows, table, leader


def _ids(members: "list[ReplicaMemberBody] | None") -> str:
    return ", ".join(f"{m.get('brokerId')}@{m.get('brokerAddress')}" + ("" if m.get("alive", True) else " (dead)")
                     for m in members or ())


def failover_page(view: "RemoteCluster") -> Optional["JsonObject"]:
    statuses = broker_statuses(view)
    if not statuses:
        return None
    brokers = []
    for b, st in statuses:
        last = st.get("lastSwitch")
        brokers.append([b["brokerName"], b["addr"], st.get("role", ""), st.get("controllerBrokerId", ""),
                        st.get("masterEpoch", ""), ", ".join(str(i) for i in st.get("syncStateSet") or ()),
                        st.get("syncStateSetEpoch", ""), "yes" if st.get("fenced") else "no",
                        when(last.get("time_ms") if last else None), last.get("cause", "none") if last else "none",
                        sum((st.get("switchCounts") or {}).values())])
    controllers = sorted({a for _, st in statuses for a in st.get("controllerAddrs") or ()})
    groups = sorted({b["brokerName"] for b, _ in statuses})
    ctl_rows, table, leader = controller_view(view, controllers, groups)
    group_rows = [[name, info.get("masterBrokerId"), info.get("masterAddress"), info.get("masterEpoch"),
                   info.get("syncStateSetEpoch"), _ids(info.get("inSyncReplicas")),
                   _ids(info.get("notInSyncReplicas"))] for name, info in sorted(table.items())]
    return {
        "summary": {"controller leader": leader or "none", "controllers": len(controllers),
                    "replica groups": len(groups), "brokers in controller mode": len(brokers)},
        "tables": [{"id": "failover-brokers", "title": "Brokers",
                    "columns": ["broker", "address", "role", "brokerId", "master epoch", "SyncStateSet",
                                "SyncStateSet epoch", "fenced", "last switch", "cause", "switches"],
                    "rows": brokers},
                   {"id": "failover-controllers", "title": "Controllers",
                    "columns": ["controller", "role", "leader id", "leader address", "group", "peers"],
                    "rows": ctl_rows},
                   {"id": "failover-groups", "title": "Replica groups (the controller leader's view)",
                    "columns": ["group", "master brokerId", "master address", "master epoch", "SyncStateSet epoch",
                                "in sync", "not in sync"],
                    "rows": group_rows}],
    }
