"""Shared harness of the fault suite and the soak scripts (scripts/*_soak.py, scripts/fuzz_*.py).

``ServerProcess`` (tests/kit/processes.py's ``ServeProcess``) runs ``python -m rmqd.runtime.cli serve`` (name server +
broker) in a subprocess on free 127.0.0.1 ports with a ``broker.conf``; it can be SIGKILLed and restarted on the
same store. ``Producer`` threads send SEND_MESSAGE_V2 through ``BlockingClient`` and record every SUCCESS;
``pull_queue`` reads a queue back with PULL_MESSAGE.
"""
from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from rmqd.common.fileutil import copy_sparse
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.store.message import decode_messages, decode_properties
from tests.kit import clients
from tests.kit.processes import REPO, ServeProcess as ServerProcess, tail

__all__ = ["REPO", "ServerProcess", "tail", "rss_kb", "send_v2", "pull", "pull_queue", "healthy", "Producer",
           "crash_trials", "offset_trial", "populate_store", "corruption_trial", "CORRUPTION_TARGETS",
           "CORRUPTION_CONF", "CORR_TOPIC"]


def rss_kb(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ---------------------------------------------------------------------------------------- requests
def send_v2(client: BlockingClient, topic: str, body: bytes, queue_id: int = 0, properties: str = "",
            timeout: Optional[float] = None) -> RemotingCommand:
    return clients.send_v2(client, topic, body, queue_id, properties, group="PG_FAULT", timeout=timeout)


def pull(client: BlockingClient, topic: str, queue_id: int, offset: int, group: str = "CG_FAULT",
         max_nums: int = 32, timeout: float = 10.0) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": str(max_nums), "sysFlag": "4", "commitOffset": "0", "subscription": "*",
           "suspendTimeoutMillis": "0", "subVersion": "0"}
    return client.invoke(new_request(11, ext), timeout)


def pull_queue(client: BlockingClient, topic: str, queue_id: int, start: int = 0,
               limit: int = 1_000_000) -> dict[int, Any]:
    """Every message of one queue from ``start``: queue offset -> StoredMessage."""
    out: dict[int, Any] = {}
    offset = start
    while len(out) < limit:
        resp = pull(client, topic, queue_id, offset)
        if resp.code != ResponseCode.SUCCESS:
            break
        msgs = decode_messages(resp.body_bytes())
        if not msgs:
            break
        for m in msgs:
            out[m.queue_offset] = m
        offset = int(resp.ext_fields["nextBeginOffset"])
    return out


def max_offset(client: BlockingClient, topic: str, queue_id: int) -> int:
    resp = client.invoke(new_request(30, {"topic": topic, "queueId": str(queue_id)}))
    assert resp.code == ResponseCode.SUCCESS, resp
    return int(resp.ext_fields["offset"])


def commit_offset(client: BlockingClient, group: str, topic: str, queue_id: int, offset: int) -> int:
    resp = client.invoke(new_request(15, {"consumerGroup": group, "topic": topic, "queueId": str(queue_id),
                                          "commitOffset": str(offset)}))
    return resp.code


def query_offset(client: BlockingClient, group: str, topic: str, queue_id: int) -> int:
    resp = client.invoke(new_request(14, {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)}))
    if resp.code != ResponseCode.SUCCESS:
        return -1
    return int(resp.ext_fields["offset"])


def healthy(addr: str, timeout: float = 5.0, code: int = 28) -> bool:
    """The server answers a request (default GET_BROKER_RUNTIME_INFO) on a fresh connection."""
    try:
        with BlockingClient(addr, timeout) as c:
            resp = c.invoke(new_request(code, {"topic": "TBW102"}), timeout)
            return resp is not None
    except (OSError, TimeoutError, ConnectionError):
        return False


# ---------------------------------------------------------------------------------------- producers
@dataclass
class Acked:
    topic: str
    queue_id: int
    queue_offset: int
    msg_id: str
    body: bytes
    properties: str


