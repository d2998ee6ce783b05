"""``rmqd admin`` sub-commands of messages: query by id, key, unique key or offset, print, send, consume, the
consume queue, send RT.

Each ``fn(client, args)`` talks to the servers and prints like mqadmin; ``SPEC`` is their part of the
command table (:mod:`rmqd.admin.main`)."""
from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Iterator, Optional

from rmqd.admin.bodies import ConsumeQueueBody
from rmqd.admin.client import AdminClient, AdminError, broker_addr_of
from rmqd.admin.options import GROUP, SpecTable, TOPIC, human_time, is_true, parse_time
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.store.message import decode_messages, decode_offset_msg_id

if TYPE_CHECKING:
    from rmqd.store.message import StoredMessage


def query_cq(c: AdminClient, a: argparse.Namespace) -> None:
    """mqadmin queryCq: the units of one ConsumeQueue (QUERY_CONSUME_QUEUE)."""
    addr = a.broker or next(iter(c.route_masters(a.topic).values()), None)
    if addr is None:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, "No topic route data!")
    ext = {"topic": a.topic, "queueId": str(a.queue), "index": str(a.index), "count": str(a.count)}
    if a.consumer:
        ext["consumerGroup"] = a.consumer
    body = c.answer(ConsumeQueueBody, addr, RequestCode.QUERY_CONSUME_QUEUE, ext)
    rule = "======================================"
    if body.get("subscriptionData") is not None:
        print(f"Subscription data: \n{json.dumps(body['subscriptionData'], indent=4)}\n{rule}")
    if body.get("filterData") is not None:
        print(f"Filter data: \n{body['filterData']}\n{rule}")
    print(f"Queue data: \nmax: {body.get('maxQueueIndex', 0)}, min: {body.get('minQueueIndex', 0)}\n{rule}")
    for i, u in enumerate(body.get("queueData") or [], start=a.index):
        print(f"idx: {i}\nConsumeQueueData{{physicOffset={u['physicOffset']}, physicSize={u['physicSize']}, "
              f"tagsCode={u['tagsCode']}, extendDataJson='{u.get('extendDataJson')}', bitMap='{u.get('bitMap')}', "
              f"eval={'true' if u.get('eval') else 'false'}, msg='{u.get('msg')}'}}\n{rule}".replace("'None'", "'null'"))


def _print_detail(m: StoredMessage, body: bool = True) -> None:
    rows = [("Topic:", m.topic), ("Tags:", f"[{m.properties.get('TAGS')}]"), ("Keys:", f"[{m.properties.get('KEYS')}]"),
            ("Queue ID:", m.queue_id), ("Queue Offset:", m.queue_offset), ("CommitLog Offset:", m.commit_log_offset),
            ("Reconsume Times:", m.reconsume_times), ("Born Timestamp:", human_time(m.born_timestamp)),
            ("Store Timestamp:", human_time(m.store_timestamp)),
            ("Born Host:", "%s:%d" % (m.born_host[0], m.born_host[1])),
            ("Store Host:", "%s:%d" % (m.store_host[0], m.store_host[1])), ("System Flag:", m.sys_flag),
            ("Properties:", m.properties), ("Message Body Path:", "")]
    print(f"OffsetID: {m.msg_id}")
    for k, v in rows:
        print("%-20s %s" % (k, v))
    if body:
        print("%-20s %s" % ("Message Body:", m.body.decode("utf-8", "replace")))


