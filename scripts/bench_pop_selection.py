"""POP queue selection cost, PRIORITY vs NORMAL, in one process (no gRPC, no client in the figure).

An embedded broker; a NORMAL and a PRIORITY topic of 8 queues get the same ``--messages`` (256 B, priorities
0..7 spread at random, the NORMAL ones on the same queues); four threads of one group each pop 32 and ack
until all are consumed. Printed: process CPU per message popped and acked, pops, empty pops, checkpoints,
for each topic, in alternating rounds. ``RMQD_TREE=/path/to/checkout`` measures another checkout's code
(its Cython extensions built), so two trees can be compared on a shared machine.

Usage: ``python scripts/bench_pop_selection.py [--messages 4000] [--rounds 3]``
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time

TREE = os.environ.get("RMQD_TREE") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TREE)

import orjson  # noqa: E402

from rmqd.remoting.client import BlockingClient  # noqa: E402
from rmqd.remoting.command import new_request  # noqa: E402
from rmqd.testing.embedded import EmbeddedServer  # noqa: E402


def fill(c: BlockingClient, topic: str, n: int, seed: int, priority: bool) -> None:
    rng = random.Random(seed)
    for i in range(n):
        level = rng.randrange(8)
        props = f"UNIQ_KEY\x01U{topic}{seed}-{i}\x02WAIT\x01true" + (
            f"\x02_SYS_MSG_PRIORITY_\x01{level}" if priority else "")
        ext = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
               "queueId": str(level), "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
               "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
        r = c.invoke(new_request(10, ext, b"y" * 256), 10)
        if r.code != 0:
            raise RuntimeError(f"send failed: {r.code} {r.remark}")


def drain(pop, topic: str, group: str, n: int) -> dict:
    counts = {"got": 0, "pops": 0, "empty": 0, "checkpoints": 0}
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if counts["got"] >= n:
                    return
            r = pop.pop(group, topic, -1, 32, 60_000)
            for m in r.messages:
                pop.ack(group, m.topic, m.extra, m.queue_offset)
            with lock:
                counts["pops"] += 1
                counts["got"] += len(r.messages)
                counts["checkpoints"] += len(r.start_infos)
                if not r.messages:
                    counts["empty"] += 1
            if not r.messages:
                time.sleep(0.001)          # the others hold what is left: wait without burning CPU

    t0 = time.process_time()
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts["cpu_us_per_msg"] = (time.process_time() - t0) / max(1, counts["got"]) * 1e6
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    s = EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1"}).start()
    c = BlockingClient(s.broker_addr)
    try:
        for name, kind in (("SN", "NORMAL"), ("SP", "PRIORITY")):
            r = c.invoke(new_request(17, {"topic": name, "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
                                          "attributes": f"+message.type={kind}"}), 10)
            assert r.code == 0, r.remark
        cpu: dict[str, list] = {"normal": [], "priority": []}
        for rnd in range(a.rounds + 1):                    # round 0 warms up
            kinds = ("normal", "priority") if rnd % 2 == 0 else ("priority", "normal")
            for kind in kinds:
                topic, group = ("SP", f"GP{rnd}") if kind == "priority" else ("SN", f"GN{rnd}")
                r = c.invoke(new_request(200, None, orjson.dumps({"groupName": group, "consumeFromMinEnable": True})), 10)
                assert r.code == 0, r.remark
                n = a.messages if rnd else a.messages // 4
                for q in range(8):                          # the group consumes this round's messages only
                    s.broker.consumer_offset_manager.commit_offset(
                        "", group, topic, q, max(0, s.broker.pop_service.store.get_max_offset(topic, q)))
                fill(c, topic, n, rnd, kind == "priority")
                res = drain(s.broker.pop_service, topic, group, n)
                if rnd:
                    cpu[kind].append(res["cpu_us_per_msg"])
                print(f"round {rnd} {kind:8s} " + " ".join(f"{k}={v:.0f}" if isinstance(v, float) else f"{k}={v}"
                                                          for k, v in res.items()), flush=True)
        nm, pm = statistics.mean(cpu["normal"]), statistics.mean(cpu["priority"])
        print(f"tree {TREE}; load average {os.getloadavg()}")
        print(f"CPU per message popped+acked: NORMAL {nm:.0f} us, PRIORITY {pm:.0f} us ({pm / nm * 100:.1f} %)")
    finally:
        c.close()
        s.stop()
        s.cleanup()


if __name__ == "__main__":
    main()
