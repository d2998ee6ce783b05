"""Access control 2.0 against the Java 5.5.0 broker: every cell of the matrix (auth_matrix: identity x operation x
source) gets the same answer from rmqd as from Java, with raw signed requests and with each real client: the 5.x
and 4.9.8 Java remoting clients (AclClientRPCHook), the 5.x gRPC Java, Python and Go clients, 5.5's mqadmin."""
from __future__ import annotations

import json

import pytest
from auth_matrix import (GO_GRPC_IDENTITIES, GO_GRPC_RECEIVE, GRPC_IDENTITIES, GRPC_OPS, GRPC_RECEIVE,
                         REMOTING4_IDENTITIES, REMOTING4_OPS, JAVA_START_TIMEOUT, REMOTING5_IDENTITIES, REMOTING5_OPS,
                         SUPER, differences, key, ops_for, outcome, raw_matrix)
from java5kit import java5_command
from javakit import JavaProcess

pytestmark = pytest.mark.timeout(JAVA_START_TIMEOUT + 400)
GO_PROBE_TIMEOUT = 120.0        # ~15 cells, each a Go client's start (about a second) and a request or two


def test_raw_remoting_matrix(auth_pair) -> None:
    """Every action on every resource type, from two source addresses (127.0.0.1, 127.0.0.2), every identity:
    the same code, and for a refusal the same remark."""
    theirs = raw_matrix(auth_pair.java.broker)
    ours = raw_matrix(auth_pair.rmqd.broker)
    diff = differences(ours, theirs)
    assert not diff, diff
    refused = [k for k, v in ours.items() if v[0] == 16]
    assert len(refused) > len(ours) / 3 and len(ours) - len(refused) > 40       # both kinds, many of each
    assert ours["127.0.0.1|uPub:uPubPass01/pub:mx-pub-deny"][1].endswith("the decision is deny.")
    assert ours["127.0.0.2|uSub:uSubPass01/get:mx-sub"][0] == 16                # the entry holds 127.0.0.1 only


class _Prober:
    """A probe program in one JVM fed identities on stdin (Auth5Probe, AclProbe, Auth5GrpcProbe)."""

    def __init__(self, proc: JavaProcess, ready, end, line, events_of) -> None:
        self.proc, self._end, self._line, self._events_of = proc, end, line, events_of
        proc.wait_for(ready, 120, "probe start")

    def run(self, ident: tuple, ops: list, timeout: float = 120) -> dict:
        start = len(self.proc.events)
        self.proc.send(self._line(ident, ops))
        self.proc.wait_for(lambda evs: any(self._end(e) for e in evs[start:]), timeout, f"probe {ident} {ops}")
        return {key(ident, op): outcome(ev) for op, ev in self._events_of(self.proc.events[start:])}

    def close(self) -> None:
        self.proc.stop()


def _remoting_prober(proc: JavaProcess) -> _Prober:
    return _Prober(proc, lambda evs: any(e.get("ready") for e in evs), lambda e: "end" in e,
                   lambda ident, ops: json.dumps([*ident, *ops]),
                   lambda evs: [(e["op"], e) for e in evs if "op" in e])


def _grpc_prober(endpoint: str) -> _Prober:
    proc = JavaProcess("Auth5GrpcProbe", cmd=java5_command("grpc", "Auth5GrpcProbe", endpoint))
    return _Prober(proc, lambda evs: any(e.get("op") == "ready" for e in evs), lambda e: e.get("op") == "end",
                   lambda ident, ops: " ".join([*ident, *ops]),
                   lambda evs: [(e["step"], e) for e in evs if e.get("op") == "result"])


def _matrix(prober: _Prober, cells: list) -> dict:
    out = {}
    for ident, ops in cells:
        out.update(prober.run(ident, ops))
    return out


def _timed_out(v: tuple) -> bool:
    """A client-side timeout (the loaded machine), not an answer: such a cell is asked again."""
    return not v[0] and (v[1] in (-1, 10002) or "timeout" in str(v[2]).lower()) and v[1] != 16


