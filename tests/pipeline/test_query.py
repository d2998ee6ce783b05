"""rmqd pipeline query on an archive (through the CLI's main with the run's SparkSession, --json): by key,
by unique key and by offset msgId, by store time across a UTC midnight; and its bad input."""
from __future__ import annotations

import json

import pytest

from tests.pipeline.helpers import DAY_EDGE_MS, expected_rows

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

from rmqd.pipeline.cli import main  # noqa: E402

pytestmark = pytest.mark.timeout(300)      # a Spark job's first run on a loaded 2-core host


def query(spark, capsys, *argv):
    rc = main(["query", *argv, "--json"], spark=spark)
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def _ids(msgs):
    return sorted((m["queueId"], m["offset"]) for m in msgs)


@pytest.mark.slow
def test_by_key_and_by_msg_id(spark, store_dir, archived, capsys):
    out, _ = archived
    want = expected_rows(store_dir)
    got = query(spark, capsys, "--archive", out, "--topic", "PipeA", "--key", "alias4")
    hits = [w for w in want if w[0] == "PipeA" and b"alias4" in (w[3] or b"").split(b" ")]
    assert len(hits) > 5 and _ids(got["messages"]) == sorted((w[1], w[2]) for w in hits)
    m = got["messages"][0]
    w = next(w for w in hits if (w[1], w[2]) == (m["queueId"], m["offset"]))
    assert m["keys"] == w[3].decode() and m["msgId"] == w[6] and m["tags"] == w[5]
    assert m["properties"] == {k: v.decode() for k, v in w[11]}
    assert (m["body"].encode() if m["bodyEncoding"] == "utf-8" else __import__("base64").b64decode(m["body"])) == w[4]
    uniq = next(w for w in want if w[0] == "PipeB" and not w[6].startswith("7F0000"))     # a UNIQ_KEY msgId
    got = query(spark, capsys, "--archive", out, "--topic", "PipeB", "--msg-id", uniq[6])
    assert _ids(got["messages"]) == [(uniq[1], uniq[2])]
    offset_id = next(w for w in want if w[0] == "007" and w[6].startswith("7F0000"))       # an offset msgId
    got = query(spark, capsys, "--archive", out, "--topic", "007", "--msg-id", offset_id[6])
    assert _ids(got["messages"]) == [(offset_id[1], offset_id[2])]


@pytest.mark.slow
def test_by_time_across_midnight(spark, store_dir, archived, capsys):
    out, _ = archived
    lo, hi = DAY_EDGE_MS + 40_000, DAY_EDGE_MS + 75_000          # 23:59:40 .. 00:00:15
    got = query(spark, capsys, "--archive", out, "--topic", "%RETRY%pipe_cg", "--from", "2024-03-01T23:59:40Z",
                "--to", str(hi), "--limit", "1000")
    want = sorted((w[7], w[1], w[2]) for w in expected_rows(store_dir)
                  if w[0] == "%RETRY%pipe_cg" and lo <= w[7] < hi)
    assert len(want) > 50
    assert [(m["queueId"], m["offset"]) for m in got["messages"]] == [(q, o) for _t, q, o in want]
    assert {m["storeTimestamp"][:10] for m in got["messages"]} == {"2024-03-01", "2024-03-02"}
    assert got["rows"] == len(want) and got["job"] == "query"


@pytest.mark.parametrize("argv,needle", [
    (["--key", "k", "--msg-id", "x"], "exactly one of --key, --msg-id, or --from/--to"),
    (["--from", "yesterday"], "--from 'yesterday': expected epoch milliseconds or an ISO 8601 time"),
    (["--key", "k", "--limit", "0"], "--limit 0"),
])
def test_bad_query_input(spark, archived, capsys, argv, needle):
    rc = main(["query", "--archive", archived[0], "--topic", "PipeA", *argv], spark=spark)
    assert rc == 2 and needle in capsys.readouterr().err


def test_unknown_topic_lists_the_archives_topics(spark, archived, capsys):
    rc = main(["query", "--archive", archived[0], "--topic", "Nope", "--key", "k"], spark=spark)
    err = capsys.readouterr().err
    assert rc == 2 and "--topic Nope: not in the archive (it has 4 topic(s)" in err and "%RETRY%pipe_cg" in err