@dataclass
class Producer:
    """``threads`` threads sending SEND_MESSAGE_V2 until stopped (or the server goes away)."""

    addr: str
    topic: str
    queues: int = 4
    threads: int = 3
    body_size: tuple = (16, 4096)
    seed: int = 0
    acked: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []

    def start(self) -> "Producer":
        for i in range(self.threads):
            t = threading.Thread(target=self._run, args=(i,), daemon=True, name=f"producer-{i}")
            t.start()
            self._workers.append(t)
        return self

    def _run(self, idx: int) -> None:
        rnd = random.Random(self.seed * 1000 + idx)
        try:
            client = BlockingClient(self.addr, 10.0)
        except OSError as exc:
            self.errors.append(repr(exc))
            return
        n = 0
        try:
            while not self._stop.is_set():
                n += 1
                qid = rnd.randrange(self.queues)
                size = rnd.randint(*self.body_size)
                body = (f"{idx}-{n}-".encode() + rnd.randbytes(size))[:size]
                props = f"KEYS\x01k{idx}_{n}\x02TAGS\x01t{n % 3}\x02UNIQ_KEY\x01U{idx:02d}{n:010d}"
                try:
                    resp = send_v2(client, self.topic, body, qid, props)
                except (OSError, TimeoutError, ConnectionError):
                    return   # server killed
                with self._lock:
                    self.sent += 1
                    if resp.code == ResponseCode.SUCCESS:
                        e = resp.ext_fields
                        self.acked.append(Acked(self.topic, int(e["queueId"]), int(e["queueOffset"]),
                                                e["msgId"], body, props))
                    else:
                        self.errors.append((resp.code, resp.remark))
        finally:
            client.close()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        for t in self._workers:
            t.join(timeout)


def verify_acked(client: BlockingClient, acked: list) -> list[str]:
    """Pull back every acknowledged message; returns the problems found (empty = all intact)."""
    problems: list[str] = []
    by_queue: dict[tuple, list] = {}
    for a in acked:
        by_queue.setdefault((a.topic, a.queue_id), []).append(a)
    for (topic, qid), items in sorted(by_queue.items()):
        got = pull_queue(client, topic, qid, 0)
        for a in items:
            m = got.get(a.queue_offset)
            if m is None:
                problems.append(f"{topic}/{qid}@{a.queue_offset} ({a.msg_id}) missing")
                continue
            if m.body != a.body:
                problems.append(f"{topic}/{qid}@{a.queue_offset}: body differs")
                continue
            sent = decode_properties(a.properties)
            for k, v in sent.items():
                if m.properties.get(k) != v:
                    problems.append(f"{topic}/{qid}@{a.queue_offset}: property {k} {m.properties.get(k)!r} != {v!r}")
                    break
            if m.commit_log_offset != int(a.msg_id[-16:], 16):   # the port may differ after a restart
                problems.append(f"{topic}/{qid}@{a.queue_offset}: msgId {m.msg_id} != {a.msg_id}")
    return problems


def check_queue_consistent(client: BlockingClient, topic: str, queue_id: int) -> list[str]:
    """A queue reads back contiguous from its min offset to its max offset with valid body CRCs."""
    from rmqd.store.message import body_crc
    problems = []
    mx = max_offset(client, topic, queue_id)
    got = pull_queue(client, topic, queue_id, 0)
    if mx and sorted(got) != list(range(min(got or [0]), mx)):
        missing = sorted(set(range(min(got or [0]), mx)) - set(got))
        problems.append(f"{topic}/{queue_id}: {len(missing)} offsets below max {mx} unreadable, e.g. {missing[:5]}")
    for off, m in got.items():
        if body_crc(m.body) != m.body_crc:
            problems.append(f"{topic}/{queue_id}@{off}: body CRC mismatch")
        if m.topic != topic or m.queue_id != queue_id:
            problems.append(f"{topic}/{queue_id}@{off}: record belongs to {m.topic}/{m.queue_id}")
    return problems


