"""HTTP-level tests of every console endpoint (the in-process view; the remote view at the end)."""
from __future__ import annotations

import base64
import json
import os
import re
import socket
import time
import urllib.parse
import urllib.request

import pytest

from rmqd.console import app as console_app
from rmqd.console.view import RemoteClusterView

from tests.console.kit import ConsoleKit, Http
from tests.kit.waits import wait_until

pytestmark = pytest.mark.timeout(60)

TOPIC = "ConsoleTopic"
GROUP = "ConsoleGroup"


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    k = ConsoleKit(str(tmp_path_factory.mktemp("console-store")),
                   {"mapedFileSizeConsumeQueue": 20 * 1000}).start()
    k.create_topic(TOPIC)
    k.create_group(GROUP)
    k.ids = [k.send(TOPIC, json.dumps({"n": i}).encode(), queue_id=i % 2, tags="TagA",
                    keys=f"order-{i}") for i in range(6)]
    k.ids.append(k.send(TOPIC, bytes(range(256)), queue_id=1, keys="binary"))
    k.commit(GROUP, TOPIC, 0, 1)
    k.commit(GROUP, TOPIC, 1, 1)
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="module")
def web(kit) -> Http:
    return kit.http()


def test_healthz_and_session(web):
    assert web.get_json("/healthz") == {"status": "ok"}
    s = web.get_json("/api/session")
    assert s == {"readOnly": False, "mode": "local", "tokenRequired": False}


@pytest.mark.parametrize("path", ["/", "/topics", f"/topics/{TOPIC}", f"/groups/{GROUP}", "/messages?topic=x",
                                  "/messages/ABC?topic=x", "/tail/x", "/search", "/dlq", "/features", "/producers",
                                  "/brokers/127.0.0.1:1"])
def test_every_page_url_serves_the_ui_with_a_csrf_cookie(web, path):
    code, headers, body = web.get(path)
    assert code == 200 and b'<script src="/static/app.js">' in body
    port = urllib.parse.urlsplit(web.base).port
    assert f"rmqd_csrf_{port}=" in headers.get("Set-Cookie", "")
    assert f'<meta name="rmqd-csrf-cookie" content="rmqd_csrf_{port}">'.encode() in body


def test_assets_ship_in_the_package_and_load_nothing_from_another_host(web):
    static = os.path.dirname(console_app.__file__) + "/static"
    names = sorted(os.listdir(static))
    assert names == ["app.css", "app.js", "index.html"]
    for name in names:
        code, _, body = web.get(f"/static/{name}")
        assert code == 200 and body == open(os.path.join(static, name), "rb").read()
        text = body.decode()
        # no absolute URL to another host anywhere: src/href/url()/import/fetch all stay on this origin
        assert not re.search(r"""(src|href|url|import|fetch)\s*[=(]\s*["']?(https?:)?//""", text), name
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text


def test_unknown_api_is_a_json_404(web):
    code, _, body = web.get("/api/nope")
    assert code == 404 and "error" in json.loads(body)


def test_overview_and_broker(web, kit):
    d = web.get_json("/api/overview")
    assert d["mode"] == "local" and d["clusters"] == ["DefaultCluster"]
    (b,) = d["brokers"]
    assert b["addr"] == kit.broker_addr and b["brokerName"] == "broker-a" and b["version"] == "V4_9_8"
    detail = web.get_json(f"/api/brokers/{kit.broker_addr}")
    assert detail["config"]["brokerName"] == "broker-a" and "putTps" in detail["runtime"]
    web.get_json("/api/brokers/127.0.0.1:1", status=404)


def test_topics_search_kind_and_pagination(web):
    d = web.get_json("/api/topics?q=consoletop")
    assert [r["topic"] for r in d["items"]] == [TOPIC]
    assert d["items"][0] | {"brokers": ["broker-a"], "readQueueNums": 4, "perm": 6, "kind": "normal"} == d["items"][0]
    sys_topics = web.get_json("/api/topics?kind=system&size=5")
    assert sys_topics["total"] >= 8 and len(sys_topics["items"]) == 5 and sys_topics["pages"] >= 2
    page2 = web.get_json("/api/topics?kind=system&size=5&page=2")
    assert not {r["topic"] for r in page2["items"]} & {r["topic"] for r in sys_topics["items"]}
    assert web.get_json("/api/topics?q=no-such-topic")["items"] == []