def _both(run, cells: list, java, rmqd) -> tuple[dict, dict]:
    """``run(side, cells)`` on both sides at once (two client programs: most of a cell's time is the client's start
    and its waits, on a machine shared with other jobs)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        theirs, ours = pool.submit(run, java, cells), pool.submit(run, rmqd, cells)
        return theirs.result(), ours.result()


def _compare(run, cells: list, java: str, rmqd: str) -> tuple[dict, dict]:
    theirs, ours = _both(run, cells, java, rmqd)
    again = [k for k in set(theirs) | set(ours) if _timed_out(theirs.get(k, (0,))) or _timed_out(ours.get(k, (0,)))]
    if again:
        print("asking again after a client-side timeout:", again)
        retry = [(i, [o for o in ops if key(i, o) in again]) for i, ops in cells]
        retry = [(i, ops) for i, ops in retry if ops]
        again_theirs, again_ours = _both(run, retry, java, rmqd)
        theirs.update(again_theirs)
        ours.update(again_ours)
    diff = differences(ours, theirs)
    assert not diff, diff
    return ours, theirs


def test_java5_remoting_client_matrix(auth_pair) -> None:
    cells = [(i, ops_for(i, REMOTING5_OPS)) for i in REMOTING5_IDENTITIES]

    def run(side, cells):
        prober = _remoting_prober(JavaProcess("Auth5Probe", cmd=java5_command(
            "remoting", "Auth5Probe", side.namesrv, side.broker)))
        try:
            prober.run(SUPER, ["send:mx-sub"])                  # warm up (route, connection, JIT)
            return _matrix(prober, cells)
        finally:
            prober.close()
    ours, _ = _compare(run, cells, auth_pair.java, auth_pair.rmqd)
    assert ours[key(("uPub", "uPubPass01"), "send:mx-pub")][0] is True
    assert ours[key(("uPub", "uPubPass01"), "send:mx-pub-deny")] == (
        False, 16, "User:uPub has no permission to access Topic:mx-pub-deny from 127.0.0.1, the decision is deny.")
    assert ours[key(("uOff", "uOffPass01"), "send:mx-pub")] == (False, 16, "User:uOff is disabled.")


def test_java4_remoting_client_matrix(auth_pair) -> None:
    """The 4.9.8 client (AclProbe, its AclClientRPCHook) signs as 5.x expects."""
    from javakit import require_kit
    require_kit()
    cells = [(i, ops_for(i, REMOTING4_OPS)) for i in REMOTING4_IDENTITIES]

    def run(side, cells):
        for attempt in (1, 2):              # the 4.9.8 probe exits on a route lookup timeout (a loaded machine)
            prober = _remoting_prober(JavaProcess("AclProbe", side.namesrv, "--stdin"))
            try:
                prober.run(SUPER, ["send:mx-sub"])
                return _matrix(prober, cells)
            except AssertionError:
                if attempt == 2 or prober.proc.proc.poll() is None:
                    raise
                print(f"AclProbe on {side.name} exited (a client-side timeout): starting it again")
            finally:
                prober.close()
    ours, _ = _compare(run, cells, auth_pair.java, auth_pair.rmqd)
    assert ours[key(("uPub", "uPubPass01"), "send:mx-pub")][0] is True
    assert ours[key(("uPub", "wrongSecret1"), "send:mx-pub")] == (False, 16, "check signature failed.")


def _grpc_cells(identities: list = GRPC_IDENTITIES, receive: dict = GRPC_RECEIVE) -> list:
    cells = [(i, ops_for(i, GRPC_OPS)) for i in identities]
    return [(i, ops + receive.get(i, [])) for i, ops in cells]


def test_java_grpc_client_matrix(auth_pair) -> None:
    cells = _grpc_cells()

    def run(side, cells):
        prober = _grpc_prober(side.grpc)
        try:
            return _matrix(prober, cells)
        finally:
            prober.close()
    ours, _ = _compare(run, cells, auth_pair.java, auth_pair.rmqd)
    ok = key(("uPub", "uPubPass01"), "send:mx-pub")
    assert ours[ok][0] is True
    denied = ours[key(("uPub", "uPubPass01"), "send:mx-pub-deny")]
    assert denied[1] == 40100 and "User:uPub has no permission to access Topic:mx-pub-deny" in denied[2]


PY5_MATRIX = r'''
import json, re, sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
ENDPOINT = _os.environ["ENDPOINT"]
CELLS = json.loads(_os.environ["CELLS"])
for (ak, sk), ops in CELLS:
    conf = ClientConfiguration(ENDPOINT, Credentials("" if ak == "-" else ak, "" if sk == "-" else sk),
                               request_timeout=5)
    producer = None                   # one producer for the identity's sends
    for op in ops:
        parts = op.split(":")
        ev = dict(ak=ak, sk=sk, step=op)
        try:
            if parts[0] == "send":
                if producer is None:
                    producer = Producer(conf)
                    producer.startup()
                m = Message(); m.topic = parts[1]; m.body = b"auth"
                producer.send(m)
            else:
                c = SimpleConsumer(conf, parts[2], {parts[1]: FilterExpression()}, await_duration=1)
                c.startup()
                try:
                    c.receive(1, 10)
                finally:
                    c.shutdown()
            ev.update(ok=True, code=0, error=None)
        except Exception as e:
            text = str(e)
            m = re.search(r"code: ?(\d+)|response-code=(\d+)|(\b40\d\d\d\b)", text)
            code = int(next(g for g in m.groups() if g)) if m else -1
            ev.update(ok=False, code=code, error=text)
        emit(op="result", **ev)
    if producer is not None:
        producer.shutdown()
_os._exit(0)
'''


def _py5_status(text: str) -> str:
    """The broker's status message inside the Python client's exception text."""
    import re
    m = re.search(r"message: ?(.*?)(?:, ?request_id|$)", text or "") or re.search(r"\] (.*)$", text or "")
    return m.group(1).strip() if m else (text or "")


def test_python_grpc_client_matrix(auth_pair, py5_python) -> None:
    from clientrunner import run_client_script
    cells = _grpc_cells()

    def run(side, cells):
        res = run_client_script(py5_python, PY5_MATRIX, env={"ENDPOINT": side.grpc, "CELLS": json.dumps(cells)},
                                timeout=240)
        assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events)
        out = {}
        for e in res.events_of("result"):
            ok, code, error = outcome(e)
            out[key((e["ak"], e["sk"]), e["step"])] = (ok, code, None if ok else _py5_status(error))
        return out
    ours, _ = _compare(run, cells, auth_pair.java, auth_pair.rmqd)
    assert ours[key(("uPub", "uPubPass01"), "send:mx-pub")][0] is True
    assert ours[key(("uPub", "uPubPass01"), "send:mx-pub-deny")][0] is False


def test_go_grpc_client_matrix(auth_pair) -> None:
    """The official Go gRPC client (compat_tests/go/cmd/grpcauth: SessionCredentials, a producer per send started
    with its topic, a simple consumer per receive): the same outcome, code and message from both."""
    from gokit import require_go_programs, run_go
    require_go_programs()
    cells = _grpc_cells(GO_GRPC_IDENTITIES, GO_GRPC_RECEIVE)

    def run(side, cells):
        res = run_go("grpcauth", "-endpoint", side.grpc, "-cells", json.dumps(cells), timeout=GO_PROBE_TIMEOUT)
        assert res.returncode == 0 and not res.timed_out and len(res.events) == 1, res.stderr[-3000:]
        return {k: outcome(v) for k, v in res.events[0].items()}
    ours, _ = _compare(run, cells, auth_pair.java, auth_pair.rmqd)
    assert len(ours) == sum(len(ops) for _, ops in cells)
    assert ours[key(("uPub", "uPubPass01"), "send:mx-pub")][0] is True
    assert ours[key(("uSub", "uSubPass01"), "receive:mx-sub:mx-g1")][0] is True
    assert ours[key(("uPub", "uPubPass01"), "receive:mx-sub:mx-g1")][:2] == (False, 40100)
    assert ours[key(("uPub", "uPubPass01"), "send:mx-pub-deny")] == (False, 40100, "User:uPub has no permission to "
                                                                     "access Topic:mx-pub-deny from 127.0.0.1, "
                                                                     "the decision is deny.")
    assert ours[key(("uPub", "wrongSecret1"), "send:mx-pub")] == (False, 40100, "check signature failed.")
    assert ours[key(("", ""), "send:mx-pub")] == (False, 40100, "username cannot be null.")


MQADMIN_CELLS = [
    ("updateTopic", "-b", "{broker}", "-t", "mx-adm-{n}"),        # Create on the topic
    ("deleteTopic", "-c", "DefaultCluster", "-t", "mx-adm-{n}"),  # Delete on the topic
    ("listUser", "-b", "{broker}", "-f", "uPub"),                  # Get on the cluster
    ("createUser", "-b", "{broker}", "-u", "made{n}", "-p", "madePass1"),  # Update on the cluster
]


def _mqadmin_outcome(stdout: str) -> tuple:
    """(succeeded, the broker's code and remark when it refused): mqadmin prints the exception's text."""
    import re
    m = re.search(r"CODE: (\d+)\s+DESC: (.*?)(?:\n|BROKER:|$)", stdout)
    if m:
        return False, int(m.group(1)), m.group(2).strip().split("\nSee ")[0]
    failed = "command failed" in stdout or "Exception" in stdout
    return not failed, None, None


def test_mqadmin5_matrix(auth_pair, tmp_path) -> None:
    """5.5's mqadmin signing with its home's tools.yml, one identity after another: the same commands succeed,
    the same are refused with the same text."""
    from java5kit import Mqadmin5
    home = tmp_path / "tools-home"
    (home / "conf").mkdir(parents=True)
    results = {}
    idents = [("uAdmin", "uAdminPass1"), ("uPub", "uPubPass01"), ("uPub", "wrongSecret1")]
    with Mqadmin5(home=home) as shell:
        for n, ident in enumerate(idents):
            (home / "conf" / "tools.yml").write_text(f"accessKey: {ident[0]}\nsecretKey: {ident[1]}\n")
            for side in auth_pair.sides:
                for cell in MQADMIN_CELLS:
                    args = [a.format(broker=side.broker, n=n) for a in cell]
                    res = shell.run(*args, "-n", side.namesrv, timeout=60)
                    results[(side.name, ident[0], ident[1], cell[0])] = _mqadmin_outcome(res.stdout)
    diff = {k[1:]: (results[("rmqd", *k[1:])], results[("java", *k[1:])]) for k in results
            if k[0] == "java" and results[("rmqd", *k[1:])] != results[k]}
    assert not diff, diff
    assert results[("rmqd", "uPub", "uPubPass01", "updateTopic")][1] == 16
    assert results[("rmqd", "uAdmin", "uAdminPass1", "createUser")][0] is True


def _grpc_status(endpoint: str, md: list, call: str) -> tuple:
    """(code, message) of one raw gRPC call (rmqd's stubs of the same proto the 5.x clients use)."""
    import grpc

    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.grpc.pb import service_pb2 as s
    from rmqd.grpc.pb import service_pb2_grpc as sg
    with grpc.insecure_channel(endpoint) as channel:
        stub = sg.MessagingServiceStub(channel)
        if call == "route":
            st = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="mx-pub")), metadata=md, timeout=15).status
        else:
            m = d.Message(topic=d.Resource(name="mx-pub"), body=b"raw", system_properties=d.SystemProperties(
                message_id="01RAWGRPC000000000000000001", body_encoding=d.IDENTITY, message_type=d.NORMAL))
            st = stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md, timeout=15).status
    return st.code, st.message


