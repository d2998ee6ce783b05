"""Network fuzzer: mutated requests of every registered request code against a live server.

Checks: no crash, no hang (every non-oneway request is answered or its connection closed), the
server still answers on a fresh connection afterwards, bounded RSS growth, and a bystander
connection keeps working throughout (only the offending connection may be affected).
"""
from __future__ import annotations

import random
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field

from rmqd.remoting.command import FrameReader, RemotingCommand, encode_frame_bytes

from tests.faults.faultkit import ServerProcess, healthy, rss_kb, send_v2
from tests.faults.fuzzkit import load_corpus, mutate

# Java processors that deliberately never answer (EndTransactionProcessor returns null).
NO_RESPONSE_CODES = {37}

FIELDS = {
    "topic": ["NetFuzzT", "TBW102", "%RETRY%CG", "", "a" * 300, "bad topic!", "SCHEDULE_TOPIC_XXXX"],
    "consumerGroup": ["CG", "", "%DLQ%x", "g" * 300], "group": ["CG", ""], "producerGroup": ["PG", ""],
    "queueId": ["0", "-1", "3", "99999", "x", "2147483648", ""],
    "queueOffset": ["0", "-5", "9223372036854775807", "1e3", ""], "offset": ["0", "-1", "abc"],
    "maxMsgNums": ["32", "0", "-1", "100000"], "sysFlag": ["0", "2", "4", "7", "-1", "255"],
    "commitOffset": ["0", "-1"], "suspendTimeoutMillis": ["0", "100", "-1"], "subVersion": ["0", "x"],
    "subscription": ["*", "a || b", "a > 1", "((", ""], "expressionType": ["TAG", "SQL92", "BOGUS"],
    "timestamp": ["0", "-1", "x"], "key": ["k", ""], "maxNum": ["32", "-1", "999999"],
    "beginTimestamp": ["0"], "endTimestamp": ["9999999999999"], "msgId": ["0" * 32, "zz", ""],
    "brokerName": ["broker-a", ""], "brokerAddr": ["127.0.0.1:1", "nonsense"], "clusterName": ["DefaultCluster"],
    "brokerId": ["0", "x", "-1"], "namespace": ["ns"], "value": ["v"], "delayLevel": ["1", "99", "-3"],
    "originMsgId": ["x"], "originTopic": ["NetFuzzT"], "maxReconsumeTimes": ["16", "-1"],
    "tranStateTableOffset": ["0", "x"], "commitLogOffset": ["0", "-1"], "commitOrRollback": ["8", "12", "x"],
    "clientId": ["c1", ""], "jstackEnable": ["false"], "readQueueNums": ["8", "-1", "x"],
    "writeQueueNums": ["8", "0"], "perm": ["6", "x"], "topicFilterType": ["SINGLE_TAG"],
    "a": ["PG"], "b": ["NetFuzzT", ""], "c": ["TBW102"], "d": ["4", "x"], "e": ["0", "-1", "77"],
    "f": ["0", "x"], "g": ["0"], "h": ["0"], "i": ["KEYS\x01k", "\x01\x02\x01", "DELAY\x0199"], "j": ["0"],
    "k": ["false"], "m": ["false", "true"],
}
BODIES = [b"", b"{}", b"[]", b"null", b'{"clientID":"c1","consumerDataSet":[{"groupName":"CG"}]}',
          b'{"topicConfigTable":{}}', b"\x00" * 64, b"{" * 50]


def registered_codes() -> tuple[list[int], list[int]]:
    """Request codes the broker's and the name server's dispatchers handle."""
    from rmqd.broker.controller import BrokerController
    from rmqd.config import BrokerConfig, NamesrvConfig
    from rmqd.namesrv.server import NameServer
    with tempfile.TemporaryDirectory(prefix="rmqd-codes-") as d:
        broker = BrokerController(BrokerConfig(listenPort=0, storePathRootDir=d, namesrvAddr=None))
        ns = NameServer(NamesrvConfig(listenPort=0, kvConfigPath=d + "/kv.json"))
        rng = range(0, 2000)
        return ([c for c in rng if broker.dispatcher.handles(c)], [c for c in rng if ns.dispatcher.handles(c)])


def fuzz_request(code: int, rnd: random.Random, frame_corpus: list) -> bytes:
    names = rnd.sample(sorted(FIELDS), rnd.randint(0, 12))
    ext = {n: rnd.choice(FIELDS[n]) for n in names}
    if rnd.random() < 0.3:
        ext[rnd.choice(sorted(FIELDS))] = rnd.choice(["", "\x00", "é" * 10, str(rnd.getrandbits(70)), "x" * 5000])
    body = rnd.choice(BODIES)
    if rnd.random() < 0.3:
        body = rnd.randbytes(rnd.randint(0, 4096))
    oneway = rnd.random() < 0.1
    cmd = RemotingCommand(code, ext or None, body or None, None, 0, 2 if oneway else 0,
                          serialize_type=rnd.choice([0, 1]))
    return encode_frame_bytes(cmd)