def test_topic_detail_status_route_and_consumers(web):
    d = web.get_json(f"/api/topics/{TOPIC}")
    assert [(q["queueId"], q["maxOffset"]) for q in d["queues"]] == [(0, 3), (1, 4), (2, 0), (3, 0)]
    assert d["messages"] == 7 and d["groups"] == [GROUP]
    assert d["route"]["brokerDatas"][0]["brokerName"] == "broker-a"
    assert d["queues"][0]["lastUpdateTimestamp"] > 0
    web.get_json("/api/topics/NoSuchTopic", status=404)


def test_create_update_send_delete_topic(web):
    r = web.post_json("/api/topics", {"topic": "HttpMade", "readQueueNums": 2, "writeQueueNums": 2})
    assert r["topic"] == "HttpMade"
    assert web.get_json("/api/topics/HttpMade")["readQueueNums"] == 2
    web.post_json("/api/topics/HttpMade", {"readQueueNums": 3, "writeQueueNums": 3, "perm": 6})
    assert len(web.get_json("/api/topics/HttpMade")["queues"]) == 3
    sent = web.post_json("/api/topics/HttpMade/send", {"body": "hello", "tags": "T", "keys": "K1"})
    assert sent["status"] == "SEND_OK" and re.fullmatch(r"[0-9A-F]{32}", sent["msgId"])
    m = web.get_json(f"/api/messages/{sent['msgId']}?topic=HttpMade")
    assert base64.b64decode(m["body"]) == b"hello" and m["tags"] == "T" and m["keys"] == "K1"
    web.post_json("/api/topics/HttpMade/delete", {})
    web.get_json("/api/topics/HttpMade", status=404)


def test_bad_topic_input_is_a_400(web):
    code, _, body = web.post("/api/topics", {"topic": "bad name!"})
    assert code == 400 and "letters" in json.loads(body)["error"]
    code, _, body = web.post("/api/topics", {"topic": "Ok", "readQueueNums": "x"})
    assert code == 400
    code, _, body = web.post("/api/topics", "not an object")
    assert code == 400


def test_groups_list_detail_and_lag(web):
    d = web.get_json("/api/groups?q=console")
    (row,) = d["items"]
    assert row["group"] == GROUP and row["lag"] == 5 and row["online"] == 0
    g = web.get_json(f"/api/groups/{GROUP}")
    assert g["lag"] == 5 and [(q["queueId"], q["lag"]) for q in g["queues"]] == [(0, 2), (1, 3), (2, 0), (3, 0)]
    assert g["config"]["groupName"] == GROUP
    web.get_json("/api/groups/NoSuchGroup", status=404)
    system = web.get_json("/api/groups?system=true")
    assert "TOOLS_CONSUMER" in {r["group"] for r in system["items"]}


def test_lag_history_is_sampled(web):
    hist = wait_until(lambda: (lambda h: h if len(h["samples"]) >= 2 else None)(
        web.get_json(f"/api/groups/{GROUP}/lag-history")), 5, what="two lag samples")
    assert all(s["lag"] >= 0 and s["t"] > 0 for s in hist["samples"])


def test_reset_offset_by_time_and_skip_backlog(web, kit):
    kit.create_topic("ResetTopic", 1)
    kit.create_group("ResetGroup")
    for i in range(3):
        kit.send("ResetTopic", b"old")
    time.sleep(0.3)                     # Java's search by time picks the nearest message: keep the cut unambiguous
    cut = int(time.time() * 1000)
    for i in range(2):
        kit.send("ResetTopic", b"new")
    kit.commit("ResetGroup", "ResetTopic", 0, 0)
    r = web.post_json("/api/groups/ResetGroup/reset-offset", {"topic": "ResetTopic", "timestamp": cut})
    assert r["offsets"] == [{"broker": "broker-a", "queueId": 0, "offset": 3}]
    assert web.get_json("/api/groups/ResetGroup")["lag"] == 2
    r = web.post_json("/api/groups/ResetGroup/skip-backlog", {"topic": "ResetTopic"})
    assert r["offsets"][0]["offset"] == 5
    assert web.get_json("/api/groups/ResetGroup")["lag"] == 0
    code, _, _ = web.post("/api/groups/ResetGroup/reset-offset", {"topic": "ResetTopic"})
    assert code == 400


