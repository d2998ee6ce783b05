#!/usr/bin/env python3
"""Capture raw remoting frames sent by the RocketMQ C++ client (via its Python wheel).

The script plays a *fake* name server and a *fake* broker on two free 127.0.0.1 ports
(plain asyncio, no rmqd code involved), runs a client scenario in a **subprocess** with
the chosen Python interpreter (librocketmq keeps global state and threads, so it must not
live in this process), and records every frame the client sends, byte for byte,
including the 4-byte length prefix.

Usage (from the repository root):

    .venv/bin/python scripts/capture_cpp_frames.py                 # C++ 1.x (main venv), save fixtures
    .venv/bin/python scripts/capture_cpp_frames.py --python .venv-cpp2/bin/python --tag cpp2
    .venv/bin/python scripts/capture_cpp_frames.py --no-save --verbose   # just print the dialogue
    .venv/bin/python scripts/capture_cpp_frames.py --scenarios producer_errors --no-save -v

Scenarios:
  producer         Producer('PG'): start, send_sync, send_batch (2 msgs), send_oneway, shutdown
  consumer         PushConsumer('CG') subscribe('TopicTest', cb, 'TagA'); the fake broker
                   serves one message on queue 0; the callback raises on the first delivery
                   (-> RECONSUME_LATER -> CONSUMER_SEND_MSG_BACK) and succeeds afterwards.
  producer_errors  namesrv answers TOPIC_NOT_EXIST for the first route request and the broker
                   answers SYSTEM_ERROR to every send (observe retries / error surfacing).
  producer_timeout the broker never answers sends (observe timeout and retries).
                   Frames of the two error scenarios are never saved as fixtures.

Saved fixtures: tests/fixtures/cpp_frames/<NNN>_<code>_<name>.bin (first frame of each
(scenario, code) pair plus a few interesting extras). A JSON summary of the whole
dialogue can be written with --summary PATH.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "fixtures" / "cpp_frames"

CODE_NAMES = {
    10: "send_message", 11: "pull_message", 14: "query_consumer_offset",
    15: "update_consumer_offset", 29: "search_offset_by_timestamp", 30: "get_max_offset",
    31: "get_min_offset", 34: "heart_beat", 35: "unregister_client",
    36: "consumer_send_msg_back", 37: "end_transaction", 38: "get_consumer_list_by_group",
    41: "lock_batch_mq", 42: "unlock_batch_mq", 105: "get_routeinfo_by_topic",
    106: "get_broker_cluster_info", 206: "get_all_topic_list", 310: "send_message_v2",
    320: "send_batch_message",
}

BROKER_NAME = "broker-a"
CLUSTER = "DefaultCluster"
QUEUE_NUMS = 4
SERVER_VERSION = 409  # V4_9_8


# --------------------------------------------------------------------------- framing

def encode_response(opaque: int, code: int, ext: dict | None = None, body: bytes = b"",
                    remark: str | None = None) -> bytes:
    """Build a JSON-typed (type byte 0) response frame; ext values are forced to strings."""
    hdr: dict = {"code": code, "flag": 1, "language": "JAVA", "opaque": opaque,
                 "serializeTypeCurrentRPC": "JSON", "version": SERVER_VERSION}
    if remark is not None:
        hdr["remark"] = remark
    if ext:
        hdr["extFields"] = {k: (str(v).lower() if isinstance(v, bool) else str(v))
                            for k, v in ext.items()}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    return struct.pack(">II", 4 + len(h) + len(body), len(h)) + h + body


@dataclass
class Frame:
    seq: int
    t: float
    scenario: str
    role: str          # "namesrv" | "broker"
    conn: int
    raw: bytes
    header_word: int
    header_text: str
    header: dict | None
    body: bytes

    @property
    def code(self) -> int:
        return int(self.header.get("code", -1)) if self.header else -1

    @property
    def opaque(self) -> int:
        return int(self.header.get("opaque", -1)) if self.header else -1

    @property
    def flag(self) -> int:
        return int(self.header.get("flag", 0)) if self.header else 0

    def summary(self) -> dict:
        ext = (self.header or {}).get("extFields") or {}
        return {
            "seq": self.seq, "t": round(self.t, 3), "scenario": self.scenario, "role": self.role,
            "conn": self.conn, "len": len(self.raw), "header_type_byte": self.header_word >> 24,
            "header_len": self.header_word & 0xFFFFFF, "code": self.code, "opaque": self.opaque,
            "flag": self.flag, "header_text": self.header_text,
            "ext_types": {k: type(v).__name__ for k, v in ext.items()},
            "body": self.body.decode("utf-8", "backslashreplace")[:2000],
        }


# --------------------------------------------------------------------------- fake servers

@dataclass
class FakeCluster:
    scenario: str
    broker_port: int = 0
    frames: list[Frame] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)
    conn_ids: int = 0
    client_ids: set = field(default_factory=set)
    route_requests: int = 0
    phys_offset: int = 0
    delivered: int = 0
    verbose: bool = False
    pull_hold: float = 3.0

    def _record(self, role: str, conn: int, raw: bytes) -> Frame:
        word = struct.unpack(">I", raw[4:8])[0]
        hlen = word & 0xFFFFFF
        htext = raw[8:8 + hlen].decode("utf-8", "backslashreplace")
        try:
            hdr = json.loads(htext)
        except ValueError:
            hdr = None
        fr = Frame(len(self.frames), time.monotonic() - self.t0, self.scenario, role, conn, raw,
                   word, htext, hdr, raw[8 + hlen:])
        self.frames.append(fr)
        if self.verbose:
            print(f"[{fr.t:7.3f}] {role:7} c{conn} code={fr.code} opaque={fr.opaque} "
                  f"flag={fr.flag} len={len(raw)} hdr={htext.strip()[:300]!r} "
                  f"body={fr.body[:300]!r}", file=sys.stderr)
        return fr

    async def handle(self, role: str, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        self.conn_ids += 1
        conn = self.conn_ids
        try:
            while True:
                try:
                    prefix = await reader.readexactly(4)
                    (length,) = struct.unpack(">I", prefix)
                    if length > 16 * 1024 * 1024:
                        return
                    rest = await reader.readexactly(length)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                fr = self._record(role, conn, prefix + rest)
                if fr.header is None or fr.flag & 1:
                    continue  # undecodable or a response to something we sent
                resp = self.respond(role, fr)
                if resp is None or fr.flag & 2:
                    continue
                if isinstance(resp, tuple):  # (frame, delay): a held (long-polled) pull
                    asyncio.get_running_loop().call_later(resp[1], self._late_write, writer, resp[0])
                else:
                    writer.write(resp)
                    await writer.drain()
        finally:
            writer.close()

    @staticmethod
    def _late_write(writer: asyncio.StreamWriter, data: bytes) -> None:
        if not writer.is_closing():
            writer.write(data)

    # -- request handling -------------------------------------------------------------
    def respond(self, role: str, fr: Frame) -> bytes | tuple[bytes, float] | None:
        code, op = fr.code, fr.opaque
        ext = {k: str(v) for k, v in ((fr.header or {}).get("extFields") or {}).items()}
        if code == 105:
            self.route_requests += 1
            if self.scenario == "producer_errors" and self.route_requests == 1:
                return encode_response(op, 17, remark="No topic route info in name server for "
                                       f"the topic: {ext.get('topic')}")
            return encode_response(op, 0, body=self.route_body())
        if code == 34:
            try:
                self.client_ids.add(json.loads(fr.body)["clientID"])
            except (ValueError, KeyError, TypeError):
                pass
            return encode_response(op, 0)
        if code in (310, 10, 320):
            if self.scenario == "producer_errors":
                return encode_response(op, 1, remark="fake SYSTEM_ERROR from capture script")
            if self.scenario == "producer_timeout":
                return None  # never answer: observe the client's send timeout / retries
            qid = ext.get("e", ext.get("queueId", "0"))
            msgid = self.offset_msgid(self.phys_offset)
            self.phys_offset += 200
            return encode_response(op, 0, ext={
                "msgId": msgid, "queueId": qid, "queueOffset": self.phys_offset // 200 - 1,
                "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
        if code == 38:
            body = json.dumps({"consumerIdList": sorted(self.client_ids)},
                              separators=(",", ":")).encode()
            return encode_response(op, 0, body=body)
        if code == 14:
            return encode_response(op, 22, remark="Not found, V3_0_6_SNAPSHOT maybe this group "
                                   "consumer boot first")
        if code in (30, 31, 29):
            off = 0  # max/min/search offset: 0, so a new consumer starts where our message is
            return encode_response(op, 0, ext={"offset": off})
        if code == 11:
            return self.pull_response(op, ext)
        if code in (15, 35, 36, 37, 42):
            return encode_response(op, 0)
        if code == 41:
            try:
                mqs = json.loads(fr.body).get("mqSet", [])
            except ValueError:
                mqs = []
            return encode_response(op, 0, body=json.dumps({"lockOKMQSet": mqs},
                                                          separators=(",", ":")).encode())
        return encode_response(op, 3, remark=f" request type {code} not supported")

    def route_body(self) -> bytes:
        # fastjson style: sorted keys, compact, unquoted numeric brokerAddrs key
        return ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:%d"},"brokerName":"%s",'
                '"cluster":"%s"}],"filterServerTable":{},"queueDatas":[{"brokerName":"%s",'
                '"perm":6,"readQueueNums":%d,"topicSysFlag":0,"writeQueueNums":%d}]}'
                % (self.broker_port, BROKER_NAME, CLUSTER, BROKER_NAME, QUEUE_NUMS,
                   QUEUE_NUMS)).encode()

    def offset_msgid(self, phys: int) -> str:
        return (socket.inet_aton("127.0.0.1") + struct.pack(">iq", self.broker_port, phys)).hex().upper()

    def pull_response(self, op: int, ext: dict) -> bytes:
        qid = int(ext.get("queueId", "0"))
        qoff = int(ext.get("queueOffset", "0"))
        topic = ext.get("topic", "")
        hdr = {"suggestWhichBrokerId": 0, "minOffset": 0}
        # Serve exactly one message on TopicTest queue 0 offset 0 (twice at most: the
        # redelivery path of the C++ client goes through %RETRY% normally, but be safe).
        if topic == "TopicTest" and qid == 0 and qoff == 0 and self.delivered < 2:
            self.delivered += 1
            body = self.stored_message(topic, qid, 0)
            hdr.update(nextBeginOffset=1, maxOffset=1)
            return encode_response(op, 0, ext=hdr, body=body, remark="FOUND")
        maxoff = 1 if topic == "TopicTest" and qid == 0 else 0
        hdr.update(nextBeginOffset=qoff, maxOffset=maxoff)
        resp = encode_response(op, 19, ext=hdr, remark="OFFSET_OVERFLOW_ONE")
        # Long polling: the C++ 1.x client sets the SUSPEND bit (sysFlag & 2) and re-pulls
        # immediately after PULL_NOT_FOUND, so answering at once makes it spin (~4000 pulls/s).
        # Hold the answer like a real broker would (shortened to keep captures quick).
        if int(ext.get("sysFlag", "0")) & 2:
            hold = min(int(ext.get("suspendTimeoutMillis", "15000")) / 1000.0, self.pull_hold)
            return resp, hold
        return resp

    def stored_message(self, topic: str, qid: int, qoff: int) -> bytes:
        body = b"hello from the fake broker"
        props = "\x01".join(["TAGS", "TagA"]) + "\x02" + "\x01".join(["KEYS", "K1"]) + "\x02" + \
            "\x01".join(["UNIQ_KEY", "7F00000100002A9F0000000000000001"]) + "\x02" + \
            "\x01".join(["CLUSTER", CLUSTER])
        pb, tb = props.encode(), topic.encode()
        now = int(time.time() * 1000)
        phys = 0
        # explicit layout to keep it readable
        parts = [
            struct.pack(">i", -626843481),                       # MAGICCODE
            struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),     # BODYCRC
            struct.pack(">i", qid),                               # QUEUEID
            struct.pack(">i", 0),                                 # FLAG
            struct.pack(">q", qoff),                              # QUEUEOFFSET
            struct.pack(">q", phys),                              # PHYSICALOFFSET
            struct.pack(">i", 0),                                 # SYSFLAG
            struct.pack(">q", now - 1000),                        # BORNTIMESTAMP
            socket.inet_aton("127.0.0.1") + struct.pack(">i", 40000),  # BORNHOST
            struct.pack(">q", now),                               # STORETIMESTAMP
            socket.inet_aton("127.0.0.1") + struct.pack(">i", self.broker_port),  # STOREHOST
            struct.pack(">i", 0),                                 # RECONSUMETIMES
            struct.pack(">q", 0),                                 # PREPARED_TRANSACTION_OFFSET
            struct.pack(">i", len(body)) + body,
            struct.pack(">b", len(tb)) + tb,
            struct.pack(">h", len(pb)) + pb,
        ]
        payload = b"".join(parts)
        return struct.pack(">i", 4 + len(payload)) + payload


# --------------------------------------------------------------------------- client scenarios

SCENARIO_PRELUDE = r'''
import json, os, sys, time
from rocketmq.client import Producer, PushConsumer, Message
NS = sys.argv[1]
def emit(**kw):
    print(json.dumps(kw), flush=True)
'''

SCENARIOS = {
    "producer": r'''
p = Producer('PG')
p.set_namesrv_addr(NS)
p.start()
m = Message('TopicTest'); m.set_keys('K1'); m.set_tags('TagA'); m.set_body('hello')
r = p.send_sync(m)
emit(op='send_sync', status=int(r.status), msg_id=r.msg_id, offset=r.offset)
try:
    a = Message('TopicTest'); a.set_keys('KB1'); a.set_tags('TagA'); a.set_body('b1')
    b = Message('TopicTest'); b.set_keys('KB2'); b.set_tags('TagA'); b.set_body('b2')
    r = p.send_batch([a, b])
    emit(op='send_batch', status=int(r.status), msg_id=r.msg_id, offset=r.offset)
except Exception as e:
    emit(op='send_batch', error=repr(e))
o = Message('TopicTest'); o.set_tags('TagB'); o.set_body('oneway'); o.set_property('userKey', 'userValue')
p.send_oneway(o)
emit(op='send_oneway')
time.sleep(0.5)
p.shutdown()
emit(op='shutdown')
''',
    "producer_errors": r'''
p = Producer('PG')
p.set_namesrv_addr(NS)
p.start()
for i in range(2):
    m = Message('TopicTest'); m.set_tags('TagA'); m.set_body('x')
    t = time.time()
    try:
        r = p.send_sync(m)
        emit(op='send_sync', i=i, status=int(r.status), msg_id=r.msg_id, secs=round(time.time()-t, 3))
    except Exception as e:
        emit(op='send_sync', i=i, error=repr(e)[:500], secs=round(time.time()-t, 3))
p.shutdown()
emit(op='shutdown')
''',
    "producer_timeout": r'''
p = Producer('PG')
p.set_namesrv_addr(NS)
p.start()
m = Message('TopicTest'); m.set_tags('TagA'); m.set_body('x')
t = time.time()
try:
    r = p.send_sync(m)
    emit(op='send_sync', status=int(r.status), msg_id=r.msg_id, secs=round(time.time()-t, 3))
except Exception as e:
    emit(op='send_sync', error=repr(e)[:500], secs=round(time.time()-t, 3))
p.shutdown()
emit(op='shutdown')
''',
    "consumer": r'''
from rocketmq.client import RecvMessage
from rocketmq.ffi import dll
seen = []
def cb(consumer, handle):
    # Raw ctypes callback so we can return RECONSUME_LATER (1) explicitly: the wheel's
    # subscribe() wrapper re-raises exceptions inside the ctypes callback, which makes the
    # returned status undefined.
    msg = RecvMessage(handle)
    seen.append(msg.id)
    emit(op='recv', id=msg.id, topic=msg.topic, tags=msg.tags.decode() if msg.tags else None,
         keys=msg.keys.decode() if msg.keys else None, body=msg.body.decode(), queue_id=msg.queue_id,
         queue_offset=msg.queue_offset, reconsume_times=msg.reconsume_times)
    return 1 if len(seen) == 1 else 0
c = PushConsumer('CG')
c.set_namesrv_addr(NS)
c.set_thread_count(1)
dll.Subscribe(c._handle, b'TopicTest', b'TagA')
c._register_callback(cb)
c.start()
emit(op='started')
time.sleep(float(os.environ.get('CAPTURE_CONSUMER_SECS', '12')))
c.shutdown()
emit(op='shutdown')
''',
}


def run_scenario(python: str, scenario: str, timeout: float, verbose: bool,
                 log_dir: Path) -> tuple[FakeCluster, subprocess.CompletedProcess | None, str]:
    cluster = FakeCluster(scenario=scenario, verbose=verbose)

    async def main() -> subprocess.CompletedProcess | None:
        ns = await asyncio.start_server(lambda r, w: cluster.handle("namesrv", r, w), "127.0.0.1", 0)
        br = await asyncio.start_server(lambda r, w: cluster.handle("broker", r, w), "127.0.0.1", 0)
        ns_port = ns.sockets[0].getsockname()[1]
        cluster.broker_port = br.sockets[0].getsockname()[1]
        home = log_dir / scenario
        home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HOME=str(home), ROCKETMQ_CLIENT_LOG_DIR=str(home / "client-logs"),
                   PYTHONUNBUFFERED="1")
        script = SCENARIO_PRELUDE + SCENARIOS[scenario]
        proc = await asyncio.create_subprocess_exec(
            python, "-c", script, f"127.0.0.1:{ns_port}", env=env, cwd=str(home),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
            rc = proc.returncode
        except asyncio.TimeoutError:
            os.killpg(proc.pid, 9)
            out, err = await proc.communicate()
            rc = -9
        await asyncio.sleep(0.2)
        ns.close(); br.close()
        return subprocess.CompletedProcess([python], rc, out.decode(errors="replace"),
                                           err.decode(errors="replace"))

    cp = asyncio.run(main())
    return cluster, cp, ""


# --------------------------------------------------------------------------- saving

def is_batch(ext: dict) -> bool:
    """C++ 1.x: full-name header `batch`; 2.x: V2 alias `m`; both send "0"/"1" strings."""
    return str(ext.get("m", ext.get("batch", ""))).lower() in ("1", "true")


def pick_frames(frames: list[Frame]) -> list[Frame]:
    """First frame per (scenario, role, code); plus the 2nd pull and the batch send."""
    chosen, seen = [], {}
    for fr in frames:
        if fr.scenario.startswith("producer_") or fr.flag & 1:
            continue
        ext = (fr.header or {}).get("extFields") or {}
        key = (fr.scenario, fr.role, fr.code)
        if fr.code in (10, 310, 320):
            key += (is_batch(ext),)
        if fr.code == 105:
            key = ("*", fr.role, fr.code, ext.get("topic"))
        if fr.code in (11, 14):
            key += (str(ext.get("topic", "")).startswith("%RETRY%"), str(ext.get("sysFlag")))
        n = seen.get(key, 0)
        if n < 1:
            chosen.append(fr)
        seen[key] = n + 1
    return chosen


def frame_name(fr: Frame, tag: str) -> str:
    ext = (fr.header or {}).get("extFields") or {}
    name = CODE_NAMES.get(fr.code, f"code{fr.code}")
    if fr.code in (10, 310, 320) and is_batch(ext):
        name += "_batch"
    if fr.code in (105, 11, 14) and str(ext.get("topic", "")).startswith("%RETRY%"):
        name += "_retry_topic"
    elif fr.code == 105 and ext.get("topic") == "TBW102":
        name += "_tbw102"
    if fr.code == 11:
        name += f"_sysflag{ext.get('sysFlag')}"
    if fr.code == 34:
        name += "_consumer" if fr.scenario == "consumer" else "_producer"
    return f"{tag}_{name}" if tag else name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"),
                    help="interpreter that has the `rocketmq` client installed")
    ap.add_argument("--tag", default="", help="name infix for saved files, e.g. cpp2")
    ap.add_argument("--scenarios", default="producer,consumer")
    ap.add_argument("--timeout", type=float, default=40.0, help="hard limit per scenario (s)")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--start-index", type=int, default=None,
                    help="first NNN for saved files (default: continue after existing files)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--summary", help="write a JSON summary of all frames here")
    ap.add_argument("--keep-logs", help="copy the client's log directory here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    out = Path(args.out)
    if os.sep in args.python:  # keep venv symlinks intact: abspath, not resolve()
        args.python = os.path.abspath(args.python)
    all_frames: list[Frame] = []
    results = {}
    with tempfile.TemporaryDirectory(prefix="cppcap-") as td:
        for sc in args.scenarios.split(","):
            cluster, cp, _ = run_scenario(args.python, sc, args.timeout, args.verbose, Path(td))
            all_frames.extend(cluster.frames)
            results[sc] = {"rc": cp.returncode, "stdout": cp.stdout, "stderr": cp.stderr[-3000:]}
            print(f"== scenario {sc}: rc={cp.returncode}, {len(cluster.frames)} frames", file=sys.stderr)
            print(cp.stdout, file=sys.stderr)
            if cp.stderr.strip():
                print("stderr:", cp.stderr[-2000:], file=sys.stderr)
        if args.keep_logs:
            shutil.copytree(td, args.keep_logs, dirs_exist_ok=True)
    if args.summary:
        Path(args.summary).write_text(json.dumps(
            {"results": results, "frames": [f.summary() for f in all_frames]}, indent=1))
    if args.no_save:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    idx = args.start_index
    if idx is None:
        nums = [int(p.name[:3]) for p in out.glob("[0-9][0-9][0-9]_*.bin")]
        idx = max(nums) + 1 if nums else 1
    for fr in pick_frames(all_frames):
        path = out / f"{idx:03d}_{fr.code}_{frame_name(fr, args.tag)}.bin"
        path.write_bytes(fr.raw)
        print(f"saved {path.relative_to(REPO) if path.is_relative_to(REPO) else path} "
              f"({len(fr.raw)} bytes)", file=sys.stderr)
        idx += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
