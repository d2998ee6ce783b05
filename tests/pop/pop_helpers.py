"""Raw remoting helpers for the POP protocol tests (Java header names, blocking client)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import orjson

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.store.message import decode_messages

POP, ACK, PEEK, CHANGE, NOTIFICATION, POLLING_INFO, BATCH_ACK = 200050, 200051, 200052, 200053, 200054, 200055, 200151


def create_topic(c: BlockingClient, topic: str, queues: int = 1) -> None:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
           "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    resp = c.invoke(new_request(17, ext), 5)
    assert resp.code == 0, resp.remark


def create_group(c: BlockingClient, group: str, retry_max_times: int = 16, orderly: bool = False) -> None:
    body = orjson.dumps({"groupName": group, "consumeMessageOrderly": orderly, "consumeEnable": True, "consumeFromMinEnable": True,
                         "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": retry_max_times,
                         "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True})
    resp = c.invoke(new_request(200, None, body), 5)
    assert resp.code == 0, resp.remark


def send(c: BlockingClient, topic: str, body: bytes, tags: str = "", queue_id: int = 0) -> str:
    uniq = uuid.uuid4().hex.upper()
    props = f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true" + (f"\x02TAGS\x01{tags}" if tags else "")
    ext = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
           "queueId": str(queue_id), "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
           "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
    resp = c.invoke(new_request(10, ext, body), 5)
    assert resp.code == 0, resp.remark
    return uniq


def pop(c: BlockingClient, topic: str, group: str, queue_id: int = -1, max_nums: int = 32, invisible: int = 60000,
        poll: int = 0, init_mode: int = 0, exp: str | None = None, timeout: float = 10,
        order: bool = False) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "maxMsgNums": str(max_nums),
           "invisibleTime": str(invisible), "pollTime": str(poll), "bornTime": str(int(time.time() * 1000)),
           "initMode": str(init_mode)}
    if order:
        ext["order"] = "true"
    if exp is not None:
        ext.update(expType="TAG", exp=exp)
    return c.invoke(new_request(POP, ext), timeout)


def popped(resp: RemotingCommand):
    return decode_messages(resp.body_bytes()) if resp.body is not None else []


def extra_info(resp: RemotingCommand, msg, broker_name: str = "broker-a") -> str:
    """The client's POP_CK for one popped message (Java MQClientAPIImpl.processPopResponse)."""
    e = resp.ext_fields
    flag = "1" if msg.topic.startswith("%RETRY%") else "0"
    starts = {(s.split(" ")[0], int(s.split(" ")[1])): int(s.split(" ")[2]) for s in e["startOffsetInfo"].split(";")}
    ck = starts[(flag, msg.queue_id)]
    return (f"{ck} {e['popTime']} {e['invisibleTime']} {e['reviveQid']} {flag} {broker_name} {msg.queue_id} "
            f"{msg.queue_offset}")


def ack(c: BlockingClient, topic: str, group: str, extra: str, offset: int, queue_id: int = 0) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "extraInfo": extra, "offset": str(offset)}
    return c.invoke(new_request(ACK, ext), 5)


def change_invisible(c: BlockingClient, topic: str, group: str, extra: str, offset: int, invisible: int,
                     queue_id: int = 0) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "extraInfo": extra,
           "offset": str(offset), "invisibleTime": str(invisible)}
    return c.invoke(new_request(CHANGE, ext), 5)


def wait_until(cond, timeout: float = 10.0, interval: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(interval)
    return cond()


SERVE_READY = re.compile(r"broker (127\.0\.0\.1:\d+)")


def start_serve(store: str, timeout: float = 60.0) -> tuple[subprocess.Popen, str]:
    """`rmqd serve` on free ports over ``store`` in its own session; (process, broker address) once it is ready."""
    proc = subprocess.Popen([sys.executable, "-m", "rmqd.cli", "--log-level", "WARNING", "serve", "--namesrv-port", "0",
                             "--broker-port", "0", "--console-port", "0", "--grpc-port", "0", "--store-dir", store],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("rmqd ready:"):
            return proc, SERVE_READY.search(line).group(1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("rmqd did not start")