def test_running_info_needs_an_online_client(web):
    code, _, body = web.get(f"/api/groups/{GROUP}/clients/nobody@1/running-info")
    assert code == 502 and "error" in json.loads(body)


def test_producers(web, kit):
    c = kit.producer_heartbeat("PG_CONSOLE")
    try:
        d = web.get_json(f"/api/producers?topic={TOPIC}&group=PG_CONSOLE")
        (conn,) = d["connections"]
        assert conn["clientId"] == "console-test-PG_CONSOLE" and conn["language"] == "JAVA"
        assert web.get_json(f"/api/producers?topic={TOPIC}&group=PG_NONE")["connections"] == []
    finally:
        c.close()
    web.get_json("/api/producers?topic=x", status=400)


def test_messages_by_time_newest_first_without_duplicates(web):
    now = int(time.time() * 1000)
    d = web.get_json(f"/api/messages?topic={TOPIC}&begin={now - 600_000}&end={now + 1000}")
    ids = [m["msgId"] for m in d["messages"]]
    assert sorted(ids) == sorted(web_ids(web)) and len(set(ids)) == len(ids) == 7
    ts = [m["storeTimestamp"] for m in d["messages"]]
    assert ts == sorted(ts, reverse=True)
    limited = web.get_json(f"/api/messages?topic={TOPIC}&begin={now - 600_000}&end={now + 1000}&limit=3")
    assert len(limited["messages"]) == 3 and limited["truncated"]
    assert [m["msgId"] for m in limited["messages"]] == ids[:3]
    empty = web.get_json(f"/api/messages?topic={TOPIC}&begin={now - 7200_000}&end={now - 3600_000}")
    assert empty["messages"] == [] and not empty["truncated"]
    web.get_json(f"/api/messages?topic={TOPIC}&begin=10&end=5", status=400)
    web.get_json("/api/messages?topic=NoSuchTopic", status=404)


def web_ids(web) -> list[str]:
    return web.kit_ids


@pytest.fixture(autouse=True)
def _ids(web, kit):
    web.kit_ids = kit.ids


def test_messages_by_key_and_id(web, kit):
    d = web.get_json(f"/api/messages?topic={TOPIC}&key=order-3")
    (m,) = d["messages"]
    assert m["keys"] == "order-3" and json.loads(m["preview"]) == {"n": 3}
    assert web.get_json(f"/api/messages?topic={TOPIC}&key=nothing")["messages"] == []
    by_offset_id = web.get_json(f"/api/messages/{kit.ids[2]}")
    assert json.loads(base64.b64decode(by_offset_id["body"])) == {"n": 2}
    by_uniq = web.get_json(f"/api/messages/{m['uniqKey']}?topic={TOPIC}")
    assert by_uniq["msgId"] == m["msgId"]
    web.get_json("/api/messages/00000000000000000000000000000000?topic=" + TOPIC, status=404)
    web.get_json("/api/messages/zz", status=404)


def test_binary_body_and_raw_download(web, kit):
    m = web.get_json(f"/api/messages/{kit.ids[-1]}")
    assert m["binary"] and base64.b64decode(m["body"]) == bytes(range(256))
    code, headers, raw = web.get(f"/api/messages/{kit.ids[-1]}/raw")
    assert code == 200 and raw == bytes(range(256))
    assert headers["Content-Type"] == "application/octet-stream" and "attachment" in headers["Content-Disposition"]


def test_resend_without_online_consumer_is_refused(web, kit):
    code, _, body = web.post(f"/api/messages/{kit.ids[0]}/resend", {"group": GROUP})
    assert code == 409 and "no online consumer" in json.loads(body)["error"]
    code, _, _ = web.post(f"/api/messages/{kit.ids[0]}/resend", {})
    assert code == 400