@dataclass
class CrashTrial:
    trial: int
    run_s: float
    acked: int
    sent: int
    recovery_s: float
    problems: list


def crash_trials(root: str, trials: int, flush_type: str = "SYNC_FLUSH", seed: int = 0,
                 run_s: tuple = (0.3, 1.5), segment: int = 256 * 1024, threads: int = 3,
                 queues: int = 4, log=print) -> list[CrashTrial]:
    """Load -> SIGKILL at a random moment -> restart -> every acknowledged send must read back.

    Trials share one store, so each recovery also re-verifies every earlier trial's messages.
    """
    rnd = random.Random(seed)
    conf = {"flushDiskType": flush_type, "mapedFileSizeCommitLog": segment,
            "mapedFileSizeConsumeQueue": 300 * 20, "flushIntervalCommitLog": 200}
    srv = ServerProcess(os.path.join(root, "store"), conf, os.path.join(root, "server.log"))
    srv.start()
    all_acked: list[Acked] = []
    results = []
    topic = f"Crash_{flush_type}"
    try:
        for i in range(trials):
            prod = Producer(srv.broker_addr, topic, queues=queues, threads=threads,
                            seed=seed * 100 + i, body_size=(16, rnd.choice([512, 4096, 40000]))).start()
            run = rnd.uniform(*run_s)
            time.sleep(run)
            srv.kill(signal.SIGKILL)
            prod.stop()
            all_acked.extend(prod.acked)
            srv.start()
            with srv.client(15.0) as c:
                problems = verify_acked(c, all_acked)
                for q in range(queues):
                    problems += check_queue_consistent(c, topic, q)
            results.append(CrashTrial(i, run, len(prod.acked), prod.sent, srv.last_start_s, problems))
            log(f"trial {i}: ran {run:.2f}s, acked {len(prod.acked)}/{prod.sent}, total acked "
                f"{len(all_acked)}, restart {srv.last_start_s:.2f}s, problems {len(problems)}"
                + (f": {problems[:3]}" if problems else ""))
    finally:
        srv.stop()
    return results


