"""Master/slave HA with the Java 4.9.8 broker on the other side, both ways, driven by the kit's Java client.

- an rmqd SYNC_MASTER with a Java slave: send under load, byte-identical CommitLog files, everything read back
  from the Java slave, both brokers in mqadmin clusterList; then kill -9 of the rmqd master during a send loop
  (every SEND_OK is on the slave), a Java push consumer reading from the slave while the master is down, and
  resuming on the master when it is back;
- a Java SYNC_MASTER with an rmqd slave: a topic made with mqadmin updateTopic on the master reaches the rmqd
  slave, send under load, byte-identical files, everything read back from the rmqd slave; then the Java master
  killed and a Java push consumer reading everything from the rmqd slave.

Each mix starts one Java broker (about 1 GB, seconds to start) for its whole module scope.
"""
from __future__ import annotations

import pytest

from javakit import SETUP_BUDGET, free_port_block, require_kit
from replication_kit import (FILE_SIZE, Clients, ReferenceBroker, RmqdProcess, create_topic, max_offset,
                             read_all_keys, runtime_info, same_commitlog, topic_names, wait_until)

pytestmark = pytest.mark.timeout(SETUP_BUDGET + 600)

COUNT = 2000            # 1 KB messages per send-under-load round (4 threads)


def _conf(path, **props) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def stop_part(part) -> None:
    """A throwaway Java broker is crashed (its graceful shutdown costs ~8 s); the rest stop."""
    if isinstance(part, ReferenceBroker):
        part.kill()
    else:
        part.stop()


@pytest.fixture(scope="module")
def rmqd_master_java_slave(tmp_path_factory):
    """rmqd name server + rmqd SYNC_MASTER + Java slave, and the Java clients."""
    require_kit()
    root = tmp_path_factory.mktemp("ha-rmqd-master")
    base = free_port_block(12)
    ns = RmqdProcess("namesrv", "--port", str(base), log_path=root / "namesrv.log").start()
    mconf = _conf(root / "m.conf", brokerRole="SYNC_MASTER", mappedFileSizeCommitLog=FILE_SIZE)
    margs = ("broker", "-n", ns.addr, "--broker-port", str(base + 3), "--store-dir", str(root / "master"), "-c", mconf,
             "--grpc-port", "0")
    parts = {"root": root, "ns": ns, "margs": margs}
    try:
        parts["master"] = RmqdProcess(*margs, log_path=root / "master.log").start()
        create_topic(parts["master"].addr, "HaMixA")            # before the slave: its first sync copies it
        parts["slave"] = ReferenceBroker(root / "jslave", ns.addr, base + 8, 1, "SLAVE").start()
        parts["clients"] = Clients(ns.addr)
        yield parts
    finally:
        for name in ("clients", "slave", "master", "ns"):
            if name in parts:
                stop_part(parts[name])


def test_rmqd_master_java_slave_replicates_byte_for_byte(rmqd_master_java_slave, mqadmin_shell):
    p = rmqd_master_java_slave
    master, slave, clients = p["master"], p["slave"], p["clients"]
    wait_until(lambda: "HAClient" in slave.store_log() and "update master address" in slave.store_log(), 60,
               what="Java slave found its master")
    wait_until(lambda: "HaMixA" in topic_names(slave.addr), 30, what="topic copied to the Java slave")
    # the Java slave reports its offset 5 s after connecting; SYNC_MASTER sends answer 11 until then
    wait_until(lambda: clients.call(cmd="produce", topic="HaMixA", count=1, threads=1, prefix="probe",
                                    size=10)["ok"], 60, what="a SEND_OK through the Java slave")
    res = clients.call(cmd="produce", topic="HaMixA", count=COUNT, threads=4, prefix="a", size=1000)
    assert len(res["ok"]) == COUNT and res["failed"] == 0, {k: v for k, v in res.items() if k != "ok"}
    wait_until(lambda: max_offset(slave.addr) == max_offset(master.addr), 30, what="Java slave caught up")
    names = same_commitlog(p["root"] / "master" / "commitlog", slave.store_dir / "commitlog")
    assert len(names) >= 2                                   # across a file end: the BLANK record too
    assert set(res["ok"]) <= read_all_keys(slave.addr, "HaMixA")
    # brokerStatus: a slave counts what it receives as puts (Java's reput on a slave), both sides the same keys
    java_slave, rmqd_master = runtime_info(slave.addr), runtime_info(master.addr)
    assert int(java_slave["putMessageTimesTotal"]) >= COUNT
    assert java_slave["commitLogMaxOffset"] == rmqd_master["commitLogMaxOffset"]
    path_keys = {k for k in set(java_slave) | set(rmqd_master) if k.startswith("commitLogDiskRatio_")}
    assert set(java_slave) - path_keys <= set(rmqd_master) - path_keys
    out = mqadmin_shell.run("clusterList", "-n", p["ns"].addr).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("DefaultCluster")]
    assert {(r[1], r[2], r[3]) for r in rows} == {("broker-a", "0", master.addr), ("broker-a", "1", slave.addr)}, out