def _signed_md(ak: str, sk: str, when: str | None = None, auth: str | None = None) -> list:
    """A 5.x client's gRPC headers signed as its credentials provider does (``auth`` replaces the header)."""
    import hashlib
    import hmac
    from datetime import datetime, timezone
    now = when or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    sig = hmac.new(sk.encode(), now.encode(), hashlib.sha1).hexdigest()
    value = auth if auth is not None else \
        f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
    return [("x-mq-client-id", "raw-grpc-auth"), ("x-mq-date-time", now), ("authorization", value)]


def test_raw_grpc_authorization_headers(auth_pair) -> None:
    """Forged, malformed, expired and missing gRPC credentials: the same status and message from both."""
    md = _signed_md
    cases = {
        "good": md("uPub", "uPubPass01"),
        "expired": md("uPub", "uPubPass01", when="20010101T000000Z"),
        "forged": md("uPub", "notThePassword"),
        "unknown": md("ghost", "ghostPass1"),
        "disabled": md("uOff", "uOffPass01"),
        "not-hex": md("uPub", "uPubPass01", auth="MQv2-HMAC-SHA1 Credential=uPub, Signature=zzzz"),
        "no-kv": md("uPub", "uPubPass01", auth="MQv2-HMAC-SHA1 oops"),
        "one-word": md("uPub", "uPubPass01", auth="MQv2-HMAC-SHA1"),
        "no-date": [("x-mq-client-id", "raw-grpc-auth"), ("authorization", "MQv2-HMAC-SHA1 Credential=uPub")],
        "none": [("x-mq-client-id", "raw-grpc-auth")],
        "denied": md("uSub", "uSubPass01"),
    }
    got = {}
    for name, metadata in cases.items():
        for call in ("route", "send"):
            got[(name, call)] = {side.name: _grpc_status(side.grpc, metadata, call) for side in auth_pair.sides}
    diff = {k: v for k, v in got.items() if v["rmqd"] != v["java"]}
    assert not diff, diff
    assert got[("expired", "send")]["rmqd"][0] == 20000                 # accepted: 5.5 does not check the date
    assert got[("forged", "route")]["rmqd"] == (40100, "check signature failed.")

