"""`rmqd console -n` against the real Java 4.9.8 name server and broker (the reference cluster)."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
import time

import pytest

from rmqd.common.localports import free_port
from tests.console.kit import Http
from tests.kit.waits import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def java_console(reference_cluster, tmp_path_factory):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", "console", "-n", reference_cluster.namesrv_addr,
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp_path_factory.mktemp("java-console")))
    try:
        for line in proc.stdout:
            if line.startswith("rmqd ready:"):
                break
        yield Http(f"http://127.0.0.1:{port}"), reference_cluster
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_pages_read_the_java_cluster(java_console):
    web, ref = java_console
    # right after start the Java broker answers GET_BROKER_RUNTIME_INFO with NoSuchElementException
    # (its stats have no sample yet); the console shows that per broker, so wait for a clean answer
    ov = wait_until(lambda: (lambda o: o if "error" not in o["brokers"][0] else None)(web.get_json("/api/overview")),
                    15, interval=0.5, what="the Java broker's runtime info")
    (b,) = ov["brokers"]
    assert b["addr"] == ref.broker_addr and b["version"] == "V4_9_8" and ov["mode"] == "remote"
    assert web.get_json(f"/api/brokers/{ref.broker_addr}")["config"]["brokerClusterName"]
    assert "TBW102" in {t["topic"] for t in web.get_json("/api/topics?kind=system&size=200")["items"]}
    assert web.get_json("/api/groups?system=true")["total"] >= 1
    # the Java broker does not know rmqd's admin code 9003: no tier page, the features page still answers
    assert web.get_json("/api/features") == {"features": {}, "builtin": ["compaction", "tier", "acl"]}


def test_create_send_read_and_delete_on_the_java_broker(java_console):
    web, ref = java_console
    web.post_json("/api/topics", {"topic": "RmqdConsoleOnJava", "readQueueNums": 2, "writeQueueNums": 2})
    t = wait_until(lambda: (lambda r: json.loads(r[2]) if r[0] == 200 else None)(web.get("/api/topics/RmqdConsoleOnJava")),
                   10, interval=0.2, what="the topic route")
    assert [q["queueId"] for q in t["queues"]] == [0, 1]
    sent = web.post_json("/api/topics/RmqdConsoleOnJava/send", {"body": '{"on": "java"}', "keys": "jk"})
    m = web.get_json(f"/api/messages/{sent['msgId']}?topic=RmqdConsoleOnJava")
    assert json.loads(base64.b64decode(m["body"])) == {"on": "java"} and m["keys"] == "jk"
    now = int(time.time() * 1000)
    listed = web.get_json(f"/api/messages?topic=RmqdConsoleOnJava&begin={now - 600_000}&end={now + 1000}")
    assert [x["msgId"] for x in listed["messages"]] == [sent["msgId"]]
    by_key = wait_until(lambda: web.get_json("/api/messages?topic=RmqdConsoleOnJava&key=jk")["messages"], 10, interval=0.3,
                        what="the Java broker's index")
    assert by_key[0]["msgId"] == sent["msgId"]
    web.post_json("/api/topics/RmqdConsoleOnJava/delete", {})
    web.get_json("/api/topics/RmqdConsoleOnJava", status=404)
