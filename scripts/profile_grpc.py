"""Where rmqd's CPU goes on a gRPC path: py-spy samples an ``rmqd serve`` while grpcload drives it (issue 40).

Starts rmqd with a gRPC endpoint (bench_peers.RmqdGrpc), creates the topic (and group), runs grpcload in the
given mode and records rmqd with ``py-spy record --gil --nonblocking --format raw`` over the load (the samples of
the thread holding the GIL: Python's own CPU, not the waits), then prints the hottest frames by self time and
inclusive time, and the process's CPU per thread name from /proc over the same load (grpcio's C-core threads work
without the GIL). py-spy must be installed.

Usage: python scripts/profile_grpc.py [--mode send|recv|lite] [--conc 16] [--seconds 20] [--out send.folded]
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_peers import RmqdGrpc, create, grpcload, run_grpcload  # noqa: E402


def top_frames(folded: str, n_self: int = 25, n_incl: int = 40) -> str:
    """The hottest frames of a py-spy raw (collapsed) stack file: self and inclusive shares of all samples."""
    own: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    total = 0
    with open(folded) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack:
                continue
            k = int(count)
            total += k
            frames = stack.split(";")
            own[frames[-1]] += k
            for frame in set(frames):
                incl[frame] += k
    out = [f"{total} samples", "", "self:"]
    out += [f"{100 * k / total:5.1f}%  {fr}" for fr, k in own.most_common(n_self)]
    out += ["", "inclusive:"]
    out += [f"{100 * k / total:5.1f}%  {fr}" for fr, k in incl.most_common(n_incl)]
    return "\n".join(out)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (``comm``) of ``pid``, from /proc/<pid>/task/*/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.defaultdict(float)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue            # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] += (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("send", "recv", "lite"), default="send")
    ap.add_argument("--conc", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--backlog", type=int, default=40_000, help="recv: messages sent first, then received")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--out", default="rmqd-grpc.folded")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="profile-grpc-")
    srv = RmqdGrpc(workdir)
    srv.start(lite=args.mode == "lite")
    try:
        topic, group = "ProfTopic", "ProfGroup"
        if args.mode == "lite":
            create(srv.broker_addr, srv.namesrv, topic, "+message.type=LITE",
                   groups=((group, {"+lite.bind.topic": topic}),))
            load = ("-mode", "lite", "-topic", topic, "-group", group, "-conc", str(args.conc),
                    "-consumers", "4", "-lite-topics", "200")
        else:
            create(srv.broker_addr, srv.namesrv, topic, groups=((group, {}),))
            if args.mode == "recv":
                run_grpcload(srv, "-mode", "send", "-topic", topic, "-conc", "16", "-max", str(args.backlog),
                             "-seconds", "300", timeout=400)
                load = ("-mode", "recv", "-topic", topic, "-group", group, "-conc", str(args.conc),
                        "-max", str(args.backlog))
            else:
                load = ("-mode", "send", "-topic", topic, "-conc", str(args.conc))
        # the load outlasts the recording and is stopped after it: a generator at its own deadline makes
        # receives with too little time left (ILLEGAL_POLLING_TIME), not the steady state
        gen = subprocess.Popen([grpcload(), "-endpoint", srv.grpc_addr, *load, "-seconds", str(args.seconds + 60)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)               # connections and settings first
        pid = srv.server_pids[0]
        cpu0 = thread_cpu(pid)
        spy = subprocess.run(["py-spy", "record", "--gil", "--nonblocking", "--format", "raw", "--rate",
                              str(args.rate), "--duration", str(args.seconds), "--pid", str(pid),
                              "--output", args.out], capture_output=True, text=True, timeout=args.seconds + 120)
        cpu1 = thread_cpu(pid)
        if gen.poll() is None:
            gen.terminate()
        out, err = gen.communicate(timeout=60)
        if spy.returncode != 0:
            raise RuntimeError(f"py-spy failed: {spy.stderr[-1500:]}")
        print(out.strip() or f"grpcload stopped after the recording (rc={gen.returncode})")
        used = {name: cpu1[name] - cpu0.get(name, 0.0) for name in cpu1}
        print(f"rmqd CPU over the {args.seconds} s recorded, per thread name:")
        for name, secs in sorted(used.items(), key=lambda kv: -kv[1]):
            if secs > 0:
                print(f"  {secs:7.2f} s  {name}")
        print(top_frames(args.out))
    finally:
        srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