def _telemetry_first_answer(endpoint: str, md: list, settings) -> tuple:
    """(status code, status message, whether settings came) of the first command a Telemetry stream answers one
    Settings command with: what a Go client starting up is refused with, although it only reports the stream's end
    (EOF)."""
    import threading

    import grpc

    from rmqd.grpc.pb import service_pb2 as s
    from rmqd.grpc.pb import service_pb2_grpc as sg
    done = threading.Event()

    def commands():
        yield s.TelemetryCommand(settings=settings)
        done.wait(20)                       # the stream stays open until the answer is read
    with grpc.insecure_channel(endpoint) as channel:
        call = sg.MessagingServiceStub(channel).Telemetry(commands(), metadata=md + [("x-mq-language", "GO")],
                                                          timeout=15)
        try:
            first = next(call)
            return first.status.code, first.status.message, first.HasField("settings")
        except grpc.RpcError as exc:
            return "grpc", exc.code().name, exc.details()
        finally:
            done.set()
            call.cancel()


def test_raw_grpc_telemetry_refusals(auth_pair) -> None:
    """A producer's and a simple consumer's Settings on the Telemetry stream (Pub on each topic; Sub on the group
    and the topic): the same first answer from both, a refusal's status and message included."""
    from rmqd.grpc.pb import definition_pb2 as d

    def producer(topic: str):
        return d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=topic)]))

    def consumer(topic: str, group: str):
        return d.Settings(client_type=d.SIMPLE_CONSUMER, subscription=d.Subscription(
            group=d.Resource(name=group), subscriptions=[d.SubscriptionEntry(
                topic=d.Resource(name=topic), expression=d.FilterExpression(type=d.TAG, expression="*"))]))
    cases = {
        "pub-allowed": (("uPub", "uPubPass01"), producer("mx-pub")),
        "pub-denied": (("uPub", "uPubPass01"), producer("mx-pub-deny")),
        "pub-by-subscriber": (("uSub", "uSubPass01"), producer("mx-pub")),
        "sub-allowed": (("uSub", "uSubPass01"), consumer("mx-sub", "mx-g1")),
        "sub-group-denied": (("uSub", "uSubPass01"), consumer("mx-sub", "mx-g2")),
        "sub-by-publisher": (("uPub", "uPubPass01"), consumer("mx-sub", "mx-g1")),
        "unknown-user": (("ghost", "ghostPass1"), producer("mx-pub")),
        "forged": (("uPub", "wrongSecret1"), producer("mx-pub")),
    }
    got = {name: {side.name: _telemetry_first_answer(side.grpc, _signed_md(*ident), settings)
                  for side in auth_pair.sides} for name, (ident, settings) in cases.items()}
    diff = {k: v for k, v in got.items() if v["rmqd"] != v["java"]}
    assert not diff, diff
    assert got["pub-allowed"]["rmqd"] == (20000, "OK", True)
    assert got["pub-by-subscriber"]["rmqd"][:2] == (40100, "User:uSub has no permission to access Topic:mx-pub "
                                                            "from 127.0.0.1, no matched policies.")
    assert got["sub-group-denied"]["rmqd"][:2] == (40100, "User:uSub has no permission to access Group:mx-g2 "
                                                           "from 127.0.0.1, the decision is deny.")


def test_auth_action_table() -> None:
    """rmqd's table of what each request code touches (rmqd.auth.remoting_contexts.ANNOTATED) is 5.5.0's: the
    @RocketMQAction / @RocketMQResource annotations of every request header its RequestHeaderRegistry knows."""
    from java5kit import require_kit5, run_java5

    from rmqd.auth.remoting_contexts import ANNOTATED
    require_kit5()
    res = run_java5("remoting", "AuthActionTable", timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = {int(code): (row["resource"], tuple(row["actions"]),
                          tuple((f["name"], f["type"]) + ((f["splitter"],) if f["splitter"] else ())
                                for f in row["fields"]))
              for code, row in json.loads(res.stdout).items()}
    ours = {code: (rtype.value, tuple(a.value for a in actions), tuple((f[0], f[1].value, *f[2:]) for f in fields))
            for code, (rtype, actions, fields) in ANNOTATED.items()}
    assert ours == theirs
