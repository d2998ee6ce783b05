#!/usr/bin/env python
"""Fuzz rmqd's decoders: frame reader, both header serializations, SQL92, batch bodies,
properties and stored records (targets in tests/faults/fuzzkit.py).

With atheris installed (``pip install -e .[fuzz]``) each target runs coverage-guided for
``--seconds``; otherwise the seeded mutation engine runs ``--iterations`` per target.

    .venv/bin/python scripts/fuzz_codecs.py --seconds 60            # atheris, every target
    .venv/bin/python scripts/fuzz_codecs.py --engine mutate --iterations 200000
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "faults"))


def atheris_child(target: str, seconds: int) -> None:
    import atheris
    with atheris.instrument_imports():
        import fuzzkit
    fn = fuzzkit.TARGETS[target]
    corpus_dir = os.path.join(fuzzkit.CORPUS, target)
    atheris.Setup([sys.argv[0], f"-max_total_time={seconds}", "-rss_limit_mb=2048", "-max_len=65536",
                   corpus_dir], fn)
    atheris.Fuzz()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["auto", "atheris", "mutate"], default="auto")
    ap.add_argument("--seconds", type=int, default=30, help="atheris time per target")
    ap.add_argument("--iterations", type=int, default=100000, help="mutation engine inputs per target")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", action="append")
    ap.add_argument("--atheris-child")
    args = ap.parse_args()
    if args.atheris_child:
        atheris_child(args.atheris_child, args.seconds)
        return 0
    import fuzzkit
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
            engine = "atheris"
        except ImportError:
            engine = "mutate"
    failures = 0
    for target in args.target or sorted(fuzzkit.TARGETS):
        t0 = time.monotonic()
        if engine == "atheris":
            # a copy of the corpus dir would grow with atheris' finds; run on a scratch copy
            import shutil
            import tempfile
            scratch = tempfile.mkdtemp(prefix=f"fuzz-{target}-")
            shutil.copytree(os.path.join(fuzzkit.CORPUS, target), scratch, dirs_exist_ok=True)
            env = dict(os.environ)
            r = subprocess.run([sys.executable, __file__, "--atheris-child", target, "--seconds",
                                str(args.seconds)], cwd=scratch, capture_output=True, text=True, env=env)
            lines = (r.stdout + r.stderr).strip().splitlines()
            done = [ln for ln in lines if "Done" in ln and "runs" in ln]
            ok = r.returncode == 0
            print(f"{target}: atheris {'ok' if ok else 'FAIL rc=%d' % r.returncode} "
                  f"{done[-1] if done else ''} ({time.monotonic() - t0:.0f}s)")
            if not ok:
                print("\n".join(lines[-30:]))
        else:
            try:
                fuzzkit.run(target, args.iterations, seed=args.seed)
                ok = True
                print(f"{target}: mutate ok {args.iterations} inputs ({time.monotonic() - t0:.0f}s)")
            except AssertionError as exc:
                ok = False
                print(f"{target}: FAIL {exc}")
        failures += 0 if ok else 1
    print(f"SUMMARY fuzz_codecs: engine={engine} targets={len(args.target or fuzzkit.TARGETS)} failures={failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
