"""``rmqd admin haStatus``: master/slave replication state, as RocketMQ 5's ``mqadmin haStatus`` prints it.

An rmqd broker answers GET_BROKER_HA_STATUS (907, 5.x) with ``HARuntimeInfo``: a master lists its slaves with
the acknowledged offset, the lag in bytes (``#Diff``) and, rmqd's addition, the lag in time (``#Lag(ms)``: the
age of the oldest byte sent and not acknowledged). A Java 4.9.8 broker does not know the code; then the lag is the
difference of the CommitLog max offsets of the group's master and slaves (GET_BROKER_RUNTIME_INFO), as a 4.9.8
operator computes it from ``brokerStatus``.
"""
from __future__ import annotations

import argparse
import time

from rmqd.admin.bodies import HaStatus, RuntimeInfo
from rmqd.admin.client import AdminClient, AdminError
from rmqd.remoting.codes import ResponseCode

GET_BROKER_HA_STATUS = 907


def _ts(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + ",%03d" % (ms % 1000)


def _groups(c: AdminClient, cluster: str | None) -> list[dict[int, str]]:
    """brokerId -> address of every broker group (of ``cluster``, or of every cluster)."""
    info = c.cluster_info()
    names = info.get("clusterAddrTable", {}).get(cluster, []) if cluster else \
        [n for ns in info.get("clusterAddrTable", {}).values() for n in ns]
    out: list[dict[int, str]] = []
    for name in sorted(set(names)):
        addrs = (info.get("brokerAddrTable", {}).get(name) or {}).get("brokerAddrs") or {}
        out.append({int(k): v for k, v in addrs.items()})
    return out


def _print_master(addr: str, info: HaStatus) -> None:
    conns = info.get("haConnectionInfo") or []
    print(f"\n#MasterAddr\t{addr}\n#MasterCommitLogMaxOffset\t{info.get('masterCommitLogMaxOffset', 0)}\n"
          f"#SlaveNum\t{len(conns)}\n#InSyncSlaveNum\t{info.get('inSyncSlaveNums', 0)}")
    print("%-32s  %-16s %16s %16s %16s %16s %12s" % ("#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)",
                                                     "#Status", "#TransferFromWhere", "#Lag(ms)"))
    for ci in conns:
        print("%-32s  %-16d %16d %16.2f %16s %16d %12d" % (
            ci["addr"], ci["slaveAckOffset"], ci["diff"], ci.get("transferredByteInSecond", 0) / 1024.0,
            "OK" if ci.get("inSync") else "Fall Behind", ci.get("transferFromWhere", 0), ci.get("lagMillis", 0)))


def _print_slave(info: HaStatus) -> None:
    ci = info.get("haClientRuntimeInfo") or {}
    print(f"\n#MasterAddr\t{ci.get('masterAddr', '')}")
    print(f"#CommitLogMaxOffset\t{ci.get('maxOffset', 0)}")
    print("#TransferSpeed(KB/s)\t%.2f" % (ci.get("transferredByteInSecond", 0) / 1024.0))
    print(f"#LastReadTime\t{_ts(ci.get('lastReadTimestamp', 0))}")
    print(f"#LastWriteTime\t{_ts(ci.get('lastWriteTimestamp', 0))}")
    print(f"#MasterFlushOffset\t{ci.get('masterFlushOffset', 0)}")


def _print_offsets(c: AdminClient, group: dict[int, str]) -> None:
    """A broker without GET_BROKER_HA_STATUS (Java 4.9.8): lag from the CommitLog max offsets."""
    def max_offset(addr: str) -> int:
        return int(c.answer(RuntimeInfo, addr, 28)["table"]["commitLogMaxOffset"])
    master = group.get(0)
    mx = max_offset(master) if master else 0
    print(f"\n#MasterAddr\t{master or '-'} (no GET_BROKER_HA_STATUS: lag from CommitLog max offsets)\n"
          f"#MasterCommitLogMaxOffset\t{mx}")
    print("%-32s  %-16s %16s" % ("#SlaveAddr", "#CommitLogMaxOffset", "#Diff"))
    for bid, addr in sorted(group.items()):
        if bid:
            off = max_offset(addr)
            print("%-32s  %-16d %16d" % (addr, off, max(0, mx - off) if master else 0))


def ha_status(c: AdminClient, a: argparse.Namespace) -> None:
    """``-b`` one broker (master or slave), else every group of ``-c`` (or of every cluster)."""
    targets = [{0: a.brokerAddr}] if a.brokerAddr else _groups(c, a.clusterName)
    for group in targets:
        addr = group.get(0) or next(iter(group.values()), None)
        if addr is None:
            continue
        try:
            info = c.answer(HaStatus, addr, GET_BROKER_HA_STATUS)
        except AdminError as exc:
            if exc.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise
            _print_offsets(c, group)
            continue
        if info.get("master"):
            _print_master(addr, info)
        else:
            _print_slave(info)
