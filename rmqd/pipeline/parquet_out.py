"""Hive-partitioned zstd Parquet written from a Spark task with pyarrow, in bounded memory.

Rows are buffered per partition directory and written as row groups of about ``row_group_bytes``;
when the buffers together pass ``max_buffered_bytes`` the biggest is written early. Each partition
gets one file per task (a new one only if more than ``max_open_files`` partitions were open), named
``<prefix>-<n>.zstd.parquet`` so a job can tell whose file it is. Directory values are escaped as
Spark escapes them (``%RETRY%g`` -> ``%25RETRY%25g``), so ``spark.read.parquet`` finds the values back.

With a ``guard`` (a run's staging root and its marker) directories are only ever created below an
existing root (:meth:`OutputFS.mkdirs_under`), and on a local file system each file is written as
``.<name>.inprogress`` (hidden from Spark and pyarrow) and renamed when complete: a task of a dropped
run fails rather than re-create the run's directory, and a file never shows half written.
"""
from __future__ import annotations

import inspect
import logging
import os
import posixpath
import re
from collections import OrderedDict
from typing import Iterator, Optional, Sequence, TypedDict

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from rmqd.common.fileutil import fsync_path
from rmqd.pipeline.fs import OutputFS

log = logging.getLogger(__name__)

ZSTD_LEVEL = 3                 # Spark's default zstd level (parquet.compression.codec.zstd.level)
_BLOOM = "bloom_filter_options" in inspect.signature(pq.ParquetWriter.__init__).parameters
# characters Spark/Hive escape in partition directory names (ExternalCatalogUtils.escapePathName)
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 32)}


def escape_value(value: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPE else ch for ch in value)


def unescape_value(name: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), name)


def split_rows(table: pa.Table, cols: Sequence[str]) -> Iterator[tuple[tuple[str, ...], pa.Table]]:
    """``(values of cols, the rows with those values)`` for each distinct combination of the string
    columns ``cols``, in bulk (one group-by and one take; any number of combinations)."""
    n = table.num_rows
    if n == 0:
        return
    keys = table.select(list(cols))
    grouped = keys.append_column("__i", pa.array(np.arange(n, dtype=np.int64))) \
        .group_by(list(cols), use_threads=False).aggregate([("__i", "list")])
    if grouped.num_rows == 1:
        yield tuple(grouped[c][0].as_py() for c in cols), table
        return
    idx = grouped["__i_list"]
    for r in range(grouped.num_rows):
        yield tuple(grouped[c][r].as_py() for c in cols), table.take(idx[r].values)


def split_runs(table: pa.Table, key: npt.NDArray[np.int64], min_run: int = 32) -> Iterator[tuple[int, pa.Table]]:
    """Rows grouped by an int64 partition ``key`` per row, without copying when the rows come in runs
    (a CommitLog holds each producer batch's records together): ``(key, zero-copy slice)`` per run;
    rows that alternate more often are reordered once (a stable sort and one take)."""
    n = len(key)
    if n == 0:
        return
    starts = np.flatnonzero(key[1:] != key[:-1]) + 1
    if len(starts) * min_run > n:
        order = np.argsort(key, kind="stable")
        table, key = table.take(pa.array(order)), key[order]
        starts = np.flatnonzero(key[1:] != key[:-1]) + 1
    bounds = np.concatenate(([0], starts, [n]))
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield int(key[a]), table.slice(int(a), int(b - a))


class WrittenFile(TypedDict):
    """One closed Parquet file: its path (relative to the output root), rows and size."""
    file: str
    rows: int
    bytes: int