def test_dlq_browse_and_resend(web, kit):
    kit.create_topic("DlqTopic", 1)
    kit.create_group("DlqGroup")
    kit.send("DlqTopic", b'{"poison": true}', keys="poison")
    _, _, msgs = kit.admin.pull(kit.broker_addr, "DlqTopic", 0, 0, 1, group="DlqGroup")
    kit.to_dlq("DlqGroup", "DlqTopic", msgs[0])
    d = web.get_json("/api/dlq/DlqGroup")
    (m,) = d["messages"]
    assert d["topic"] == "%DLQ%DlqGroup" and m["keys"] == "poison"
    assert m["properties"].get("RETRY_TOPIC") == "DlqTopic"
    r = web.post_json("/api/dlq/DlqGroup/resend", {"msgId": m["msgId"]})
    assert r["topic"] == "%RETRY%DlqGroup"
    _, _, back = kit.admin.pull(kit.broker_addr, "%RETRY%DlqGroup", 0, 0, 32, group="DlqGroup")
    assert [bytes(x.body) for x in back] == [b'{"poison": true}']
    assert back[0].properties["ORIGIN_MESSAGE_ID"]
    assert web.get_json("/api/dlq/EmptyGroup")["messages"] == []


def run_search(web, query: str) -> dict:
    job = web.get_json(f"/api/search?{query}")
    assert {"scanned", "total", "done", "matches"} <= set(job)
    return wait_until(lambda: (lambda j: j if j["done"] else None)(web.get_json(f"/api/search/{job['id']}")), 10,
                      what="search to finish")


def test_search_with_progress(web, kit):
    done = run_search(web, f"topic={TOPIC}&q=%22n%22%3A%204&field=body")
    assert done["scanned"] == done["total"] == 7 and done["error"] is None
    assert [json.loads(m["preview"]) for m in done["matches"]] == [{"n": 4}]
    assert len(run_search(web, f"topic={TOPIC}&q=binary&field=keys")["matches"]) == 1
    assert len(run_search(web, f"topic={TOPIC}&q=TagA&field=tags&mode=not_contains")["matches"]) == 1
    assert len(run_search(web, f"topic={TOPIC}&q=UNIQ_KEY&field=properties")["matches"]) == 7
    capped = run_search(web, f"topic={TOPIC}&q=order&field=all&max=3")
    assert capped["scanned"] == capped["total"] == 3
    web.get_json(f"/api/search?topic={TOPIC}&q=", status=400)
    web.get_json("/api/search/s999999", status=404)


def sse_events(stream):
    """(event, data) pairs of a server-sent event stream (comments skipped)."""
    event, data = "message", []
    while True:
        line = stream.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])


def test_live_tail_delivers_new_messages_within_a_second(kit):
    url = kit.url() + f"api/topics/{TOPIC}/tail"
    with urllib.request.urlopen(url, timeout=10) as stream:
        events = sse_events(stream)
        kind, data = next(events)
        assert kind == "pos"
        positions = json.loads(data)
        assert set(positions) == {f"broker-a/{q}" for q in range(4)}
        t0 = time.monotonic()
        kit.send(TOPIC, b"tail-me", queue_id=2)
        kind, data = next(events)
        assert time.monotonic() - t0 < 1.0
        assert kind == "message" and [m["preview"] for m in json.loads(data)] == ["tail-me"]
    # paused (stream closed) at `positions`: resuming from there delivers what arrived meanwhile
    resumed = urllib.request.urlopen(url + "?from=" + urllib.request.quote(json.dumps(positions)), timeout=10)
    with resumed:
        events = sse_events(resumed)
        assert next(events)[0] == "pos"
        kind, data = next(events)
        assert kind == "message" and [m["preview"] for m in json.loads(data)] == ["tail-me"]


def test_features_extension_point(web):
    d = web.get_json("/api/features")
    assert d["builtin"] == ["compaction", "tier", "acl"] and isinstance(d["features"], dict)


# ------------------------------------------------------------------ security
def post_routes() -> list[str]:
    from rmqd.console.app import build_app
    app = build_app(RemoteClusterView("127.0.0.1:1"))
    out = []
    for r in app.router.routes():
        if r.method in ("POST", "DELETE", "PUT", "PATCH"):
            out.append((r.method, r.resource.canonical.replace("{topic}", TOPIC).replace("{group}", GROUP)
                        .replace("{id}", "ABC")))
    return out


