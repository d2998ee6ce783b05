"""Lite Mode and priority at the gRPC endpoint in-process (raw stubs): every refusal code the 5.x proxy
gives for the new fields and RPCs, NotifyUnsubscribeLite on Exclusive eviction, OffsetOption, routes."""
from __future__ import annotations

import queue
import threading
import time

import orjson
import pytest

from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

from tests.grpc.test_grpc_endpoint import Grpc, receive_req

C = d.Code


def md(cid="lite-test"):
    return [("x-mq-client-id", cid), ("x-mq-language", "JAVA")]


def admin(server, code, ext=None, body=None):
    c = BlockingClient(server.broker_addr)
    try:
        r = c.invoke(new_request(code, ext, body), 5)
    finally:
        c.close()
    assert r.code == 0, r.remark


def topic(server, name, kind, queues=4, extra=""):
    admin(server, 17, {"topic": name, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                       "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                       "topicSysFlag": "0", "order": "false", "attributes": f"+message.type={kind}{extra}"})


def group(server, name, **attrs):
    admin(server, 200, body=orjson.dumps({"groupName": name, "retryMaxTimes": 16,
                                          "attributes": {"+" + k: str(v) for k, v in attrs.items()}}))


@pytest.fixture(scope="module")
def g():
    x = Grpc({"autoCreateSubscriptionGroup": "false", "minInvisibleTimeMillsForRecv": "1000",
              "maxSyncLiteSubscriptionRate": "50", "maxLiteSubscriptionCount": "40"})
    topic(x.server, "LT", "LITE")
    topic(x.server, "PT", "PRIORITY", queues=8)
    topic(x.server, "NT", "NORMAL")
    group(x.server, "LG", **{"lite.bind.topic": "LT"})
    group(x.server, "XG", **{"lite.bind.topic": "LT", "lite.sub.model": "Exclusive"})
    group(x.server, "PG")
    group(x.server, "QG", **{"lite.bind.topic": "LT", "lite.sub.client.quota": "1"})
    yield x
    x.close()


def message(topic_name, mid, **sp):
    m = d.Message(topic=d.Resource(name=topic_name), body=b"b",
                  system_properties=d.SystemProperties(message_id=mid, message_type=sp.pop("message_type", d.NORMAL),
                                                       **sp))
    return m


def send_status(g, m):
    """A refused message fails the whole request (the proxy answers its status only, no entries)."""
    r = g.stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md())
    st = r.entries[0].status if r.entries else r.status
    return st.code, st.message


def test_send_refusals_for_the_new_fields(g):
    ts = d.SystemProperties().delivery_timestamp.__class__(seconds=int(time.time()) + 60)
    # the proxy's type check (5.5.0): a message's type is TRANSACTION > DELAY > FIFO > PRIORITY > LITE > NORMAL,
    # and must be its topic's
    cases = [
        (message("PT", "a1", priority=-1, message_type=d.PRIORITY), C.INTERNAL_SERVER_ERROR),
        (message("PT", "a2", priority=3, message_group="g", message_type=d.PRIORITY),
         C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("PT", "a3", priority=3, delivery_timestamp=ts, message_type=d.PRIORITY),
         C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("PT", "a4", priority=3, lite_topic="x", message_type=d.PRIORITY), C.OK),       # a PRIORITY message
        (message("PT", "a5", priority=3, message_type=d.TRANSACTION), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("NT", "a6", priority=3, message_type=d.PRIORITY), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("LT", "a7", lite_topic="", message_type=d.LITE), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("LT", "a8", lite_topic="a b", message_type=d.LITE), C.ILLEGAL_LITE_TOPIC),
        (message("LT", "a9", lite_topic="x" * 65, message_type=d.LITE), C.ILLEGAL_LITE_TOPIC),
        (message("LT", "b1", lite_topic="ok", message_group="g", message_type=d.LITE),
         C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("NT", "b2", lite_topic="ok", message_type=d.LITE), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message("LT", "b3"), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),          # no lite topic on a LITE topic
        (message("PT", "b4", priority=2 ** 31 - 1, message_type=d.PRIORITY), C.OK),   # clamped to the top queue
        (message("PT", "b5"), C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),   # no priority: NORMAL (enableTopicMessageTypeCheck)
        (message("LT", "b6", lite_topic="x" * 64, message_type=d.LITE), C.OK),
    ]
    for m, want in cases:
        code, text = send_status(g, m)
        assert code == want, (m.system_properties, code, text)
    assert "expected type is NORMAL, but actual type is PRIORITY" in send_status(g, cases[5][0])[1]


def test_routes_announce_the_types(g):
    for name, want in (("LT", [d.LITE]), ("PT", [d.PRIORITY]), ("NT", [d.NORMAL])):
        r = g.stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=name)), metadata=md())
        assert list(r.message_queues[0].accept_message_types) == want