# The StoredMessages found. Left as a bare list (its items Any to callers): rmqd/console/remote_messages.py formats
# ``tuple(m.store_host)`` with %d, which checks only while the items are Any; -> list[StoredMessage] once it does not.
def query_messages(c: AdminClient, topic: str, key: str, unique: bool,
                   max_num: int = 64) -> list:  # type: ignore[type-arg]  # see the comment above
    found: list[StoredMessage] = []
    for addr in c.route_masters(topic).values():
        ext: dict[str, object] = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": 0,
               "endTimestamp": 2 ** 63 - 1}
        if unique:
            ext["_UNIQUE_KEY_QUERY"] = "true"
        resp = c.call(addr, RequestCode.QUERY_MESSAGE, ext, ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code == ResponseCode.SUCCESS and resp.body is not None:
            found += decode_messages(resp.body_bytes())
    return found


def query_msg_by_id(c: AdminClient, a: argparse.Namespace) -> None:
    for msg_id in a.msgId.split(","):
        msg_id = msg_id.strip()
        ip, port, offset = decode_offset_msg_id(msg_id)
        resp = c.call(f"{ip}:{port}", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        for m in decode_messages(resp.body_bytes()):
            _print_detail(m)


def query_msg_by_key(c: AdminClient, a: argparse.Namespace) -> None:
    msgs = query_messages(c, a.topic, a.msgKey, False)
    print("%-50s %4s %40s" % ("#Message ID", "#QID", "#Offset"))
    for m in msgs:
        print("%-50s %4d %40d" % (m.properties.get("UNIQ_KEY", m.msg_id), m.queue_id, m.queue_offset))


def query_msg_by_unique_key(c: AdminClient, a: argparse.Namespace) -> None:
    msgs = [m for m in query_messages(c, a.topic, a.msgId, True) if m.properties.get("UNIQ_KEY") == a.msgId]
    if not msgs:
        raise AdminError(ResponseCode.QUERY_NOT_FOUND, f"query message by unique key {a.msgId} found nothing")
    for m in msgs:
        _print_detail(m)


def query_msg_by_offset(c: AdminClient, a: argparse.Namespace) -> None:
    addr = c.route_masters(a.topic).get(a.brokerName)
    if not addr:
        raise AdminError(-1, f"broker {a.brokerName} not in the route of {a.topic}")
    code, _, msgs = c.pull(addr, a.topic, a.queueId, a.offset, 1)
    if not msgs:
        raise AdminError(code, "no message at that offset")
    _print_detail(msgs[0])


def _scan_queue(c: AdminClient, addr: str, topic: str, qid: int, sub: str, begin: Optional[int],
                end: Optional[int], start: Optional[int] = None, limit: Optional[int] = None,
                group: str = "TOOLS_CONSUMER") -> Iterator[StoredMessage]:
    lo = c.min_offset(addr, topic, qid) if start is None else start
    if begin is not None:
        lo = max(lo, c.search_offset(addr, topic, qid, begin))
    hi = c.max_offset(addr, topic, qid)
    if end is not None:
        hi = min(hi, c.search_offset(addr, topic, qid, end))
    off, n = lo, 0
    while off < hi and (limit is None or n < limit):
        code, nxt, msgs = c.pull(addr, topic, qid, off, 32, group, sub)
        for m in msgs:
            if m.queue_offset >= hi or (limit is not None and n >= limit):
                return
            n += 1
            yield m
        if nxt <= off:
            return
        off = nxt


def print_msg(c: AdminClient, a: argparse.Namespace) -> None:
    body = is_true(a.printBody)
    for name, addr in sorted(c.route_masters(a.topic).items()):
        qd = next(q for q in c.route(a.topic)["queueDatas"] if q["brokerName"] == name)
        for qid in range(qd["readQueueNums"]):
            lo, hi = c.min_offset(addr, a.topic, qid), c.max_offset(addr, a.topic, qid)
            print(f"minOffset={lo}, maxOffset={hi}, MessageQueue [topic={a.topic}, brokerName={name}, queueId={qid}]")
            for m in _scan_queue(c, addr, a.topic, qid, a.subExpression, parse_time(a.beginTimestamp),
                                 parse_time(a.endTimestamp)):
                print(f"MSGID: {m.properties.get('UNIQ_KEY', m.msg_id)} {m.topic} {m.queue_id} {m.queue_offset} "
                      f"BODY: {m.body.decode('utf-8', 'replace') if body else 'NOT PRINT BODY'}")


def print_msg_by_queue(c: AdminClient, a: argparse.Namespace) -> None:
    addr = c.route_masters(a.topic).get(a.brokerName)
    if not addr:
        raise AdminError(-1, f"broker {a.brokerName} not in the route of {a.topic}")
    tags: dict[str, int] = {}
    for m in _scan_queue(c, addr, a.topic, a.queueId, a.subExpression, parse_time(a.beginTimestamp),
                         parse_time(a.endTimestamp)):
        tags[m.properties.get("TAGS", "")] = tags.get(m.properties.get("TAGS", ""), 0) + 1
        if is_true(a.print):
            body = m.body.decode("utf-8", "replace") if is_true(a.printBody) else "NOT PRINT BODY"
            print(f"MSGID: {m.properties.get('UNIQ_KEY', m.msg_id)} {m.topic} {m.queue_id} {m.queue_offset} "
                  f"BODY: {body}")
    if is_true(a.calculate):
        for tag, n in sorted(tags.items(), key=lambda kv: -kv[1]):
            print("%-32s %d" % (tag, n))


def _pick_queue(c: AdminClient, topic: str, broker: Optional[str], qid: Optional[int]) -> tuple[str, str, int]:
    route = c.route(topic)
    masters = {bd["brokerName"]: broker_addr_of(bd, 0) for bd in route.get("brokerDatas", [])}
    qds = [q for q in route.get("queueDatas", []) if q["perm"] & 2 and (not broker or q["brokerName"] == broker)]
    if not qds:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, f"no writable queue of {topic}")
    qd = sorted(qds, key=lambda q: q["brokerName"])[0]
    addr = masters[qd["brokerName"]]
    if addr is None:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, f"no master of {qd['brokerName']} in the route of {topic}")
    return qd["brokerName"], addr, (qid if qid is not None else
                                                         int(time.time() * 1000) % qd["writeQueueNums"])


