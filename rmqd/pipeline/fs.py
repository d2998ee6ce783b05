"""Output locations: a local path, ``file://``, or any URI pyarrow's file systems open (``s3://``,
``gs://``, ``hdfs://`` with libhdfs). The driver and the executors both build one from the same URI.

Local paths get durable writes (fsync of the file and its directory), so the commit records of a job
survive a crash of the machine, not only of the process.
"""
from __future__ import annotations

import json
import os
import posixpath
import pyarrow.fs as pafs

from rmqd.common.fileutil import atomic_write, drop_tree, fsync_path, makedirs_below
from rmqd.pipeline.errors import PipelineError


def _is_local_path(uri: str) -> bool:
    return "://" not in uri


class OutputFS:
    """One output root and the file operations the jobs need (paths are relative to the root)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        if _is_local_path(uri):
            self.fs: pafs.FileSystem = pafs.LocalFileSystem()
            self.root = os.path.abspath(os.path.expanduser(uri))
        else:
            try:
                self.fs, self.root = pafs.FileSystem.from_uri(uri)
            except Exception as exc:               # pyarrow raises ArrowInvalid / OSError subclasses
                raise PipelineError(f"cannot open {uri!r}: {exc}") from None
        self.local = isinstance(self.fs, pafs.LocalFileSystem)

    def __reduce__(self) -> tuple[type[OutputFS], tuple[str]]:                 # executors rebuild it from the URI
        return (OutputFS, (self.uri,))

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts) if parts else self.root

    def url(self, *parts: str) -> str:
        """A location Spark's readers accept (a plain path for local outputs)."""
        p = self.path(*parts)
        if self.local:
            return p
        return self.uri.split("://", 1)[0] + "://" + p

    def info(self, rel: str) -> pafs.FileInfo:
        return self.fs.get_file_info(self.path(rel))

    def exists(self, rel: str) -> bool:
        return bool(self.info(rel).type != pafs.FileType.NotFound)

    def is_dir(self, rel: str) -> bool:
        return bool(self.info(rel).type == pafs.FileType.Directory)

    def listdir(self, rel: str) -> list[str]:
        if not self.is_dir(rel):
            return []
        sel = pafs.FileSelector(self.path(rel), allow_not_found=True)
        return sorted(posixpath.basename(i.path) for i in self.fs.get_file_info(sel))

    def walk_files(self, rel: str) -> list[str]:
        """Every file under ``rel``, as paths relative to ``rel``."""
        base = self.path(rel)
        sel = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        return sorted(posixpath.relpath(i.path, base) for i in self.fs.get_file_info(sel)
                      if i.type == pafs.FileType.File)

    def mkdirs(self, rel: str) -> None:
        self.fs.create_dir(self.path(rel), recursive=True)

    def mkdirs_under(self, root: str, rel: str, marker: str) -> None:
        """Create ``root/rel`` below an existing ``root`` without ever re-creating ``root``: a task of a run
        whose staging directory was dropped (a killed job's orphan worker) fails instead of writing there.
        Local: one ``mkdir`` per component, so a missing ``root`` fails with ENOENT; object stores (no
        directories): ``root/marker`` must exist."""
        if not self.local:
            if not self.exists(posixpath.join(root, marker)):
                raise FileNotFoundError(f"{self.url(root)} is gone")
            return
        makedirs_below(self.path(root), self.path(root, rel))

    def delete_dir(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.delete_dir(self.path(rel))

    def drop_dir(self, rel: str) -> None:
        """Remove a run's directory that orphan tasks of a failed or killed job may still write into: on a
        local file system through :func:`rmqd.common.fileutil.drop_tree` (renamed aside, then deleted; a crash in
        between leaves a hidden directory with no commit record, which the next recovery drops like any
        unfinished run); on object stores deleted (tasks check the run's marker before each file)."""
        if self.local:
            drop_tree(self.path(rel))
        else:
            self.delete_dir(rel)

    def delete_file(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.delete_file(self.path(rel))

    def move(self, src: str, dst: str) -> None:
        """Rename (atomic on a local or HDFS file system; a copy and delete on object stores)."""
        self.mkdirs(posixpath.dirname(dst))
        self.fs.move(self.path(src), self.path(dst))
        if self.local:
            fsync_path(os.path.dirname(self.path(dst)))

    def read_json(self, rel: str) -> object:
        """The JSON document at ``rel`` (the caller narrows it to the shape it wrote)."""
        with self.fs.open_input_stream(self.path(rel)) as f:
            doc: object = json.loads(f.read())
            return doc

    def write_json(self, rel: str, obj: object) -> None:
        """Write ``rel`` whole or not at all (a temporary name, then a rename)."""
        data = json.dumps(obj, indent=1, sort_keys=True).encode()
        if self.local:
            atomic_write(self.path(rel), data, keep_backup=False)
            return
        tmp = rel + ".part"
        self.mkdirs(posixpath.dirname(rel))
        with self.fs.open_output_stream(self.path(tmp)) as f:
            f.write(data)
        self.fs.move(self.path(tmp), self.path(rel))


