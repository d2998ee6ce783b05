"""The 5.x differential: every request code RocketMQ added after 4.9.8, sent raw to rmqd and to the real Java 5.x
broker (the session's ``reference5``) with valid and bad input (diff_probes5.py), answers compared as the 4.9.8
differential compares them (differential.py) but with remark *classes* (differential.classified): same code, same
class of remark, same header fields and body shape.

Every difference is fixed in rmqd or listed in KNOWN5 with its reason, and docs/compatibility.md carries the same
rows; a listed difference that went away fails too. Afterwards the state both brokers were prepared with is read
back: bad input damaged nothing, and rmqd still serves.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import diff_probes5
from differential import (GROUP, TOPIC, addr_of, ask, classified, diff_dicts, prepare, wait_delay_delivered)
from java5kit import FETCH_TIMEOUT, REFERENCE5_BROKER_PROPERTIES, START_TIMEOUT, require_kit5
from javakit import require_kit

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.remoting.fastjson import loads_lenient
from rmqd.testing import EmbeddedServer

# ~180 probes of at most 5 s each to both, a kit fetch and a cluster start when this module opens the session
pytestmark = pytest.mark.timeout(FETCH_TIMEOUT + START_TIMEOUT + 240)

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"

NO_TIMER_FILES = ("rmqd's timer keeps no timer wheel or timer log files (rmqd.broker.timer parks messages in "
                  "rmq_sys_wheel_timer and schedules them from memory): no checkpoint file, no per-topic timing counts")
NO_COLD_READ = "rmqd has no cold-data read flow control (RIP-62): REQUEST_CODE_NOT_SUPPORTED"
HA_5X = ("not yet: issue 38 (the 5.x HA handshakes of slave-acting-master and AutoSwitch groups with Java members); "
         "REQUEST_CODE_NOT_SUPPORTED")
CONTROLLER_BROKER = ("not yet: issue 38 (the broker side of controller mode with Java controllers); "
                     "REQUEST_CODE_NOT_SUPPORTED")
ACL2 = ("rmqd keeps users and ACLs whether or not a metadata provider is named; the 5.5 broker, which names none "
        "by default, refuses them with SYSTEM_ERROR ('The authenticationMetadataProvider is not configured')")
# the ACL 2.0 probes answered differently (the others, bad input checked before the provider, are answered alike)
ACL2_DIFFERING = {"acl2: create a user": {"code", "remark"}, "acl2: update a user": {"code", "remark"},
                  "acl2: get a user": {"code", "remark", "body"}, "acl2: list users": {"code", "remark", "body"},
                  "acl2: delete a user": {"code", "remark"}, "acl2: delete an acl": {"code", "remark"},
                  "acl2: get an acl": {"code", "remark"}, "acl2: list acls": {"code", "remark"}}

# probe name -> (the outcome fields that differ, the reason). Kept in step with docs/compatibility.md.
KNOWN5: dict[str, tuple[set[str], str]] = {
    "timer check point": ({"code", "remark", "body"}, NO_TIMER_FILES),
    "timer metrics": ({"code", "remark", "body"}, NO_TIMER_FILES),
    "cold data flow control: update": ({"code", "remark"}, NO_COLD_READ),
    "cold data flow control: remove": ({"code", "remark"}, NO_COLD_READ),
    "cold data flow control: info": ({"code", "remark", "body"}, NO_COLD_READ),
    "static topic": ({"code", "remark"}, "static topics (RIP-21 logic queues) are not implemented: "
                     "REQUEST_CODE_NOT_SUPPORTED"),
    "static topic without a header": ({"code", "remark"}, "as above"),
    "notify min broker id change without a header": ({"code", "remark"}, HA_5X),
    "exchange broker HA info": ({"code", "remark", "ext"}, HA_5X),
    "reset master flush offset": ({"code", "remark"}, HA_5X),
    "broker HA status": ({"body"}, "rmqd's answer carries fields of its own (haClientRuntimeInfo.isActivated and "
                         "masterAddr, rmqdReplicaStatus) beside Java's"),
    "controller code 1007 to the broker": ({"code", "remark"}, CONTROLLER_BROKER),
    "controller code 1008 to the broker": ({"code", "remark"}, CONTROLLER_BROKER),
    **{name: (fields, ACL2) for name, fields in ACL2_DIFFERING.items()},
}


def _javap_codes(jar: Path, cls: str) -> dict[str, int]:
    out = subprocess.run(["javap", "-constants", "-cp", str(jar), cls], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"int (\w+) = (-?\d+);", out.stdout)}


def test_every_code_added_after_498_is_probed() -> None:
    """CODES_AFTER_498 is RequestCode of the 5.x jars less 4.9.8's, and every one of them is probed."""
    new = _javap_codes(next((require_kit5() / "lib").glob("rocketmq-remoting-*.jar")),
                       "org.apache.rocketmq.remoting.protocol.RequestCode")
    old = _javap_codes(require_kit() / "lib" / "rocketmq-common-4.9.8.jar",
                       "org.apache.rocketmq.common.protocol.RequestCode")
    added = set(new.values()) - set(old.values())
    assert added == diff_probes5.CODES_AFTER_498, sorted(added ^ diff_probes5.CODES_AFTER_498)
    assert diff_probes5.probed_codes() == added, sorted(added - diff_probes5.probed_codes())