def test_read_only_answers_403_to_every_mutating_request(kit):
    ro = kit.http("ro")
    assert ro.get_json("/api/session")["readOnly"] is True
    routes = post_routes()
    assert len(routes) >= 10
    for method, path in routes:
        code, _, body = ro.request(method, path, {}, {"X-CSRF-Token": ro.csrf()})
        assert code == 403 and json.loads(body)["error"] == "the console is read-only", (method, path)
    assert ro.get_json(f"/api/topics/{TOPIC}")["topic"] == TOPIC      # reading still works


def test_csrf_is_required_on_post(web):
    code, _, body = web.post("/api/topics", {"topic": "CsrfTopic"}, csrf=False)
    assert code == 403 and "CSRF" in json.loads(body)["error"]
    code, _, _ = web.post("/api/topics", {"topic": "CsrfTopic"}, csrf=False, headers={"X-CSRF-Token": "forged"})
    assert code == 403
    fresh = Http(web.base)                                   # header without the cookie: refused too
    code, _, _ = fresh.request("POST", "/api/topics", {"topic": "CsrfTopic"}, {"X-CSRF-Token": web.csrf()})
    assert code == 403
    code, _, _ = web.post("/api/topics", {"topic": "CsrfTopic"}, headers={"Origin": "http://evil.example"})
    assert code == 403
    web.get_json("/api/topics/CsrfTopic", status=404)


def test_two_consoles_on_one_host_keep_their_own_cookies(kit):
    """Browsers share cookies between the ports of one host. With one cookie jar (one browser), opening a
    second console (the token one: its page sets a CSRF and a token cookie) does not overwrite the first's:
    the first tab's POSTs still pass its CSRF check, and the second's token cookie still lets it in."""
    rw, token = kit.http("rw"), kit.http("token")
    token.jar = rw.jar
    token.opener = rw.opener
    rw_csrf = rw.csrf()
    assert token.get("/?token=s3cret-token")[0] == 200            # the second console, opened in the same browser
    assert rw.csrf() == rw_csrf and token.csrf() != rw_csrf
    assert len({c.name for c in rw.jar if c.name.startswith("rmqd_csrf_")}) == 2
    assert rw.post_json("/api/topics", {"topic": "TwoConsolesTopic"})
    assert token.get_json("/api/overview")["brokers"]
    assert token.post("/api/topics", {"topic": "TwoConsolesTopic2"})[0] == 200


def test_token_required_off_loopback(kit):
    anon = kit.http("token")
    code, _, _ = anon.get("/api/overview")
    assert code == 401
    code, _, body = anon.get("/topics")
    assert code == 401 and b"token" in body
    assert anon.get_json("/healthz")["status"] == "ok"
    assert kit.http("token", token="s3cret-token").get_json("/api/session")["tokenRequired"] is True
    assert kit.http("token", token="wrong").get("/api/overview")[0] == 401
    code, headers, _ = anon.get("/?token=s3cret-token")            # ?token= once sets the cookie
    port = urllib.parse.urlsplit(anon.base).port
    assert code == 200 and {c.name for c in anon.jar} >= {f"rmqd_token_{port}", f"rmqd_csrf_{port}"}
    assert anon.get_json("/api/overview")["brokers"]


