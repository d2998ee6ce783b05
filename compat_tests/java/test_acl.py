"""ACL (issue 18): signed real clients against rmqd with aclEnable=true, and the same matrix against the
Java 4.9.8 broker started from the kit with the same plain_acl.yml (differential).

Clients: the Java client with AclClientRPCHook (compat_tests/java/src/AclProbe.java), the C++ wheel with
set_session_credentials, and mqadmin signing with its conf/tools.yml.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest
from clientrunner import run_client_script
from javakit import SETUP_BUDGET, ReferenceCluster, mqadmin, run_java, shadow_home
from scenarios import wait_for

# its own ACL reference cluster (a second start) and Java programs of at most 90 s each
pytestmark = pytest.mark.timeout(SETUP_BUDGET + 300)

from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.testing import EmbeddedServer

ACL_YAML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: appUser01
    secretKey: appSecret01
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - aclPub=PUB
      - aclSub=SUB
      - aclBoth=PUB|SUB
      - aclDeny=DENY
    groupPerms:
      - groupDeny=DENY
      - groupOk=SUB
  - accessKey: adminUser01
    secretKey: adminSecret01
    admin: true
  - accessKey: whiteUser01
    secretKey: whiteSecret01
    whiteRemoteAddress: 127.0.0.1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""
TOPICS = ("aclPub", "aclSub", "aclBoth", "aclDeny", "aclOther")
ADMIN = ("adminUser01", "adminSecret01")

# (account, secret, ops): every op is run with AclClientRPCHook against both brokers
MATRIX = [
    ("appUser01", "appSecret01", ["send:aclPub", "send:aclBoth", "send:aclSub", "send:aclDeny", "send:aclOther",
                                  "pull:aclSub:groupOk", "pull:aclBoth:groupOther", "pull:aclPub:groupOk",
                                  "pull:aclSub:groupDeny", "pull:aclDeny:groupOk"]),
    ("adminUser01", "adminSecret01", ["send:aclOther", "pull:aclOther:groupAny"]),
    ("appUser01", "wrongSecret01", ["send:aclPub"]),
    ("nobodyUser01", "nobodySecret01", ["send:aclPub"]),
    ("whiteUser01", "notTheSecret", ["send:aclDeny", "pull:aclDeny:groupDeny"]),   # white address: no checks
    ("-", "-", ["send:aclPub"]),
]


def _create_topics(addr: str) -> None:
    with BlockingClient(addr) as c:
        for topic in TOPICS:
            ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                   "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
            r = c.invoke(new_request(17, sign_request(ext, None, *ADMIN)))
            assert r.code == 0, r.remark


@pytest.fixture(scope="module")
def acl_rmqd(tmp_path_factory) -> Iterator[tuple[EmbeddedServer, Path]]:
    home = tmp_path_factory.mktemp("rmqd-acl-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(ACL_YAML)
    with EmbeddedServer(broker_properties={"aclEnable": "true",
                                           "aclFile": str(home / "conf" / "plain_acl.yml")}) as server:
        _create_topics(server.broker_addr)
        yield server, home


@pytest.fixture(scope="module")
def acl_reference(tmp_path_factory) -> Iterator[tuple[ReferenceCluster, Path]]:
    home = shadow_home(tmp_path_factory.mktemp("java-acl-home"), {"plain_acl.yml": ACL_YAML})
    cluster = ReferenceCluster(tmp_path_factory.mktemp("java-acl"), extra_conf=["aclEnable=true"], home=home)
    cluster.start()
    try:
        _create_topics(cluster.broker_addr)
        yield cluster, home
    finally:
        cluster.stop()


def _matrix(namesrv: str) -> dict[str, dict]:
    results = {}
    for ak, sk, ops in MATRIX:
        res = run_java("AclProbe", namesrv, ak, sk, *ops, timeout=90)
        assert res.returncode == 0 and not res.timed_out, res.stderr[-3000:]
        assert len(res.events) == len(ops), (res.stdout, res.stderr[-2000:])
        for ev in res.events:
            results[f"{ak}:{sk}/{ev['op']}"] = {k: ev.get(k) for k in ("ok", "code", "error")}
    return results


def test_java_client_matrix_matches_the_java_broker(acl_rmqd, acl_reference) -> None:
    ours = _matrix(acl_rmqd[0].namesrv_addr)
    theirs = _matrix(acl_reference[0].namesrv_addr)
    app, admin, white = "appUser01:appSecret01", "adminUser01:adminSecret01", "whiteUser01:notTheSecret"
    expected_ok = {f"{app}/send:aclPub", f"{app}/send:aclBoth", f"{app}/pull:aclSub:groupOk",
                   f"{app}/pull:aclBoth:groupOther", f"{admin}/send:aclOther", f"{admin}/pull:aclOther:groupAny",
                   f"{white}/send:aclDeny", f"{white}/pull:aclDeny:groupDeny"}
    assert {k for k, v in ours.items() if v["ok"]} == expected_ok
    assert ours == theirs
    assert "No default permission for topic:aclDeny" in ours[f"{app}/send:aclDeny"]["error"]
    assert "No default permission for topic:aclOther" in ours[f"{app}/send:aclOther"]["error"]
    assert "No default permission for topic:aclPub" in ours[f"{app}/pull:aclPub:groupOk"]["error"]
    assert "No default permission for group:groupDeny" in ours[f"{app}/pull:aclSub:groupDeny"]["error"]
    assert "Check signature failed for accessKey=appUser01" in ours["appUser01:wrongSecret01/send:aclPub"]["error"]
    assert "No acl config for nobodyUser01" in ours["nobodyUser01:nobodySecret01/send:aclPub"]["error"]
    assert "No accessKey is configured" in ours["-:-/send:aclPub"]["error"]


CPP_SCRIPT = r'''
from rocketmq.client import Producer, Message, PushConsumer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
p = Producer('acl_cpp_pg')
p.set_namesrv_addr(NAMESRV)
if A['ak']:
    p.set_session_credentials(A['ak'], A['sk'], 'ALIYUN')
p.start()
for topic in A['topics']:
    m = Message(topic)
    m.set_body('cpp-acl-' + topic)
    try:
        r = p.send_sync(m)
        emit(op='send', topic=topic, ok=int(r.status) == 0)
    except Exception as e:
        emit(op='send', topic=topic, ok=False, error=str(e))
p.shutdown()
if A.get('consume'):
    got = []
    c = PushConsumer(A['group'])
    c.set_namesrv_addr(NAMESRV)
    c.set_session_credentials(A['ak'], A['sk'], 'ALIYUN')
    def on(msg):
        got.append(msg.body.decode())
        return True
    subscribe_raw(c, A['consume'], '*', on)
    c.start()
    wait_until(lambda: len(got) >= 1, 20)
    emit(op='consumed', bodies=sorted(set(got)))
    _os._exit(0)
'''


def test_cpp_client_signs_and_is_checked(acl_rmqd, client_pythons) -> None:
    server = acl_rmqd[0]
    env = {"NAMESRV": server.namesrv_addr}
    import json
    hook = server.broker.dispatcher.request_hook
    refused_before = hook.refused
    stored = {t: server.broker.store.get_max_offset(t, 0) for t in ("aclDeny", "aclPub")}
    res = run_client_script(client_pythons["cpp1"], CPP_SCRIPT, env=dict(env, SCENARIO_ARGS=json.dumps(
        {"ak": "appUser01", "sk": "appSecret01", "topics": ["aclBoth", "aclDeny"], "consume": "aclBoth",
         "group": "groupOk"})), timeout=90)
    sends = {e["topic"]: e for e in res.events_of("send")}
    assert sends["aclBoth"]["ok"] is True
    # refused by the broker (the C++ client retries and then reports its own error text); nothing stored
    assert sends["aclDeny"]["ok"] is False and hook.refused > refused_before
    assert server.broker.store.get_max_offset("aclDeny", 0) == stored["aclDeny"]
    assert res.events_of("consumed") and "cpp-acl-aclBoth" in res.events_of("consumed")[0]["bodies"]
    # without credentials the C++ client still signs, with an empty AccessKey: no such account
    res = run_client_script(client_pythons["cpp1"], CPP_SCRIPT, env=dict(env, SCENARIO_ARGS=json.dumps(
        {"ak": "", "sk": "", "topics": ["aclPub"]})), timeout=60)
    (send,) = res.events_of("send")
    assert send["ok"] is False and server.broker.store.get_max_offset("aclPub", 0) == stored["aclPub"]


def _tools_home(base: Path, ak: str, sk: str) -> Path:
    return shadow_home(base, {"tools.yml": f"accessKey: {ak}\nsecretKey: {sk}\n"})


def test_mqadmin_signs_with_tools_yml_and_admin_codes_need_admin(acl_rmqd, acl_reference, tmp_path) -> None:
    admin_home = _tools_home(tmp_path / "admin", *ADMIN)
    user_home = _tools_home(tmp_path / "user", "appUser01", "appSecret01")
    for name, namesrv in (("rmqd", acl_rmqd[0].namesrv_addr), ("java", acl_reference[0].namesrv_addr)):
        ok = mqadmin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "aclAdminMade", home=admin_home)
        assert ok.returncode == 0 and "create topic to" in ok.stdout, (name, ok.stdout, ok.stderr[-1500:])
        refused = mqadmin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "aclUserMade", home=user_home)
        assert "Need admin permission for request code=17, but accessKey=appUser01 is not" in \
            refused.stdout + refused.stderr, name


def test_acl_admin_commands_take_effect_live(acl_rmqd, tmp_path) -> None:
    """updateAclConfig / deleteAclConfig / updateGlobalWhiteAddr / clusterAclConfigVersion through mqadmin:
    the YAML is rewritten and the change holds at once, without a restart."""
    server, home = acl_rmqd
    admin_home = _tools_home(tmp_path / "admin", *ADMIN)
    ns = server.namesrv_addr
    probe = lambda ak, sk: run_java("AclProbe", ns, ak, sk, "send:aclOther", timeout=60).events[0]  # noqa: E731
    assert probe("liveUser01", "liveSecret01")["ok"] is False
    r = mqadmin("updateAclConfig", "-n", ns, "-c", "DefaultCluster", "-a", "liveUser01", "-s", "liveSecret01",
                "-t", "aclOther=PUB", home=admin_home)
    assert r.returncode == 0 and "update plain access config to" in r.stdout, (r.stdout, r.stderr[-1500:])
    assert "liveUser01" in (home / "conf" / "plain_acl.yml").read_text()
    assert probe("liveUser01", "liveSecret01")["ok"] is True
    r = mqadmin("clusterAclConfigVersion", "-n", ns, "-c", "DefaultCluster", home=admin_home)
    assert r.returncode == 0 and "broker-a" in r.stdout and "plain_acl.yml" in r.stdout, r.stdout
    r = mqadmin("deleteAclConfig", "-n", ns, "-c", "DefaultCluster", "-a", "liveUser01", home=admin_home)
    assert r.returncode == 0 and "delete plain access config account from" in r.stdout, r.stdout
    assert probe("liveUser01", "liveSecret01")["ok"] is False
    r = mqadmin("updateGlobalWhiteAddr", "-n", ns, "-c", "DefaultCluster", "-g", "127.0.0.1", home=admin_home)
    assert r.returncode == 0 and "update global white remote addresses to" in r.stdout, r.stdout
    try:
        assert probe("-", "-")["ok"] is True                      # unsigned, but from a white address
    finally:
        r = mqadmin("updateGlobalWhiteAddr", "-n", ns, "-c", "DefaultCluster", "-g", "10.10.103.*",
                    home=admin_home)
        assert r.returncode == 0
    assert probe("-", "-")["ok"] is False


def test_hand_edited_file_is_reloaded_without_restart(acl_rmqd) -> None:
    server, home = acl_rmqd
    path = home / "conf" / "plain_acl.yml"
    original = path.read_text()
    try:
        path.write_text(original.replace("  - aclDeny=DENY", "  - aclDeny=PUB"))
        assert wait_for(lambda: run_java("AclProbe", server.namesrv_addr, "appUser01", "appSecret01",
                                         "send:aclDeny", timeout=60).events[0]["ok"], 20, interval=0.5,
                        what="the edited permission to hold")
    finally:
        path.write_text(original)
        time.sleep(1.0)


def test_rmqd_admin_signs_with_tools_yml_and_has_the_acl_commands(acl_rmqd, tmp_path, monkeypatch) -> None:
    import contextlib
    import io

    from rmqd.admin.main import main

    server, home = acl_rmqd

    def admin(*argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([*argv, "-n", server.namesrv_addr])
        return rc, out.getvalue() + err.getvalue()

    monkeypatch.setenv("ROCKETMQ_HOME", str(_tools_home(tmp_path / "user", "appUser01", "appSecret01")))
    rc, out = admin("updateTopic", "-c", "DefaultCluster", "-t", "rmqdAdminUser")
    assert rc == 1 and "Need admin permission for request code=17" in out
    monkeypatch.setenv("ROCKETMQ_HOME", str(_tools_home(tmp_path / "admin", *ADMIN)))
    assert admin("updateTopic", "-c", "DefaultCluster", "-t", "rmqdAdminMade")[0] == 0
    rc, out = admin("updateAclConfig", "-c", "DefaultCluster", "-a", "cliUser001", "-s", "cliSecret001",
                    "-t", "aclOther=PUB")
    assert rc == 0 and "create or update plain access config to" in out
    assert "cliUser001" in (home / "conf" / "plain_acl.yml").read_text()
    rc, out = admin("clusterAclConfigVersion", "-c", "DefaultCluster")
    assert rc == 0 and "plain_acl.yml" in out and "get cluster's plain access config version success." in out
    rc, out = admin("deleteAclConfig", "-c", "DefaultCluster", "-a", "cliUser001")
    assert rc == 0 and "account's accesskey is:cliUser001" in out
    assert "cliUser001" not in (home / "conf" / "plain_acl.yml").read_text()
