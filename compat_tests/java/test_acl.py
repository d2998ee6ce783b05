"""ACL (issue 18): signed real clients against rmqd with aclEnable=true, and the same matrix against the
Java 4.9.8 broker started from the kit with the same plain_acl.yml (differential).

Clients: the Java client with AclClientRPCHook (compat_tests/java/src/AclProbe.java), the C++ wheel with
set_session_credentials, and mqadmin signing with its conf/tools.yml.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterator

import pytest
from clientrunner import run_client_script
from javakit import SETUP_BUDGET, JavaProcess, MqadminShell, ReferenceCluster, shadow_home
from scenarios import wait_for

from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.testing import EmbeddedServer

# its own ACL reference cluster (a second start) and Java programs of at most 90 s each
pytestmark = pytest.mark.timeout(SETUP_BUDGET + 300)

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


_APP, _ADMIN, _WHITE = "appUser01:appSecret01", "adminUser01:adminSecret01", "whiteUser01:notTheSecret"
# the MATRIX cells that are allowed (the Java client gets exactly these from both brokers)
EXPECTED_OK = {f"{_APP}/send:aclPub", f"{_APP}/send:aclBoth", f"{_APP}/pull:aclSub:groupOk",
               f"{_APP}/pull:aclBoth:groupOther", f"{_ADMIN}/send:aclOther", f"{_ADMIN}/pull:aclOther:groupAny",
               f"{_WHITE}/send:aclDeny", f"{_WHITE}/pull:aclDeny:groupDeny"}


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
        cluster.kill()


class AclProber:
    """``AclProbe --stdin``: one JVM runs many probes (credentials and ops), each with its own producer and
    consumers signed by its own AclClientRPCHook, as separate ``run_java("AclProbe", ...)`` runs would, without
    a JVM start (seconds on a busy machine) per probe."""

    def __init__(self, namesrv: str) -> None:
        self.proc = JavaProcess("AclProbe", namesrv, "--stdin")
        self.proc.wait_for(lambda evs: any(e.get("ready") for e in evs), 90, "AclProbe start")
        self.count = 0

    def run(self, ak: str, sk: str, *ops: str, timeout: float = 90) -> list[dict]:
        """The probe's events, one per op (in order)."""
        self.count += 1
        n = self.count
        start = len(self.proc.events)
        self.proc.send(json.dumps([ak, sk, *ops]))
        self.proc.wait_for(lambda evs: any(e.get("end") == n for e in evs[start:]), timeout, f"probe {ak} {ops}")
        events = [e for e in self.proc.events[start:] if "op" in e]
        assert [e["op"] for e in events] == list(ops), events
        return events

    def __enter__(self) -> "AclProber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stop()
        assert self.proc.proc.returncode == 0, "".join(self.proc.stderr_tail)[-3000:]


def _matrix(namesrv: str) -> dict[str, dict]:
    results = {}
    with AclProber(namesrv) as prober:
        for ak, sk, ops in MATRIX:
            for ev in prober.run(ak, sk, *ops):
                results[f"{ak}:{sk}/{ev['op']}"] = {k: ev.get(k) for k in ("ok", "code", "error")}
    return results


def test_java_client_matrix_matches_the_java_broker(acl_rmqd, acl_reference) -> None:
    ours = _matrix(acl_rmqd[0].namesrv_addr)
    theirs = _matrix(acl_reference[0].namesrv_addr)
    assert {k for k, v in ours.items() if v["ok"]} == EXPECTED_OK
    assert ours == theirs
    assert "No default permission for topic:aclDeny" in ours[f"{_APP}/send:aclDeny"]["error"]
    assert "No default permission for topic:aclOther" in ours[f"{_APP}/send:aclOther"]["error"]
    assert "No default permission for topic:aclPub" in ours[f"{_APP}/pull:aclPub:groupOk"]["error"]
    assert "No default permission for group:groupDeny" in ours[f"{_APP}/pull:aclSub:groupDeny"]["error"]
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