def test_loopback_console_refuses_foreign_host_names(kit):
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 reaches the port, but
    its requests carry Host: evil.example:PORT and are refused; loopback names are served."""
    port = kit.eps["rw"].port
    web = kit.http()
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", f"localhost.evil.example:{port}"):
        for path in ("/api/overview", "/", "/healthz"):
            code, _, body = web.get(path, headers={"Host": host})
            assert code == 403 and "DNS rebinding" in json.loads(body)["error"], (host, path)
        code, _, _ = web.post("/api/topics", {"topic": "RebindTopic"}, headers={"Host": host})
        assert code == 403
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        assert web.get("/api/session", headers={"Host": host})[0] == 200, host
    assert kit.server.broker.topic_config_manager.get("RebindTopic") is None
    # a console that needs a token checks the token instead (non-loopback binds answer to any name)
    assert kit.http("token", token="s3cret-token").get("/api/session", headers={"Host": "console.example"})[0] == 200


def test_non_loopback_bind_requires_a_token():
    from rmqd.console.endpoint import ConsoleEndpoint
    assert ConsoleEndpoint("0.0.0.0", 0).token
    assert ConsoleEndpoint("10.1.2.3", 0, token="given").token == "given"
    assert ConsoleEndpoint("127.0.0.1", 0).token is None and ConsoleEndpoint("::1", 0).token is None


# ------------------------------------------------------------------ the remote view (rmqd console -n)
def test_remote_view_reads_the_same_cluster(kit):
    ep = kit.remote_console()
    remote = Http(ep.url)
    assert remote.get_json("/api/session")["mode"] == "remote"
    assert remote.get_json("/api/overview")["brokers"][0]["addr"] == kit.broker_addr
    assert [r["topic"] for r in remote.get_json("/api/topics?q=consoletop")["items"]] == [TOPIC]
    local_t, remote_t = kit.http().get_json(f"/api/topics/{TOPIC}"), remote.get_json(f"/api/topics/{TOPIC}")
    assert [(q["queueId"], q["maxOffset"]) for q in remote_t["queues"]] == \
        [(q["queueId"], q["maxOffset"]) for q in local_t["queues"]]
    rg = remote.get_json(f"/api/groups/{GROUP}")
    assert rg["lag"] == kit.http().get_json(f"/api/groups/{GROUP}")["lag"]
    assert remote.get_json(f"/api/groups?q={GROUP}")["items"][0]["lag"] == rg["lag"]
    r = remote.post_json("/api/topics", {"topic": "RemoteMade", "readQueueNums": 1, "writeQueueNums": 1})
    assert r["brokers"] == [kit.broker_addr]
    assert kit.server.broker.topic_config_manager.get("RemoteMade") is not None


def test_a_taken_default_port_is_a_warning_not_a_failure(kit):
    """`rmqd serve` without --console-port: 8080 taken -> the broker runs on, without a console."""
    from rmqd.console.endpoint import ConsoleEndpoint
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        ep = ConsoleEndpoint("127.0.0.1", blocker.getsockname()[1], optional=True)
        kit.server.call(ep.start(kit.server.services))
        assert ep.failed and "console not started" in ep.describe()[0]
        assert ep.ready_parts() == ["console off (port taken)"]
        kit.server.call(ep.close())
        strict = ConsoleEndpoint("127.0.0.1", blocker.getsockname()[1])
        with pytest.raises(OSError):
            kit.server.call(strict.start(kit.server.services))
        kit.server.call(strict.close())


def test_create_group_delete_method_and_search_cancel(web, kit):
    assert web.post_json("/api/groups", {"group": "HttpGroup", "retryMaxTimes": 3}) == {"group": "HttpGroup"}
    g = web.get_json("/api/groups/HttpGroup")
    assert g["config"]["retryMaxTimes"] == 3 and g["lag"] == 0
    assert web.post("/api/groups", {"group": ""})[0] == 400
    web.post_json("/api/topics", {"topic": "DeleteMethodTopic", "readQueueNums": 1, "writeQueueNums": 1})
    code, _, _ = web.request("DELETE", "/api/topics/DeleteMethodTopic", None, {"X-CSRF-Token": web.csrf()})
    assert code == 200
    web.get_json("/api/topics/DeleteMethodTopic", status=404)
    job = web.get_json(f"/api/search?topic={TOPIC}&q=x&max=100000")
    cancelled = web.post_json(f"/api/search/{job['id']}/cancel", {})
    assert cancelled["cancelled"] is True
    done = wait_until(lambda: (lambda j: j if j["done"] else None)(web.get_json(f"/api/search/{job['id']}")), 10)
    assert done["cancelled"] is True


def test_lag_trend_samples_agree_with_the_group_page(web, kit):
    lag = web.get_json(f"/api/groups/{GROUP}")["lag"]
    wait_until(lambda: web.get_json(f"/api/groups/{GROUP}/lag-history")["samples"][-1]["lag"] == lag, 5,
               what="a sample equal to the page's lag")