def send_message(c: AdminClient, a: argparse.Namespace) -> None:
    name, addr, qid = _pick_queue(c, a.topic, a.broker, a.qid)
    resp = c.send(addr, a.topic, qid, a.body.encode("utf-8"), a.tags, a.key)
    print("%-32s  %-4s  %-20s    %s" % ("#Broker Name", "#QID", "#Send Result", "#MsgId"))
    ext = resp.ext_fields or {}
    print("%-32s  %-4s  %-20s    %s" % (name, ext.get("queueId"), "SEND_OK", ext.get("msgId")))


def consume_message(c: AdminClient, a: argparse.Namespace) -> None:
    group = a.consumerGroup or "TOOLS_CONSUMER"
    masters = c.route_masters(a.topic)
    route = c.route(a.topic)
    n = 0
    for qd in sorted(route.get("queueDatas", []), key=lambda q: q["brokerName"]):
        if a.brokerName and qd["brokerName"] != a.brokerName:
            continue
        addr = masters[qd["brokerName"]]
        qids = [a.queueId] if a.queueId is not None else range(qd["readQueueNums"])
        for qid in qids:
            for m in _scan_queue(c, addr, a.topic, qid, "*", parse_time(a.beginTimestamp),
                                 parse_time(a.endTimestamp), a.offset, a.MessageNumber - n, group):
                n += 1
                print(f"Consume ok\nMSGID: {m.properties.get('UNIQ_KEY', m.msg_id)} {m.topic} {m.queue_id} "
                      f"{m.queue_offset} BODY: {m.body.decode('utf-8', 'replace')}")
            if n >= a.MessageNumber:
                return