class PartitionedWriter:
    """Writes tables into ``<root>/<partition dir>/<prefix>-<n>.zstd.parquet`` files."""

    def __init__(self, fs: OutputFS, root: str, schema: pa.Schema, prefix: str,
                 row_group_bytes: int = 64 << 20, max_buffered_bytes: int = 256 << 20,
                 max_open_files: int = 64, sort_by: Optional[str] = None,
                 bloom_columns: Sequence[str] = (), dictionary_columns: Sequence[str] = (),
                 statistics_columns: Optional[Sequence[str]] = None,
                 guard: Optional[tuple[str, str]] = None) -> None:
        """``guard``: ``(run root, marker file name)`` of the staging run ``root`` lies in (see the module
        docstring); ``root`` must be below it."""
        self.fs, self.root, self.schema, self.prefix = fs, root, schema, prefix
        self.guard = guard
        self.dictionary_columns, self.statistics_columns = list(dictionary_columns), statistics_columns
        self.row_group_bytes, self.max_buffered = row_group_bytes, max_buffered_bytes
        self.max_open, self.sort_by, self.bloom_columns = max_open_files, sort_by, tuple(bloom_columns)
        self._buf: dict[str, list[pa.Table]] = {}
        self._buf_bytes: dict[str, int] = {}
        self._total = 0
        self._open: "OrderedDict[str, tuple[pq.ParquetWriter, str, int]]" = OrderedDict()
        self._tmp: dict[str, str] = {}            # final rel -> the rel it is being written under
        self._seq: dict[str, int] = {}
        self.files: list[WrittenFile] = []

    def write(self, part: str, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        table = table.select(self.schema.names)
        self._buf.setdefault(part, []).append(table)
        nb = table.nbytes
        self._buf_bytes[part] = self._buf_bytes.get(part, 0) + nb
        self._total += nb
        if self._buf_bytes[part] >= self.row_group_bytes:
            self._flush(part)
        if self._total > self.max_buffered:        # slices pin their batches: free them all
            for p in list(self._buf):
                self._flush(p)

    def _flush(self, part: str) -> None:
        tables = self._buf.pop(part, [])
        self._total -= self._buf_bytes.pop(part, 0)
        if not tables:
            return
        table = pa.concat_tables(tables)                 # no copy: the writer walks the chunks
        if self.sort_by:
            table = table.sort_by(self.sort_by)
        writer, rel, rows = self._writer(part, table.num_rows)
        writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self._open[part] = (writer, rel, rows + table.num_rows)
        self._open.move_to_end(part)

    def _writer(self, part: str, rows_hint: int) -> tuple[pq.ParquetWriter, str, int]:
        if part in self._open:
            return self._open[part]
        while len(self._open) >= self.max_open:
            self._close_one(next(iter(self._open)))
        n = self._seq.get(part, 0)
        self._seq[part] = n + 1
        name = f"{self.prefix}-{n:04d}.zstd.parquet"
        rel = posixpath.join(self.root, part, name)
        target = rel
        if self.guard is not None:
            run_root, marker = self.guard
            self.fs.mkdirs_under(run_root, posixpath.relpath(posixpath.dirname(rel), run_root), marker)
            if self.fs.local:
                target = posixpath.join(self.root, part, f".{name}.inprogress")
                self._tmp[rel] = target
        else:
            self.fs.mkdirs(posixpath.dirname(rel))
        opts: dict[str, object] = {"compression": "zstd", "compression_level": ZSTD_LEVEL,
                      "use_dictionary": self.dictionary_columns or False}
        if self.statistics_columns is not None:
            opts["write_statistics"] = list(self.statistics_columns)
        if self.bloom_columns and _BLOOM:
            opts["bloom_filter_options"] = {c: {"ndv": max(rows_hint, 1024), "fpp": 0.01}
                                            for c in self.bloom_columns}
        if self.sort_by:
            opts["sorting_columns"] = [pq.SortingColumn(self.schema.get_field_index(self.sort_by))]
        writer = pq.ParquetWriter(self.fs.path(target), self.schema, filesystem=self.fs.fs, **opts)
        self._open[part] = (writer, rel, 0)
        return self._open[part]

    def _close_one(self, part: str) -> None:
        writer, rel, rows = self._open.pop(part)
        writer.close()
        tmp = self._tmp.pop(rel, None)
        if self.fs.local:
            fsync_path(self.fs.path(tmp or rel))
        if tmp is not None:
            os.rename(self.fs.path(tmp), self.fs.path(rel))     # fails if the run's directory was dropped
        self.files.append({"file": rel, "rows": rows, "bytes": self.fs.info(rel).size})

    def close(self) -> list[WrittenFile]:
        """Write what is buffered and close every file; returns ``{file, rows, bytes}`` per file."""
        for part in list(self._buf):
            self._flush(part)
        for part in list(self._open):
            self._close_one(part)
        return self.files

    def abort(self) -> None:
        """Close without caring about the files (the job's staging directory is thrown away)."""
        for writer, rel, _rows in self._open.values():
            try:
                writer.close()
            except Exception as exc:          # the task is failing anyway: say so, keep the first error
                log.warning("closing a Parquet file of a failed task: %s", exc)
            tmp = self._tmp.pop(rel, None)
            if tmp is not None:
                try:
                    os.unlink(self.fs.path(tmp))
                except FileNotFoundError:
                    pass
        self._open.clear()
        self._buf.clear()