# The MATRIX cells with the C++ client (set_session_credentials): one process per account, JSON lines like
# AclProbe's. A pull is one PULL_MESSAGE on queue 0 (the wheel's own pull() loops for ever on an error):
# the C API reports a refused pull as BROKER_TIMEOUT (4).
CPP_MATRIX_SCRIPT = r'''
import ctypes
from rocketmq.client import Producer, Message, PullConsumer, dll, ffi_check, _CMessageQueue
A = _json.loads(_os.environ['SCENARIO_ARGS'])

def signed(client):
    if A['ak'] != '-':
        client.set_session_credentials(A['ak'], A['sk'], 'ALIYUN')
    return client

sends = [op for op in A['ops'] if op.startswith('send:')]
if sends:
    p = signed(Producer('acl_cpp_matrix_pg'))
    p.set_namesrv_addr(NAMESRV)
    p.start()
    for op in sends:
        m = Message(op.split(':')[1])
        m.set_body('cpp-acl-matrix')
        try:
            emit(op=op, ok=int(p.send_sync(m).status) == 0)
        except Exception as e:
            emit(op=op, ok=False, error=str(e)[:300])
    p.shutdown()
for op in A['ops']:
    if not op.startswith('pull:'):
        continue
    _, topic, group = op.split(':')
    c = signed(PullConsumer(group))
    c.set_namesrv_addr(NAMESRV)
    c.start()
    queues, count = ctypes.POINTER(_CMessageQueue)(), ctypes.c_int()
    ffi_check(dll.FetchSubscriptionMessageQueues(c._handle, topic.encode(), ctypes.pointer(queues),
                                                 ctypes.pointer(count)))
    mq = next(queues[i] for i in range(count.value) if queues[i].queueId == 0)
    result = dll.Pull(c._handle, ctypes.pointer(mq), b'*', ctypes.c_longlong(0), 4)
    status = int(result.pullStatus)
    dll.ReleasePullResult(result)
    ffi_check(dll.ReleaseSubscriptionMessageQueue(queues))
    emit(op=op, ok=status != 4, status=status)
    c.shutdown()
_os._exit(0)
'''


def _cpp_matrix(python: str, namesrv: str) -> dict[str, dict]:
    results = {}
    for ak, sk, ops in MATRIX:
        res = run_client_script(python, CPP_MATRIX_SCRIPT, env={"NAMESRV": namesrv, "SCENARIO_ARGS": json.dumps(
            {"ak": ak, "sk": sk, "ops": ops})}, timeout=60)
        assert res.returncode == 0 and len(res.events) == len(ops), (res.events, res.stderr[-2000:])
        for ev in res.events:
            results[f"{ak}:{sk}/{ev['op']}"] = {k: ev.get(k) for k in ("ok", "status")}
    return results


@pytest.mark.parametrize("cpp", ["cpp1", "cpp2"])
def test_cpp_client_matrix_matches_the_java_client_and_broker(acl_rmqd, acl_reference, client_pythons, cpp) -> None:
    """The MATRIX cells (SUB-only topic, DENY group, default permissions, account white list, bad signature,
    unknown and missing keys) with the C++ client: the same cells are allowed as for the Java client, and
    the Java 4.9.8 broker answers it the same (a refused pull is the same status from both)."""
    server = acl_rmqd[0]
    hook = server.broker.dispatcher.request_hook
    refused_before = hook.refused
    ours = _cpp_matrix(client_pythons[cpp], server.namesrv_addr)
    assert {k for k, v in ours.items() if v["ok"]} == EXPECTED_OK
    assert hook.refused - refused_before >= len(ours) - len(EXPECTED_OK)   # each denied cell was refused here
    theirs = _cpp_matrix(client_pythons[cpp], acl_reference[0].namesrv_addr)
    if ours != theirs:
        # the C++ 1.x client reports a pull that timed out as it reports a refusal (status 4): a slow moment of the
        # Java broker (once, late in a whole-suite run) is asked again; a real difference repeats
        print("the Java broker answered differently, asking again:",
              {k: (ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k)})
        theirs = _cpp_matrix(client_pythons[cpp], acl_reference[0].namesrv_addr)
    assert ours == theirs


def _tools_home(base: Path, ak: str, sk: str) -> Path:
    return shadow_home(base, {"tools.yml": f"accessKey: {ak}\nsecretKey: {sk}\n"})


