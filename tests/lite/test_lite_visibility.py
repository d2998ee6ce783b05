"""Lite topics, subscriptions and backlog, and priority backlog per level, as rmqd admin, the console's
feature pages and /metrics show them."""
from __future__ import annotations

import json
import time

import orjson

from rmqd.admin.main import main as admin_main
from rmqd.console import extensions, lite_pages
from rmqd.metrics.collector import collect
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import encode_properties
from rmqd.testing import EmbeddedServer


def send(c, topic, props, body=b"x"):
    r = c.invoke(new_request(10, {"producerGroup": "p", "topic": topic, "defaultTopic": "TBW102",
                                  "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                                  "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                                  "properties": encode_properties(props)}, body), 5)
    assert r.code == 0, r.remark
    return r


def test_admin_console_and_metrics_show_lite_and_priority(capsys):
    s = EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1"}).start()
    c = BlockingClient(s.broker_addr)
    try:
        for name, kind, q in (("VL", "LITE", 2), ("VP", "PRIORITY", 4)):
            assert c.invoke(new_request(17, {"topic": name, "readQueueNums": str(q), "writeQueueNums": str(q),
                                             "perm": "6", "attributes": f"+message.type={kind}"}), 5).code == 0
        assert admin_main(["updateSubGroup", "-n", s.namesrv_addr, "-b", s.broker_addr, "-g", "VG",
                           "--attributes", "+lite.bind.topic=VL"]) == 0
        assert s.broker.subscription_group_manager.find("VG").attributes == {"lite.bind.topic": "VL"}
        for i in range(6):
            send(c, "VL", {"__LITE_TOPIC": "chat-1" if i < 4 else "chat-2", "UNIQ_KEY": f"l{i}"})
            r = send(c, "VP", {"_SYS_MSG_PRIORITY_": str(i % 3), "UNIQ_KEY": f"p{i}"})
            assert r.ext_fields["queueId"] == str(i % 3)            # the priority is the queue
        body = {"subscriptionSet": [{"action": "PARTIAL_ADD", "clientId": "vc", "group": "VG", "topic": "VL",
                                     "liteTopicSet": ["chat-1", "chat-2"]}]}
        assert c.invoke(new_request(200071, None, orjson.dumps(body)), 5).code == 0
        pop = c.invoke(new_request(200070, {"clientId": "vc", "consumerGroup": "VG", "topic": "VL", "maxMsgNum": "1",
                                            "invisibleTime": "60000", "pollTime": "0",
                                            "bornTime": str(int(time.time() * 1000))}), 5)
        assert pop.code == 0
        offsets = s.broker.consumer_offset_manager
        offsets.commit_offset("", "VPG", "VP", 0, 1)           # a group that consumed one message of level 0
        capsys.readouterr()
        assert admin_main(["getLiteTopicInfo", "-n", s.namesrv_addr, "-b", s.broker_addr, "-p", "VL",
                           "-l", "chat-1"]) == 0
        out = capsys.readouterr().out
        info = json.loads(out[out.index("{"):])
        assert info["topicOffset"]["maxOffset"] == 4 and info["subscriber"] == [{"clientId": "vc", "group": "VG"}]
        assert admin_main(["getPriorityBacklog", "-n", s.namesrv_addr, "-b", s.broker_addr, "-t", "VP",
                           "-g", "VPG"]) == 0
        out = capsys.readouterr().out
        assert "\n2        2\n" in out and "\n0        1\n" in out
        lite_pages.register()
        pages = extensions.local_extensions(s.broker)
        lite = pages["lite"]
        assert lite["summary"]["lite topics"] == 2 and lite["summary"]["subscriptions"] == 2
        assert lite["tables"][0]["rows"] == [["VL", 2, 6]]
        # chat-1: 1 of 4 handed out, none acked (5.5: the offset moves on ack); chat-2: no offset yet
        assert lite["tables"][1]["rows"] == [["VL", "VG", 4]]
        prio = {(r[0], r[1], r[2]): r[3] for r in pages["priority"]["tables"][0]["rows"]}
        assert prio[("VP", "VPG", 0)] == 1 and prio[("VP", "VPG", 2)] == 2
        text = collect(s.broker)
        lag = [line for line in text.splitlines() if line.startswith("rocketmq_consumer_lag_messages")
               and 'topic="VL"' in line and 'consumer_group="VG"' in line]
        assert lag and lag[0].endswith(" 4"), lag
        assert 'message_type="priority"' in text and 'message_type="lite"' in text
    finally:
        c.close()
        s.stop()
        s.cleanup()