def sync(g, action, names, grp="LG", top="LT", cid="lite-test", option=None):
    req = s.SyncLiteSubscriptionRequest(action=action, topic=d.Resource(name=top), group=d.Resource(name=grp),
                                        lite_topic_set=names)
    if option is not None:
        req.offset_option.CopyFrom(option)
    r = g.stub.SyncLiteSubscription(req, metadata=md(cid))
    return r.status.code, r.status.message


def test_sync_refusals(g):
    assert sync(g, d.PARTIAL_ADD, ["ok-1"])[0] == C.OK
    assert sync(g, d.PARTIAL_ADD, ["bad/name"])[0] == C.ILLEGAL_LITE_TOPIC
    assert sync(g, d.PARTIAL_ADD, [" "])[0] == C.ILLEGAL_LITE_TOPIC
    # the proxy's checks (ClientProcessor.validateLiteBindTopic): the topic must be the group's bind topic
    assert sync(g, d.PARTIAL_ADD, ["a"], top="NT")[0] == C.ILLEGAL_TOPIC           # not the bind topic
    assert sync(g, d.PARTIAL_ADD, ["a"], grp="PG") == (                             # not a lite group
        C.ILLEGAL_TOPIC, "lite group PG is expected to bind topic null, but actual is LT")
    assert sync(g, d.PARTIAL_ADD, ["a"], grp="nope") == (C.ILLEGAL_CONSUMER_GROUP, "group not found: nope")
    assert sync(g, d.PARTIAL_ADD, ["a"], top="nope")[0] == C.ILLEGAL_TOPIC
    assert sync(g, 7, ["a"])[0] == C.BAD_REQUEST                                    # unknown action
    code, text = sync(g, d.COMPLETE_ADD, [f"q{i}" for i in range(302)], grp="QG", cid="quota")   # quota 1 + 300
    assert code == C.LITE_SUBSCRIPTION_QUOTA_EXCEEDED, text
    # the broker-wide limit (maxLiteSubscriptionCount=40 here)
    assert sync(g, d.COMPLETE_ADD, [f"w{i}" for i in range(39)], cid="wide")[0] == C.OK
    code, text = sync(g, d.PARTIAL_ADD, ["w-more", "w-more2"], cid="wide2")
    assert code == C.LITE_SUBSCRIPTION_QUOTA_EXCEEDED and "maxLiteSubscriptionCount" in text
    assert sync(g, d.COMPLETE_REMOVE, [], cid="wide")[0] == C.OK
    # the PARTIAL_ADD rate (maxSyncLiteSubscriptionRate=50 here)
    codes = [sync(g, d.PARTIAL_ADD, [f"r{i}"], cid="rate")[0] for i in range(80)]
    assert C.TOO_MANY_REQUESTS in codes and codes[0] == C.OK
    assert sync(g, d.COMPLETE_REMOVE, [], cid="rate")[0] == C.OK
    time.sleep(1.05)               # a fresh second of the PARTIAL_ADD rate limit for the next tests
    assert sync(g, d.COMPLETE_REMOVE, [], cid="lite-test")[0] == C.OK