def test_mqadmin_signs_with_tools_yml_and_admin_codes_need_admin(acl_rmqd, acl_reference, tmp_path) -> None:
    """mqadmin signing as an admin account may create a topic; as a plain account it is refused every admin
    code it sends (UPDATE_AND_CREATE_TOPIC 17, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200, DELETE_TOPIC_IN_BROKER
    215) with the same text by both brokers. One mqadmin JVM per account (MqadminShell)."""
    brokers = (("rmqd", acl_rmqd[0].namesrv_addr), ("java", acl_reference[0].namesrv_addr))
    with MqadminShell(home=_tools_home(tmp_path / "admin", *ADMIN)) as admin:
        for name, namesrv in brokers:
            ok = admin.run("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "aclAdminMade")
            assert "create topic to" in ok.stdout, (name, ok.stdout[-1500:])
    with MqadminShell(home=_tools_home(tmp_path / "user", "appUser01", "appSecret01")) as user:
        for name, namesrv in brokers:
            for code, args in ((17, ("updateTopic", "-t", "aclUserMade")),
                               (200, ("updateSubGroup", "-g", "aclUserGroup")),
                               (215, ("deleteTopic", "-t", "aclAdminMade"))):
                refused = user.run(args[0], "-n", namesrv, "-c", "DefaultCluster", *args[1:])
                assert f"Need admin permission for request code={code}, but accessKey=appUser01 is not" in \
                    refused.stdout, (name, code, refused.stdout[-1500:])
    assert acl_rmqd[0].broker.topic_config_manager.get("aclAdminMade") is not None          # not deleted
    assert acl_rmqd[0].broker.topic_config_manager.get("aclUserMade") is None
    assert acl_rmqd[0].broker.subscription_group_manager.table.get("aclUserGroup") is None   # not made


def test_acl_admin_commands_take_effect_live(acl_rmqd, tmp_path) -> None:
    """updateAclConfig / deleteAclConfig / updateGlobalWhiteAddr / clusterAclConfigVersion through mqadmin:
    the YAML is rewritten and the change holds at once, without a restart."""
    server, home = acl_rmqd
    admin_home = _tools_home(tmp_path / "admin", *ADMIN)
    ns = server.namesrv_addr
    with AclProber(ns) as prober, MqadminShell(home=admin_home) as shell:
        _admin_commands_take_effect(prober, shell, ns, home)


def _admin_commands_take_effect(prober: AclProber, shell: MqadminShell, ns: str, home: Path) -> None:
    probe = lambda ak, sk: prober.run(ak, sk, "send:aclOther", timeout=60)[0]  # noqa: E731
    assert probe("liveUser01", "liveSecret01")["ok"] is False
    r = shell.run("updateAclConfig", "-n", ns, "-c", "DefaultCluster", "-a", "liveUser01", "-s", "liveSecret01",
                  "-t", "aclOther=PUB")
    assert r.returncode == 0 and "update plain access config to" in r.stdout, r.stdout
    assert "liveUser01" in (home / "conf" / "plain_acl.yml").read_text()
    assert probe("liveUser01", "liveSecret01")["ok"] is True
    r = shell.run("clusterAclConfigVersion", "-n", ns, "-c", "DefaultCluster")
    assert r.returncode == 0 and "broker-a" in r.stdout and "plain_acl.yml" in r.stdout, r.stdout
    r = shell.run("deleteAclConfig", "-n", ns, "-c", "DefaultCluster", "-a", "liveUser01")
    assert r.returncode == 0 and "delete plain access config account from" in r.stdout, r.stdout
    assert probe("liveUser01", "liveSecret01")["ok"] is False
    r = shell.run("updateGlobalWhiteAddr", "-n", ns, "-c", "DefaultCluster", "-g", "127.0.0.1")
    assert r.returncode == 0 and "update global white remote addresses to" in r.stdout, r.stdout
    try:
        assert probe("-", "-")["ok"] is True                      # unsigned, but from a white address
    finally:
        r = shell.run("updateGlobalWhiteAddr", "-n", ns, "-c", "DefaultCluster", "-g", "10.10.103.*")
        assert r.returncode == 0 and "update global white remote addresses to" in r.stdout, r.stdout
    assert probe("-", "-")["ok"] is False


def test_hand_edited_file_is_reloaded_without_restart(acl_rmqd) -> None:
    server, home = acl_rmqd
    path = home / "conf" / "plain_acl.yml"
    original = path.read_text()
    try:
        path.write_text(original.replace("  - aclDeny=DENY", "  - aclDeny=PUB"))
        with AclProber(server.namesrv_addr) as prober:
            assert wait_for(lambda: prober.run("appUser01", "appSecret01", "send:aclDeny", timeout=60)[0]["ok"], 20,
                            interval=0.5, what="the edited permission to hold")
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
