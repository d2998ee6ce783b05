"""Request builders and fixture readers shared by the broker tests."""
from __future__ import annotations

import os
import struct

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import FrameReader, RemotingCommand, new_request
from rmqd.store.message import decode_messages
from tests.kit import clients

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "cpp_frames")


def fixture_frame(name: str) -> tuple[bytes, RemotingCommand]:
    """Raw bytes of a captured C++ frame and its decoded command."""
    path = next(os.path.join(FIXTURES, f) for f in sorted(os.listdir(FIXTURES)) if f.startswith(name))
    data = open(path, "rb").read()
    (cmd,) = FrameReader().feed(data)
    return data, cmd


def invoke_raw(client: BlockingClient, name: str, timeout: float = 5.0,
               replace: tuple[bytes, bytes] | None = None) -> RemotingCommand:
    """Send a captured frame as is (or with a same-length byte patch) and wait for the answer."""
    data, cmd = fixture_frame(name)
    if replace is not None:
        assert len(replace[0]) == len(replace[1]) and replace[0] in data
        data = data.replace(*replace)
    client.send_raw(data)
    return client.wait_response(cmd.opaque, timeout)


def send_v2(client: BlockingClient, topic: str, body: bytes = b"hello", queue_id: int = 0, properties: str = "",
            code: int = 310, **fields: str) -> RemotingCommand:
    """tests/kit/clients.py's send with the born time of the captured frames; ``fields``: raw header entries."""
    return clients.send_v2(client, topic, body, queue_id, properties, code=code, born_ms=1700000000000,
                           fields=fields)


def batch_body(messages: list[tuple[bytes, str]]) -> bytes:
    out = b""
    for body, props in messages:
        p = props.encode()
        total = 20 + len(body) + 2 + len(p)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
    return out


def heartbeat(client: BlockingClient, client_id: str, group: str, subs: list[dict],
              model: str = "CLUSTERING", producer_group: str | None = None) -> RemotingCommand:
    import orjson
    body = {"clientID": client_id, "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
        "groupName": group, "messageModel": model, "subscriptionDataSet": subs, "unitMode": False}],
        "producerDataSet": [{"groupName": producer_group}] if producer_group else []}
    return client.invoke(new_request(34, None, orjson.dumps(body)))


def sub(topic: str, expr: str = "*", etype: str = "TAG", version: int = 1) -> dict:
    from rmqd.filter import build_subscription_data
    return build_subscription_data(topic, expr, etype, version)


def pull(client: BlockingClient, topic: str, group: str = "CG", queue_id: int = 0, offset: int = 0,
         sys_flag: int = 0, subscription: str | None = None, expression_type: str | None = None,
         suspend_ms: int = 1000, commit_offset: int = 0, max_nums: int = 32, sub_version: int = 0,
         timeout: float = 5.0) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag), "commitOffset": str(commit_offset),
           "suspendTimeoutMillis": str(suspend_ms), "subVersion": str(sub_version)}
    if subscription is not None:
        ext["subscription"] = subscription
    if expression_type is not None:
        ext["expressionType"] = expression_type
    return client.invoke(new_request(11, ext), timeout)


def messages(resp: RemotingCommand):
    return decode_messages(resp.body_bytes()) if resp.body is not None else []