@pytest.fixture(scope="module")
def pair5(reference5, tmp_path_factory):
    """(rmqd, reference5) in the same state: differential.prepare (the online consumer connections kept open) and
    diff_probes5.prepare5; rmqd with the reference's settings."""
    ours = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("differential5")),
                          broker_properties=REFERENCE5_BROKER_PROPERTIES).start()
    online = []
    try:
        for server in (ours, reference5):
            online.append(prepare(server.broker_addr))
            diff_probes5.prepare5(server.broker_addr)
        for server in (ours, reference5):
            wait_delay_delivered(server.broker_addr)
        yield ours, reference5
    finally:
        for c in online:
            c.close()
        ours.stop()


def _stored_state(broker_addr: str) -> dict:
    """What prepare() stored, read back: DiffTopic's queue 0 (bodies and offsets), DiffGroup's offset there."""
    with BlockingClient(broker_addr) as c:
        r = c.invoke(new_request(14, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"}))
        offset = r.ext_fields.get("offset") if r.code == 0 else r.code
        r = c.invoke(new_request(30, {"topic": TOPIC, "queueId": "0"}))
        max_offset = r.ext_fields.get("offset")
        pulled = c.invoke(new_request(11, {
            "consumerGroup": "Diff5Reader", "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "3",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
            "expressionType": "TAG"}))
        bodies = sorted(re.findall(rb"diff-\d", bytes(pulled.body or b"")))
    return {"group offset": offset, "max offset": max_offset, "pull": pulled.code, "bodies": bodies}


def test_new_request_codes_are_answered_like_java5(pair5) -> None:
    ours, theirs = pair5
    before = {name: _stored_state(s.broker_addr) for name, s in (("rmqd", ours), ("java", theirs))}
    unexplained, vanished = {}, []
    for probe in diff_probes5.ALL:
        a = classified(ask(probe, addr_of(probe.target, ours.namesrv_addr, ours.broker_addr)).as_dict())
        b = classified(ask(probe, addr_of(probe.target, theirs.namesrv_addr, theirs.broker_addr)).as_dict())
        differing = {k for k in a if a[k] != b[k]}
        expected = KNOWN5.get(probe.name, (set(), ""))[0]
        if differing != expected:
            if differing:
                unexplained[probe.name] = diff_dicts(a, b)
            else:
                vanished.append(probe.name)
    assert not unexplained, "differences not in KNOWN5:\n" + "\n".join(
        f"{name}:\n    " + "\n    ".join(lines) for name, lines in unexplained.items())
    assert not vanished, f"listed differences that are gone (update KNOWN5 and docs/compatibility.md): {vanished}"
    after = {name: _stored_state(s.broker_addr) for name, s in (("rmqd", ours), ("java", theirs))}
    assert after == before, "the probes changed what prepare() stored"
    assert after["rmqd"]["bodies"] == [b"diff-0", b"diff-1", b"diff-2"], after


def test_broker_lite_info_names_this_modules_lite_topic_and_group_like_java5(pair5) -> None:
    """GET_BROKER_LITE_INFO's topicMeta (LITE topic -> lite.topic.expiration) and groupMeta (bind topic -> lite
    groups), compared entry by entry for prepare5's lite topic (the probe above folds the maps: the session's
    Java reference lists the lite topics and groups of other tests too)."""
    def lite_meta(addr: str) -> tuple:
        with BlockingClient(addr) as c:
            r = c.invoke(new_request(200074))
        assert r.code == 0, r.remark
        body = loads_lenient(bytes(r.body))
        topic = diff_probes5.LITE_TOPIC
        return body["topicMeta"].get(topic), sorted(body["groupMeta"].get(topic, []))

    ours, theirs = pair5
    assert lite_meta(ours.broker_addr) == lite_meta(theirs.broker_addr) == (-1, [diff_probes5.LITE_GROUP])


def test_every_known5_difference_is_in_the_doc() -> None:
    text = DOC.read_text()
    missing = [name for name in KNOWN5 if f"| {name} |" not in text]
    assert not missing, f"docs/compatibility.md's 5.x table lacks: {missing}"