def check_msg_send_rt(c: AdminClient, a: argparse.Namespace) -> None:
    body = b"a" * a.size
    total = 0.0
    print("%-32s  %-4s  %-20s    %s" % ("#Broker Name", "#QID", "#Send Result", "#RT"))
    for i in range(a.amount):
        name, addr, qid = _pick_queue(c, a.topic, None, None)
        t0 = time.perf_counter()
        ok = True
        try:
            c.send(addr, a.topic, qid, body)
        except AdminError:
            ok = False
        rt = (time.perf_counter() - t0) * 1000
        if i > 0:
            total += rt
        print("%-32s  %-4s  %-20s    %.3f" % (name, qid, ok, rt))
    print("Avg RT: %.2f" % (total / max(1, a.amount - 1)))


SPEC: SpecTable = {
    "queryCq": (query_cq, "Query cq command.", [
        (TOPIC, {"required": True}), (("-q", "--queue"), {"type": int, "required": True}),
        (("-i", "--index"), {"type": int, "required": True}), (("-c", "--count"), {"type": int, "default": 10}),
        (("-b", "--broker"), {}), (("-g", "--consumer"), {})]),
    "queryMsgById": (query_msg_by_id, "Query Message by Id", [
        (("-i", "--msgId"), {"required": True}), (("-d", "--bodyFormat"), {})]),
    "queryMsgByKey": (query_msg_by_key, "Query Message by Key", [
        (TOPIC, {"required": True}), (("-k", "--msgKey"), {"required": True})]),
    "queryMsgByUniqueKey": (query_msg_by_unique_key, "Query Message by Unique key", [
        (("-i", "--msgId"), {"required": True}), (TOPIC, {"required": True}), (GROUP, {}), (("-d", "--clientId"), {})]),
    "queryMsgByOffset": (query_msg_by_offset, "Query Message by offset", [
        (TOPIC, {"required": True}), (("-b", "--brokerName"), {"required": True}),
        (("-i", "--queueId"), {"type": int, "required": True}), (("-o", "--offset"), {"type": int, "required": True})]),
    "printMsg": (print_msg, "Print Message Detail", [
        (TOPIC, {"required": True}), (("-c", "--charsetName"), {"default": "UTF-8"}),
        (("-s", "--subExpression"), {"default": "*"}), (("-b", "--beginTimestamp"), {}),
        (("-e", "--endTimestamp"), {}), (("-d", "--printBody"), {"default": "true"})]),
    "printMsgByQueue": (print_msg_by_queue, "Print Message Detail by queueId", [
        (TOPIC, {"required": True}), (("-a", "--brokerName"), {"required": True}),
        (("-i", "--queueId"), {"type": int, "required": True}), (("-c", "--charsetName"), {"default": "UTF-8"}),
        (("-s", "--subExpression"), {"default": "*"}), (("-b", "--beginTimestamp"), {}),
        (("-e", "--endTimestamp"), {}), (("-p", "--print"), {"default": "false"}),
        (("-d", "--printBody"), {"default": "false"}), (("-f", "--calculate"), {"default": "false"})]),
    "sendMessage": (send_message, "Send a message", [
        (TOPIC, {"required": True}), (("-p", "--body"), {"required": True}), (("-k", "--key"), {}),
        (("-c", "--tags"), {}), (("-b", "--broker"), {}), (("-i", "--qid"), {"type": int})]),
    "consumeMessage": (consume_message, "Consume message", [
        (TOPIC, {"required": True}), (("-b", "--brokerName"), {}), (("-i", "--queueId"), {"type": int}),
        (("-o", "--offset"), {"type": int}), (GROUP, {}), (("-s", "--beginTimestamp"), {}),
        (("-e", "--endTimestamp"), {}), (("-c", "--MessageNumber"), {"type": int, "default": 128})]),
    "checkMsgSendRT": (check_msg_send_rt, "Check message send response time", [
        (TOPIC, {"required": True}), (("-a", "--amount"), {"type": int, "default": 100}),
        (("-s", "--size"), {"type": int, "default": 128})]),
}
