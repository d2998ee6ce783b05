"""Issue 21: mqadmin sub-commands where rmqd answered differently from the Java 4.9.8 broker.

Each test drives the real mqadmin (compat_tests/javakit.py) against rmqd and, with the same data,
against the reference Java broker (the session `reference_cluster`), and compares the answers.
"""
from __future__ import annotations

import json
import os
import re

import pytest
from javakit import REFERENCE_BROKER_PROPERTIES, SETUP_BUDGET, mqadmin
from scenarios import consume_until_committed, create_topic, produce, wait_for

from rmqd.common.fileutil import disk_capacity, disk_partition_space_used_percent

# bin/mqadmin starts a JVM per call (seconds each), so most calls go to the session's mqadmin JVM (mqadmin_shell);
# a few stay on bin/mqadmin (compared with the shell's or rmqd admin's output). The longest test runs a push
# consumer (90 s) and waits for its offsets (30 s) on each broker
pytestmark = pytest.mark.timeout(SETUP_BUDGET + 2 * (90 + 30 + 60) + 60)


def _ok(res) -> str:
    assert res.returncode == 0 and not res.timed_out, (res.stdout[-2000:], res.stderr[-2000:])
    return res.stdout


def _space_column(cluster_list: str) -> float:
    row = next(line for line in cluster_list.splitlines() if line.startswith("DefaultCluster"))
    return float(row.split()[-1])


def _exported_disk_ratio(shell, cluster, out_dir) -> float:
    """exportMetrics' evaluateReport.<broker>.runtimeQuota.diskRatio.commitLogDiskRatio."""
    out_dir.mkdir()
    _ok(shell.run("exportMetrics", "-n", cluster.namesrv_addr, "-c", "DefaultCluster", "-f", str(out_dir)))
    report = json.loads((out_dir / "metrics.json").read_text())["evaluateReport"]["broker-a"]
    return float(report["runtimeQuota"]["diskRatio"]["commitLogDiskRatio"])


def _gib(capacity: str) -> tuple[float, float]:
    """commitLogDirCapacity "Total : 252.0 GiB, Free : 73.1 GiB." as (total, free) in GiB."""
    total, free = re.fullmatch(r"Total : ([\d.]+) GiB, Free : ([\d.]+) GiB\.", capacity.strip()).groups()
    return float(total), float(free)


def _broker_status(shell, cluster) -> dict[str, str]:
    out = _ok(shell.run("brokerStatus", "-n", cluster.namesrv_addr, "-b", cluster.broker_addr))
    return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)}


def test_disk_ratio_is_javas_used_over_used_plus_usable(rmqd_server, reference_cluster, mqadmin_shell,
                                                        tmp_path) -> None:
    """clusterList #SPACE and exportMetrics' commitLogDiskRatio: Java's UtilAll formula on the store's disk,
    the figure the Java broker reports for its own disk (the same disk here, or computed for the reference's
    when they differ); commitLogDirCapacity is the total and the usable space, as Java prints it. (The
    session's mqadmin JVM: bin/mqadmin costs seconds per call.)"""
    ours = _space_column(_ok(mqadmin("clusterList", "-n", rmqd_server.namesrv_addr)))
    theirs = _space_column(_ok(mqadmin_shell.run("clusterList", "-n", reference_cluster.namesrv_addr)))
    expected = disk_partition_space_used_percent(rmqd_server.store_dir)
    assert abs(ours - expected) <= 0.011, (ours, expected)
    same_disk = os.stat(rmqd_server.store_dir).st_dev == os.stat(reference_cluster.workdir).st_dev
    java_expected = ours if same_disk else disk_partition_space_used_percent(str(reference_cluster.workdir))
    assert abs(theirs - java_expected) <= 0.011, (theirs, java_expected, same_disk)
    assert abs(_exported_disk_ratio(mqadmin_shell, rmqd_server, tmp_path / "rmqd") - expected) <= 0.011
    assert abs(_exported_disk_ratio(mqadmin_shell, reference_cluster, tmp_path / "java") - java_expected) <= 0.011
    ours_cap = _gib(_broker_status(mqadmin_shell, rmqd_server)["commitLogDirCapacity"])
    total, usable = disk_capacity(rmqd_server.store_dir)
    assert abs(ours_cap[0] - total / 2**30) <= 0.1 and abs(ours_cap[1] - usable / 2**30) <= 0.2, ours_cap
    if same_disk:                              # other writers move the free space a little between the two reads
        theirs_cap = _gib(_broker_status(mqadmin_shell, reference_cluster)["commitLogDirCapacity"])
        assert ours_cap[0] == theirs_cap[0] and abs(ours_cap[1] - theirs_cap[1]) <= 0.2, (ours_cap, theirs_cap)


