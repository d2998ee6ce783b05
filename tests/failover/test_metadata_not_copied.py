"""A topic or group that the in-sync replicas did not copy within slaveTimeout is never answered SUCCESS.

Controller mode answers UPDATE_AND_CREATE_TOPIC / UPDATE_AND_CREATE_SUBSCRIPTIONGROUP once every SyncStateSet
member holds the new table (rocketmq#9804, rocketmq-helm#33). When they do not within slaveTimeout, a success
would be one the next failover can take back: the broker answers SYSTEM_ERROR and the caller retries (the update
is idempotent). The wait itself is driven by real groups in test_failover.py; here it is forced to time out.
"""
from __future__ import annotations

import orjson

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.testing.embedded import EmbeddedServer


def test_not_copied_updates_answer_system_error_and_a_copied_retry_succeeds(tmp_path, monkeypatch):
    with EmbeddedServer(store_dir=str(tmp_path)) as server:
        replication = server.broker.replication
        copied = {"topic": False, "group": False}
        monkeypatch.setattr(replication, "wait_topics_replicated", lambda _t: copied["topic"])
        monkeypatch.setattr(replication, "wait_groups_replicated", lambda _t: copied["group"])
        client = BlockingClient(server.broker_addr)
        try:
            topic_ext = {"topic": "NotCopied", "defaultTopic": "TBW102", "readQueueNums": "4",
                         "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
                         "topicSysFlag": "0", "order": "false"}
            r = client.invoke(new_request(RequestCode.UPDATE_AND_CREATE_TOPIC, topic_ext), 5.0)
            assert r.code == ResponseCode.SYSTEM_ERROR and "not copied" in r.remark, (r.code, r.remark)
            group = orjson.dumps({"groupName": "GID_NotCopied", "consumeEnable": True,
                                  "retryQueueNums": 1, "retryMaxTimes": 16})
            r = client.invoke(new_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group), 5.0)
            assert r.code == ResponseCode.SYSTEM_ERROR and "not copied" in r.remark, (r.code, r.remark)

            copied.update(topic=True, group=True)          # the replicas caught up: the retry is a success
            r = client.invoke(new_request(RequestCode.UPDATE_AND_CREATE_TOPIC, topic_ext), 5.0)
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
            r = client.invoke(new_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group), 5.0)
            assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
            assert server.broker.topic_config_manager.get("NotCopied") is not None
            assert "GID_NotCopied" in server.broker.subscription_group_manager.table
        finally:
            client.close()