def test_bad_lite_topic_on_ack_and_change_invisible(g):
    handle = f"1 {int(time.time() * 1000)} 60000 0 0 b 0 0 99"         # not expired: the lite topic is checked
    r = g.stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="LG"), topic=d.Resource(name="LT"), entries=[
        s.AckMessageEntry(message_id="m", receipt_handle=handle, lite_topic="bad name")]),
        metadata=md())
    assert r.entries[0].status.code == C.ILLEGAL_LITE_TOPIC
    r = g.stub.ChangeInvisibleDuration(s.ChangeInvisibleDurationRequest(
        group=d.Resource(name="LG"), topic=d.Resource(name="LT"), receipt_handle=handle,
        lite_topic="bad name", message_id="m"), metadata=md())
    assert r.status.code == C.ILLEGAL_LITE_TOPIC


def telemetry(g, cid, group_name):
    """A Telemetry stream of a lite push consumer; returns (commands queue, closer)."""
    out: queue.Queue = queue.Queue()
    done = threading.Event()
    settings = d.Settings(client_type=d.LITE_PUSH_CONSUMER, subscription=d.Subscription(
        group=d.Resource(name=group_name), subscriptions=[d.SubscriptionEntry(topic=d.Resource(name="LT"))]))

    def requests():
        yield s.TelemetryCommand(settings=settings)
        done.wait(20)

    call = g.stub.Telemetry(requests(), metadata=md(cid))

    def pump():
        try:
            for cmd in call:
                out.put(cmd)
        except Exception:
            pass
    threading.Thread(target=pump, daemon=True).start()
    return out, lambda: (done.set(), call.cancel())


def test_exclusive_eviction_notifies_and_settings_carry_the_quota(g):
    q1, close1 = telemetry(g, "ex-1", "XG")
    q2, close2 = telemetry(g, "ex-2", "XG")
    try:
        st = q1.get(timeout=5).settings
        assert st.subscription.lite_subscription_quota == 2000 and st.subscription.max_lite_topic_size == 64
        assert sync(g, d.PARTIAL_ADD, ["room"], grp="XG", cid="ex-1")[0] == C.OK
        assert sync(g, d.PARTIAL_ADD, ["room"], grp="XG", cid="ex-2")[0] == C.OK      # evicts ex-1
        cmd = q1.get(timeout=5)
        assert cmd.notify_unsubscribe_lite_command.lite_topic == "room"
        mgr = g.server.broker.lite_priority.manager
        assert mgr.subscribers_of("LT", "room") == {"XG": ["ex-2"]}
    finally:
        close1()
        close2()


def test_offset_options(g):
    cid = "offsets"
    for i in range(5):
        assert send_status(g, message("LT", f"o{i}", lite_topic="offs", message_type=d.LITE))[0] == C.OK
    mgr = g.server.broker.lite_priority.manager
    offsets = g.server.broker.consumer_offset_manager
    assert sync(g, d.PARTIAL_ADD, ["offs"], cid=cid, option=d.OffsetOption(policy=d.OffsetOption.MAX))[0] == C.OK
    assert offsets.query_offset("LG", "%LMQ%$LT$offs", 0) == 5
    assert sync(g, d.PARTIAL_ADD, ["offs"], cid=cid, option=d.OffsetOption(tail_n=2))[0] == C.OK
    assert offsets.query_offset("LG", "%LMQ%$LT$offs", 0) == 3
    got = list(g.stub.ReceiveMessage(receive_req("LT", "LG", batch=8, poll_s=2), metadata=md(cid)))
    bodies = [r.message.system_properties.message_id for r in got if r.HasField("message")]
    assert bodies == ["o3", "o4"]
    assert all(r.message.system_properties.lite_topic == "offs" for r in got if r.HasField("message"))
    assert sync(g, d.PARTIAL_ADD, ["offs"], cid=cid, option=d.OffsetOption(offset=1))[0] == C.OK
    assert offsets.query_offset("LG", "%LMQ%$LT$offs", 0) == 1
    assert sync(g, d.PARTIAL_ADD, ["offs"], cid=cid, option=d.OffsetOption(timestamp=1))[0] == C.OK   # ignored
    assert offsets.query_offset("LG", "%LMQ%$LT$offs", 0) == 1
    assert mgr.client_info(cid)["liteTopicSet"] == ["offs"]
    assert sync(g, d.COMPLETE_REMOVE, [], cid=cid)[0] == C.OK and mgr.client_info(cid) is None