def _config_keys(text: str) -> set[str]:
    return {line.split("=", 1)[0].strip() for line in text.splitlines()
            if "=" in line and not line.startswith("=")}


@pytest.mark.rmqd_broker(**REFERENCE_BROKER_PROPERTIES)
def test_get_broker_config_has_every_java_property_and_export_configs_works(rmqd_server, reference_cluster,
                                                                            mqadmin_shell, tmp_path) -> None:
    """Every property of Java's GET_BROKER_CONFIG, and exportConfigs writes what it writes for the Java broker
    (the same configuration: the reference's extra settings on both)."""
    ours = _config_keys(_ok(mqadmin_shell.run("getBrokerConfig", "-n", rmqd_server.namesrv_addr,
                                              "-b", rmqd_server.broker_addr)))
    theirs = _config_keys(_ok(mqadmin_shell.run("getBrokerConfig", "-n", reference_cluster.namesrv_addr,
                                                "-b", reference_cluster.broker_addr)))
    assert len(theirs) > 170
    assert theirs - ours == set(), f"missing Java properties: {sorted(theirs - ours)}"
    exported = {}
    for name, cluster in (("rmqd", rmqd_server), ("java", reference_cluster)):
        out = _ok(mqadmin_shell.run("exportConfigs", "-n", cluster.namesrv_addr, "-c", "DefaultCluster",
                          "-f", str(tmp_path / name)))
        assert out.strip() == f"export {tmp_path / name / 'configs.json'} success", (name, out)
        exported[name] = json.loads((tmp_path / name / "configs.json").read_text())
    broker_cfg = exported["rmqd"]["brokerConfigs"]["broker-a"]
    for key in ("filterServerNums", "msgTraceTopicName", "slaveReadEnable", "useTLS"):
        assert key in broker_cfg, key
    assert exported["rmqd"] == exported["java"]


def _broker_consume_rows(output: str, topic: str, group: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.startswith(topic) and group in line]


def test_broker_consume_stats_lists_an_offline_groups_offsets(rmqd_server, reference_cluster, mqadmin_shell,
                                                               client_pythons, tmp_path) -> None:
    """A push group consumed a 4-queue topic (40 messages) and went offline: like the Java broker,
    brokerConsumeStats still lists its 4 queues from the offset table."""
    python = client_pythons["cpp1"]
    rows = {}
    for name, cluster in (("rmqd", rmqd_server), ("java", reference_cluster)):
        topic, group = f"OfflineStats_{name}", f"CG_offline_{name}"
        create_topic(cluster.broker_addr, topic, queues=4)
        produce(python, cluster.namesrv_addr, topic, 40, "sync", prefix="os")
        # the consumer stops once the broker holds its offsets (the client commits every 5 s)
        res = consume_until_committed(python, cluster.namesrv_addr, cluster.broker_addr, tmp_path,
                                      dict(topic=topic, group=group, expect=40, timeout=40, props=[]))
        assert len({e["body"] for e in res.events_of("recv")}) == 40
        out = wait_for(lambda: (o if len(_broker_consume_rows(
            o := _ok(mqadmin_shell.run("brokerConsumeStats", "-n", cluster.namesrv_addr, "-b", cluster.broker_addr)),
            topic, group)) == 4 else None), 30, interval=1.0, what=f"{name}: 4 rows of the offline group")
        rows[name] = _broker_consume_rows(out, topic, group)
    for name, got in rows.items():
        assert sorted(int(r[3]) for r in got) == [0, 1, 2, 3], (name, got)     # #QID
        assert sum(int(r[4]) for r in got) == 40 and sum(int(r[5]) for r in got) == 40, (name, got)
        assert all(r[6] == "0" for r in got), (name, got)                       # #Diff


def _cq_units(output: str) -> list[str]:
    """The ConsumeQueueData lines of queryCq with the physical offset masked."""
    return [re.sub(r"physicOffset=\d+", "physicOffset=*", line) for line in output.splitlines()
            if line.startswith("ConsumeQueueData")]


