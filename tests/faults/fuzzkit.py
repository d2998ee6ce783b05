"""Fuzz targets over rmqd's decoders, a seeded mutation engine and the seed corpus.

Each target takes ``bytes`` and may raise only its documented error types (a FrameError from the
frame reader, SQLParseError from the SQL92 compiler, ValueError from record decoders...); any
other exception, a crash or a hang is a bug.  ``scripts/fuzz_codecs.py`` drives the same targets
with atheris (coverage guided) when it is installed; CI runs the mutation engine with a fixed seed.
"""
from __future__ import annotations

import os
import random
import struct
from typing import Callable, Iterable

from rmqd.filter.sql92 import FilterEvaluationError, SQLParseError, compile_expression
from rmqd.processors.send import decode_batch
from rmqd.remoting.command import FrameError, FrameReader, RemotingCommand, decode_header, encode_header
from rmqd.store.message import decode_message, decode_properties

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def t_frame(data: bytes) -> None:
    reader = FrameReader(1 << 20)
    try:
        # whole, then split at an arbitrary point (incremental feeding must agree)
        cmds = reader.feed(data)
        for c in cmds:
            c.body_bytes()
            repr(c)
    except FrameError:
        return
    if len(data) > 2:
        r2 = FrameReader(1 << 20)
        cut = len(data) // 3
        try:
            again = r2.feed(data[:cut]) + r2.feed(data[cut:])
        except FrameError:
            raise AssertionError("split feed raised where the whole feed did not")
        assert [(c.code, c.opaque, c.body_bytes()) for c in again] == \
            [(c.code, c.opaque, c.body_bytes()) for c in cmds]


def _header(serialize_type: int) -> Callable[[bytes], None]:
    def target(data: bytes) -> None:
        try:
            cmd = decode_header(serialize_type, data)
        except (FrameError, ValueError):
            return
        assert isinstance(cmd, RemotingCommand)
        for k, v in (cmd.ext_fields or {}).items():
            assert isinstance(k, str) and isinstance(v, str), (k, v)
        encode_header(cmd)   # whatever decodes must re-encode
    return target


def t_sql92(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    try:
        f = compile_expression(text)
    except SQLParseError:
        return
    for props in ({"a": "1", "b": "x", "TAGS": "t"}, {}, None):
        try:
            f.evaluate(props)   # the message filter treats FilterEvaluationError as "no match"
        except FilterEvaluationError:
            pass


def t_batch(data: bytes) -> None:
    try:
        recs = decode_batch(data)
    except (ValueError, UnicodeDecodeError, struct.error):
        return
    for flag, body, props in recs:
        assert isinstance(body, bytes) and isinstance(props, str)


def t_properties(data: bytes) -> None:
    d = decode_properties(data.decode("utf-8", errors="replace"))
    assert isinstance(d, dict)


def t_message(data: bytes) -> None:
    try:
        m = decode_message(data)
    except ValueError:
        return
    assert m.store_size <= len(data)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "frame": t_frame, "header_json": _header(0), "header_rocketmq": _header(1), "sql92": t_sql92,
    "batch": t_batch, "properties": t_properties, "message": t_message,
}

INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x10000, 0x1000000]


def mutate(data: bytes, rnd: random.Random, corpus: list[bytes]) -> bytes:
    """One havoc-style mutation (bit flips, interesting ints, insert/delete/duplicate, splice)."""
    b = bytearray(data or b"\0")
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(9)
        n = len(b)
        if op == 0 and n:
            i = rnd.randrange(n)
            b[i] ^= 1 << rnd.randrange(8)
        elif op == 1 and n:
            b[rnd.randrange(n)] = rnd.randrange(256)
        elif op == 2 and n >= 4:
            i = rnd.randrange(n - 3)
            b[i:i + 4] = struct.pack(">I", rnd.choice(INTERESTING) & 0xFFFFFFFF)
        elif op == 3 and n >= 2:
            i = rnd.randrange(n - 1)
            b[i:i + 2] = struct.pack(">H", rnd.choice(INTERESTING) & 0xFFFF)
        elif op == 4 and n:
            i = rnd.randrange(n)
            del b[i:i + rnd.randint(1, min(32, n - i))]
        elif op == 5:
            i = rnd.randint(0, n)
            b[i:i] = rnd.randbytes(rnd.randint(1, 16))
        elif op == 6 and n:
            i = rnd.randrange(n)
            j = rnd.randint(i, min(n, i + 64))
            b[j:j] = b[i:j]
        elif op == 7 and corpus:
            other = rnd.choice(corpus)
            i = rnd.randint(0, n)
            b = b[:i] + bytearray(other[rnd.randint(0, len(other)):])
        elif op == 8 and n:
            i = rnd.randrange(n)
            b[i:i + 1] = rnd.choice([b'"', b"{", b"}", b":", b",", b"\\", b"\x01", b"\x02", b"'", b"(", b")",
                                     b" AND ", b" IN ", b"NULL", b"1e999", b"-", b"\x00", b"\xff"])
    return bytes(b[:1 << 16])


def load_corpus(target: str) -> list[bytes]:
    d = os.path.join(CORPUS, target)
    if not os.path.isdir(d):
        return [b""]
    return [open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))] or [b""]


def run(target: str, iterations: int, seed: int = 0, extra: Iterable[bytes] = ()) -> int:
    """Mutation-fuzz ``target``; raises on the first failure (with the input attached)."""
    fn = TARGETS[target]
    corpus = load_corpus(target) + list(extra)
    rnd = random.Random(seed)
    for data in corpus:
        fn(data)
    for i in range(iterations):
        data = mutate(rnd.choice(corpus), rnd, corpus)
        try:
            fn(data)
        except Exception as exc:
            raise AssertionError(f"{target}: input #{i} {data[:200]!r} (len {len(data)}) raised {exc!r}") from exc
    return iterations