@dataclass
class FuzzReport:
    requests: int = 0
    answered: int = 0
    closed_conns: int = 0
    unanswered: list = field(default_factory=list)
    bystander_failures: int = 0
    bystander_sends: int = 0
    rss_before_kb: int = 0
    rss_after_kb: int = 0
    healthy_after: bool = False


def _exchange(addr: str, frames: list, deadline_s: float, rep: FuzzReport) -> None:
    """Send frames (with their opaques) on one connection; wait for every expected answer."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), 5)
    expected = {}
    try:
        for opaque, code, oneway, data in frames:
            if not oneway and code not in NO_RESPONSE_CODES:
                expected[opaque] = code
            s.sendall(data)
    except OSError:
        rep.closed_conns += 1
        s.close()
        return
    reader = FrameReader()
    end = time.monotonic() + deadline_s
    try:
        while expected and time.monotonic() < end:
            s.settimeout(max(0.05, end - time.monotonic()))
            try:
                chunk = s.recv(1 << 20)
            except socket.timeout:
                break
            if not chunk:
                rep.closed_conns += 1
                expected.clear()
                break
            for cmd in reader.feed(chunk):
                if cmd.flag & 1 and expected.pop(cmd.opaque, None) is not None:
                    rep.answered += 1
    except ConnectionResetError:
        rep.closed_conns += 1
        expected.clear()
    finally:
        s.close()
    rep.unanswered += [f"code {c} opaque {o}" for o, c in expected.items()]


def run_network_fuzz(srv: ServerProcess, iterations: int, seed: int = 0, per_conn: int = 20,
                     deadline_s: float = 20.0, parallel: int = 4, log=print) -> FuzzReport:
    broker_codes, ns_codes = registered_codes()
    rnd = random.Random(seed)
    frame_corpus = load_corpus("frame")
    rep = FuzzReport(rss_before_kb=rss_kb(srv.pid))
    stop = threading.Event()

    def bystander() -> None:
        with srv.client(10.0) as c:
            while not stop.is_set():
                try:
                    ok = send_v2(c, "BystanderT", b"still-here", 0).code == 0
                except (OSError, TimeoutError, ConnectionError):
                    ok = False
                rep.bystander_sends += 1
                rep.bystander_failures += 0 if ok else 1
                stop.wait(0.1)

    by = threading.Thread(target=bystander, daemon=True)
    by.start()
    jobs = []
    opaque = 0
    while rep.requests < iterations:
        target_ns = rnd.random() < 0.3
        codes = ns_codes if target_ns else broker_codes
        frames = []
        raw_conn = rnd.random() < 0.1   # a connection of mutated captured frames (often malformed)
        for _ in range(per_conn if not raw_conn else 1):
            code = rnd.choice(codes)
            opaque += 1
            if raw_conn:
                frames.append((opaque, code, True, mutate(rnd.choice(frame_corpus), rnd, frame_corpus)))
            else:
                frames.append((opaque, code, False, fuzz_request(code, rnd, frame_corpus)))
            rep.requests += 1
        jobs.append((srv.namesrv_addr if target_ns else srv.broker_addr, frames))
    # opaques: re-encode with the right opaque (cheap: rebuild the frames with the opaque set)
    fixed = []
    for addr, frames in jobs:
        out = []
        for opaque, code, raw, data in frames:
            if raw:
                out.append((opaque, code, True, data))
                continue
            cmd = FrameReader(1 << 24).feed(data)[0]
            cmd.opaque = opaque
            out.append((opaque, code, bool(cmd.flag & 2), encode_frame_bytes(cmd)))
        fixed.append((addr, out))
    for i in range(0, len(fixed), parallel):
        threads = [threading.Thread(target=_exchange, args=(a, f, deadline_s, rep)) for a, f in fixed[i:i + parallel]]
        for t in threads:
            t.start()
        for t in threads:
            t.join(deadline_s + 10)
        if not srv.alive():
            break
    stop.set()
    by.join(15)
    rep.healthy_after = srv.alive() and healthy(srv.broker_addr) and healthy(srv.namesrv_addr, code=105)
    rep.rss_after_kb = rss_kb(srv.pid) if srv.alive() else 0
    log(f"network fuzz: {rep.requests} requests over {len(fixed)} connections, {rep.answered} answered, "
        f"{rep.closed_conns} connections closed by the server, {len(rep.unanswered)} unanswered, "
        f"bystander {rep.bystander_failures}/{rep.bystander_sends} failed, RSS {rep.rss_before_kb}->"
        f"{rep.rss_after_kb} KiB, healthy after: {rep.healthy_after}")
    return rep