def offset_trial(root: str, persist_ms: int = 1000, queues: int = 4, rounds: int = 3,
                 rnd: Optional[random.Random] = None) -> list[str]:
    """Commit consumer offsets, SIGKILL, restart: offsets may go back at most one persist interval."""
    rnd = rnd or random.Random(0)
    conf = {"flushConsumerOffsetInterval": persist_ms, "mapedFileSizeCommitLog": 1 << 20}
    srv = ServerProcess(os.path.join(root, "ostore"), conf, os.path.join(root, "offsets.log"))
    srv.start()
    problems = []
    topic, group = "OffsetT", "CG_OFFSETS"
    try:
        with srv.client() as c:
            for q in range(queues):   # offsets are clamped to the queue's max: give them room
                for _ in range(40):
                    send_v2(c, topic, b"m", q)
        for r in range(rounds):
            history: dict[int, list] = {q: [] for q in range(queues)}
            with srv.client() as c:
                t_end = time.monotonic() + persist_ms / 1000 * rnd.uniform(1.2, 2.5)
                base = r * 10
                step = 0
                while time.monotonic() < t_end:
                    step += 1
                    for q in range(queues):
                        off = min(40, base + step // 4)
                        assert commit_offset(c, group, topic, q, off) == ResponseCode.SUCCESS
                        history[q].append((time.monotonic(), off))
                    time.sleep(0.02)
            killed_at = time.monotonic()
            srv.kill(signal.SIGKILL)
            srv.start()
            with srv.client() as c:
                for q in range(queues):
                    got = query_offset(c, group, topic, q)
                    # the newest commit made at least one persist interval (+ slack) before the kill
                    safe = [o for t, o in history[q] if t <= killed_at - persist_ms / 1000 - 0.5]
                    floor = max(safe) if safe else 0
                    last = history[q][-1][1]
                    if not (floor <= got <= last):
                        problems.append(f"round {r} queue {q}: offset after restart {got}, expected "
                                        f"[{floor}, {last}]")
    finally:
        srv.stop()
    return problems


# ---------------------------------------------------------------------------------------- corruption
CORRUPTION_TARGETS = ("commitlog", "consumequeue", "index", "topics.json", "subscriptionGroup.json",
                      "consumerOffset.json", "delayOffset.json")
CORRUPTION_CONF = {"mapedFileSizeCommitLog": 64 * 1024, "mapedFileSizeConsumeQueue": 40 * 20,
                   "flushIntervalCommitLog": 100, "flushConsumerOffsetInterval": 500}
CORR_TOPIC = "CorruptT"
CORR_GROUP = "CG_CORRUPT"


def populate_store(root: str, messages: int = 400, clean_stop: bool = True, seed: int = 0) -> list:
    """A store with several commit-log segments, multi-file consume queues, index entries, topics,
    a subscription group, consumer offsets and delay offsets.  Returns the acknowledged sends."""
    rnd = random.Random(seed)
    srv = ServerProcess(os.path.join(root, "store"), CORRUPTION_CONF, os.path.join(root, "populate.log"))
    srv.start()
    acked = []
    try:
        with srv.client() as c:
            for i in range(messages):
                q = i % 4
                size = rnd.randint(20, 700)
                body = rnd.randbytes(size)
                props = f"KEYS\x01key{i}\x02TAGS\x01tag{i % 3}\x02UNIQ_KEY\x01UQ{seed:04d}{i:08d}"
                resp = send_v2(c, CORR_TOPIC, body, q, props)
                assert resp.code == ResponseCode.SUCCESS, resp
                e = resp.ext_fields
                acked.append(Acked(CORR_TOPIC, q, int(e["queueOffset"]), e["msgId"], body, props))
            # a delayed message (delayOffset.json) and a pulled + committed group (offsets, groups)
            assert send_v2(c, "DelayT", b"later", 0, "DELAY\x011").code == ResponseCode.SUCCESS
            for q in range(4):
                pull(c, CORR_TOPIC, q, 0, group=CORR_GROUP)
                commit_offset(c, CORR_GROUP, CORR_TOPIC, q, 10 + q)
            time.sleep(1.6)   # delay level 1 (1 s) delivered, offsets persisted
    finally:
        if clean_stop:
            srv.stop()
        else:
            srv.kill()
    return acked


def _files(store: str, target: str) -> list[str]:
    if target == "commitlog":
        d = os.path.join(store, "commitlog")
        return [os.path.join(d, sorted(os.listdir(d))[-1])]
    if target == "consumequeue":
        d = os.path.join(store, "consumequeue", CORR_TOPIC)
        return sorted(os.path.join(d, q, f) for q in os.listdir(d) for f in os.listdir(os.path.join(d, q)))
    if target == "index":
        d = os.path.join(store, "index")
        return sorted(os.path.join(d, f) for f in os.listdir(d))
    return [os.path.join(store, "config", target)]


def _data_end(data: bytes) -> int:
    """Length without the trailing zero bytes (where the written part of a mapped file ends)."""
    return len(data.rstrip(b"\0"))


def corrupt(store: str, target: str, rnd: random.Random) -> dict:
    """Flip random bytes in, or truncate, one file of ``target``.  Returns what was done; for
    the commit log, ``damage_from`` is the lowest absolute offset touched."""
    files = [f for f in _files(store, target) if os.path.exists(f)]
    if not files:   # e.g. delayOffset.json not yet persisted in a SIGKILLed store
        target, files = "commitlog", _files(store, "commitlog")
    path = rnd.choice(files)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    end = max(1, _data_end(data))
    kind = rnd.choice(["flip", "flip", "truncate"])
    if kind == "flip":
        n = rnd.choice([1, 1, 2, 8, 64])
        positions = sorted(rnd.randrange(end) for _ in range(n))
        for p in positions:
            data[p] ^= rnd.randrange(1, 256)
        lowest = positions[0]
    else:
        lowest = rnd.randrange(end)
        data = data[:lowest]
    with open(path, "wb") as f:
        f.write(data)
    done = {"target": target, "file": os.path.relpath(path, store), "kind": kind, "at": lowest}
    if target == "commitlog":
        done["damage_from"] = int(os.path.basename(path)) + lowest
    return done


@dataclass
class CorruptionResult:
    what: dict
    started: bool
    recovery_s: float
    problems: list
    logged: list


def corruption_trial(snapshot: str, work: str, acked: list, target: str, rnd: random.Random) -> CorruptionResult:
    """Copy ``snapshot`` (a populated store), corrupt it, start, and check what is served."""
    import shutil
    if os.path.exists(work):
        shutil.rmtree(work)
    shutil.copytree(snapshot, os.path.join(work, "store"), copy_function=copy_sparse)
    what = corrupt(os.path.join(work, "store"), target, rnd)
    log_path = os.path.join(work, "server.log")
    srv = ServerProcess(os.path.join(work, "store"), CORRUPTION_CONF, log_path)
    problems: list[str] = []
    try:
        srv.start(timeout=30)
    except (RuntimeError, TimeoutError) as exc:
        return CorruptionResult(what, False, 0.0, [f"server did not start: {str(exc)[-600:]}"], [])
    try:
        damage = what.get("damage_from", 1 << 62)
        expected = [a for a in acked if int(a.msg_id[-16:], 16) + 4096 <= damage]
        with srv.client(15.0) as c:
            got_all = {q: pull_queue(c, CORR_TOPIC, q, 0) for q in range(4)}
            for a in expected:
                m = got_all[a.queue_id].get(a.queue_offset)
                if m is None:
                    problems.append(f"{a.queue_id}@{a.queue_offset} missing")
                elif m.body != a.body or m.properties_str.split("\x02CLUSTER")[0] != a.properties:
                    problems.append(f"{a.queue_id}@{a.queue_offset} differs")
                elif m.commit_log_offset != int(a.msg_id[-16:], 16):
                    problems.append(f"{a.queue_id}@{a.queue_offset} at another commit-log offset")
            for q, got in got_all.items():
                for off, m in got.items():
                    if m.commit_log_offset + m.store_size > damage:
                        continue   # the damaged record itself: its CRC covers the body only
                    if m.queue_id != q or m.topic != CORR_TOPIC or m.queue_offset != off:
                        problems.append(f"queue {q}@{off} serves a foreign record "
                                        f"{m.topic}/{m.queue_id}@{m.queue_offset}")
            # the broker still takes and serves new messages
            resp = send_v2(c, CORR_TOPIC, b"after-recovery", 0, "KEYS\x01after")
            if resp.code != ResponseCode.SUCCESS:
                problems.append(f"send after recovery failed: {resp.code} {resp.remark}")
            else:
                qoff = int(resp.ext_fields["queueOffset"])
                back = pull_queue(c, CORR_TOPIC, 0, qoff, limit=1)
                if qoff not in back or back[qoff].body != b"after-recovery":
                    problems.append(f"message sent after recovery not served at 0@{qoff}")
    except ValueError as exc:
        problems.append(f"a pull served an undecodable record: {exc}")
    except (OSError, TimeoutError, ConnectionError, AssertionError) as exc:
        problems.append(f"server failed while verifying: {exc!r}")
    finally:
        if not srv.alive():
            problems.append("server died: " + tail(log_path, 15))
        srv.stop()
    logged = [line.strip() for line in open(log_path, errors="replace")
              if (" WARNING " in line or " ERROR " in line) and "rmqd.namesrv" not in line]
    return CorruptionResult(what, True, srv.last_start_s, problems, logged)