def test_kill9_rmqd_master_then_consume_from_java_slave_and_resume(rmqd_master_java_slave):
    p = rmqd_master_java_slave
    master, slave, clients = p["master"], p["slave"], p["clients"]
    wait_until(lambda: max_offset(slave.addr) == max_offset(master.addr), 30, what="Java slave in sync")
    start = max_offset(master.addr)
    clients.call(cmd="loop", topic="HaMixA", threads=4, prefix="k", size=1000)
    wait_until(lambda: max_offset(master.addr) > start + 300_000, 60, what="the loop is sending")
    master.kill9()                                           # during the send loop
    res = clients.call(cmd="stopLoop")
    acked = set(res["ok"])
    assert len(acked) >= 100
    on_slave = read_all_keys(slave.addr, "HaMixA")
    assert acked <= on_slave, f"{len(acked - on_slave)} SEND_OK messages missing on the Java slave"
    clients.call(cmd="consume", group="HaMixAReaders", topic="HaMixA")
    wait_until(lambda: set(clients.call(cmd="report", group="HaMixAReaders")["keys"]) >= acked, 90,
               what="a push consumer reads every acknowledged message from the slave while the master is down")
    # back on the same store and ports
    p["master"] = master = RmqdProcess(*p["margs"], log_path=p["root"] / "master.log").start()
    res = clients.call(cmd="produce", topic="HaMixA", count=50, threads=2, prefix="after", size=100, timeout=180)
    assert res["failed"] == 0, res                       # SEND_OK, or 11 until the Java slave reports again
    after = {f"after{i}" for i in range(50)}
    wait_until(lambda: after <= set(clients.call(cmd="report", group="HaMixAReaders")["keys"]), 90,
               what="the consumer resumes on the master")
    clients.call(cmd="stopConsumer", group="HaMixAReaders")


@pytest.fixture(scope="module")
def java_master_rmqd_slave(tmp_path_factory):
    """rmqd name server + Java SYNC_MASTER + rmqd slave, and the Java clients."""
    require_kit()
    root = tmp_path_factory.mktemp("ha-java-master")
    base = free_port_block(12)
    ns = RmqdProcess("namesrv", "--port", str(base), log_path=root / "namesrv.log").start()
    parts = {"root": root, "ns": ns}
    try:
        parts["master"] = ReferenceBroker(root / "jmaster", ns.addr, base + 3, 0, "SYNC_MASTER").start()
        sconf = _conf(root / "s.conf", brokerRole="SLAVE", brokerId=1, mappedFileSizeCommitLog=FILE_SIZE)
        parts["slave"] = RmqdProcess("broker", "-n", ns.addr, "--broker-port", str(base + 8), "--store-dir",
                                     str(root / "slave"), "-c", sconf, "--grpc-port", "0",
                                     log_path=root / "slave.log").start()
        parts["clients"] = Clients(ns.addr)
        yield parts
    finally:
        for name in ("clients", "slave", "master", "ns"):
            if name in parts:
                stop_part(parts[name])


def test_java_master_rmqd_slave(java_master_rmqd_slave, mqadmin_shell):
    p = java_master_rmqd_slave
    master, slave, clients = p["master"], p["slave"], p["clients"]
    out = mqadmin_shell.run("updateTopic", "-b", master.addr, "-t", "HaMixB", "-r", "4", "-w", "4").stdout
    assert "success" in out, out
    wait_until(lambda: "HaMixB" in topic_names(slave.addr), 30, what="mqadmin updateTopic on the Java master reaches "
                                                                "the rmqd slave (SlaveSynchronize)")
    wait_until(lambda: "connected to master" in slave.log_text(), 30, what="rmqd slave connected to the Java master")
    res = clients.call(cmd="produce", topic="HaMixB", count=COUNT, threads=4, prefix="b", size=1000)
    assert len(res["ok"]) == COUNT and res["failed"] == 0, {k: v for k, v in res.items() if k != "ok"}
    wait_until(lambda: max_offset(slave.addr) == max_offset(master.addr), 30, what="rmqd slave caught up")
    assert len(same_commitlog(master.store_dir / "commitlog", p["root"] / "slave" / "commitlog")) >= 2
    assert set(res["ok"]) <= read_all_keys(slave.addr, "HaMixB")
    rmqd_slave, java_master = runtime_info(slave.addr), runtime_info(master.addr)
    assert int(rmqd_slave["putMessageTimesTotal"]) >= COUNT          # counted as the Java slave counts them
    assert rmqd_slave["commitLogMaxOffset"] == java_master["commitLogMaxOffset"]
    out = mqadmin_shell.run("brokerStatus", "-b", slave.addr, "-n", p["ns"].addr).stdout
    assert "%-32s: %s" % ("commitLogMaxOffset", java_master["commitLogMaxOffset"]) in out, out
    master.kill()
    clients.call(cmd="consume", group="HaMixBReaders", topic="HaMixB")
    wait_until(lambda: set(clients.call(cmd="report", group="HaMixBReaders")["keys"]) >= set(res["ok"]), 90,
               what="a Java push consumer reads everything from the rmqd slave while the Java master is down")
    clients.call(cmd="stopConsumer", group="HaMixBReaders")
    lite = clients.call(cmd="litePull", group="HaMixBLite", topic="HaMixB", expect=COUNT, timeoutMs=90_000,
                        timeout=150)
    assert set(lite["keys"]) >= set(res["ok"]), "a lite-pull consumer reads everything from the rmqd slave"