def test_query_cq_prints_the_units_like_java(rmqd_server, reference_cluster, mqadmin_shell, client_pythons) -> None:
    python = client_pythons["cpp1"]
    outputs = {}
    for name, cluster in (("rmqd", rmqd_server), ("java", reference_cluster)):
        topic = f"QueryCq_{name}"
        create_topic(cluster.broker_addr, topic, queues=1)
        produce(python, cluster.namesrv_addr, topic, 6, "sync", prefix="cq", tag="TagQ")
        out = _ok(mqadmin_shell.run("queryCq", "-n", cluster.namesrv_addr, "-t", topic, "-q", "0", "-i", "1",
                                    "-c", "3"))
        assert "max: 6, min: 0" in out, (name, out)
        outputs[name] = _cq_units(out)
    assert len(outputs["rmqd"]) == 3
    assert outputs["rmqd"] == outputs["java"]


def test_query_cq_of_a_queue_without_messages_is_javas_error(rmqd_server, reference_cluster, mqadmin_shell) -> None:
    for name, cluster in (("rmqd", rmqd_server), ("java", reference_cluster)):
        topic = f"EmptyCq_{name}"
        create_topic(cluster.broker_addr, topic, queues=2)       # routable, but no queue ever written
        res = mqadmin_shell.run("queryCq", "-n", cluster.namesrv_addr, "-t", topic, "-q", "1", "-i", "0")
        assert f"CODE: 1  DESC: 1@{topic} is not exist!" in res.stdout + res.stderr, (name, res.stdout[-800:])


@pytest.mark.rmqd_broker(mapedFileSizeCommitLog=64 * 1024, fileReservedTime=0, deleteWhen="99")
def test_delete_expired_commitlog_deletes_now(rmqd_server, reference_cluster, mqadmin_shell, client_pythons) -> None:
    """deleteExpiredCommitLog: Java answers success and runs the expired-file deletion at once,
    whatever deleteWhen says (fileReservedTime 0: every sealed file is expired). mqadmin prints the same
    for both brokers (the reference keeps its 72 h: nothing of it goes)."""
    produce(client_pythons["cpp1"], rmqd_server.namesrv_addr, "ExpireMe", 300, "sync", prefix="x" * 600)
    cl_dir = os.path.join(rmqd_server.store_dir, "commitlog")
    head = rmqd_server.broker.store.commitlog_max_offset()
    sealed = [f for f in os.listdir(cl_dir) if int(f) + 64 * 1024 <= head]
    assert len(sealed) >= 2
    ours = _ok(mqadmin("deleteExpiredCommitLog", "-n", rmqd_server.namesrv_addr, "-c", "DefaultCluster"))
    theirs = _ok(mqadmin_shell.run("deleteExpiredCommitLog", "-n", reference_cluster.namesrv_addr,
                                   "-c", "DefaultCluster"))
    assert ours == theirs and ours.strip() == "success", (ours, theirs)
    assert set(sealed) & set(os.listdir(cl_dir)) == set()          # every sealed (expired) file went
    assert rmqd_server.broker.store.commitlog_min_offset() > 0


def test_export_metrics_reports_cpu_num(rmqd_server, reference_cluster, mqadmin_shell, tmp_path) -> None:
    envs = {}
    for name, cluster in (("rmqd", rmqd_server), ("java", reference_cluster)):
        d = tmp_path / name
        d.mkdir()
        _ok(mqadmin_shell.run("exportMetrics", "-n", cluster.namesrv_addr, "-c", "DefaultCluster", "-f", str(d)))
        report = json.loads((d / "metrics.json").read_text())["evaluateReport"]["broker-a"]
        envs[name] = report["runtimeEnv"]
    assert envs["rmqd"]["cpuNum"] == str(os.cpu_count())
    assert envs["rmqd"] == envs["java"]


def _rmqd_admin(*argv: str) -> str:
    import contextlib
    import io

    from rmqd.admin.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_rmqd_admin_query_cq_and_delete_expired_commitlog_print_what_mqadmin_prints(rmqd_server,
                                                                                    client_pythons) -> None:
    topic = "AdminCq"
    create_topic(rmqd_server.broker_addr, topic, queues=1)
    produce(client_pythons["cpp1"], rmqd_server.namesrv_addr, topic, 4, "sync", prefix="ac", tag="T1")
    args = ["queryCq", "-n", rmqd_server.namesrv_addr, "-t", topic, "-q", "0", "-i", "1", "-c", "2"]
    java = _ok(mqadmin(*args))
    ours = _rmqd_admin(*args)
    assert [ln for ln in ours.splitlines() if ln.strip()] == [ln for ln in java.splitlines() if ln.strip()]
    assert _rmqd_admin("deleteExpiredCommitLog", "-n", rmqd_server.namesrv_addr, "-c", "DefaultCluster").strip() \
        == _ok(mqadmin("deleteExpiredCommitLog", "-n", rmqd_server.namesrv_addr, "-c", "DefaultCluster")).strip() \
        == "success"
