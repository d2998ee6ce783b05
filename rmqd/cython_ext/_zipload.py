"""Loading the compiled modules when rmqd itself is imported from a zip archive.

``spark-submit --py-files rmqd-<version>-cp311.zip`` (the wheel under a ``.zip`` name: Spark ships ``.zip``,
not ``.whl``, files to the executors) puts the archive on ``sys.path``; Python imports pure modules from a
zip but not extension modules. This finder serves ``rmqd.cython_ext.<name>``
from the archive instead: the member ``rmqd/cython_ext/<name><EXTENSION_SUFFIX>`` is extracted once per
archive version into ``<tmp>/rmqd-ext-<uid>/<digest>/`` (written under a temporary name, then renamed,
so concurrent workers are safe) and loaded from there.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import zipfile
from typing import Optional, Sequence

PACKAGE = "rmqd.cython_ext"


class ZipExtensionFinder(importlib.abc.MetaPathFinder):
    def __init__(self, archive: str, member_dir: str) -> None:
        self.archive, self.member_dir = archive, member_dir.strip("/")
        with zipfile.ZipFile(archive) as z:
            self.names = set(z.namelist())
        st = os.stat(archive)
        digest = hashlib.sha1(f"{os.path.abspath(archive)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
        self.cache = os.path.join(tempfile.gettempdir(), f"rmqd-ext-{os.getuid()}", digest)

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None, target: object = None):
        if not fullname.startswith(PACKAGE + "."):
            return None
        name = fullname.rsplit(".", 1)[1]
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            member = f"{self.member_dir}/{name}{suffix}"
            if member in self.names:
                where = self._extract(member)
                loader = importlib.machinery.ExtensionFileLoader(fullname, where)
                return importlib.util.spec_from_file_location(fullname, where, loader=loader)
        return None

    def _extract(self, member: str) -> str:
        dest = os.path.join(self.cache, os.path.basename(member))
        if not os.path.exists(dest):
            os.makedirs(self.cache, exist_ok=True)
            tmp = f"{dest}.{os.getpid()}.part"
            with zipfile.ZipFile(self.archive) as z, z.open(member) as src, open(tmp, "wb") as out:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
            os.replace(tmp, dest)
        return dest


def install(package_file: str) -> None:
    """``package_file``: this package's ``__init__.py`` path inside the archive (``<zip>/rmqd/cython_ext/...``)."""
    marker = os.sep + "rmqd" + os.sep + "cython_ext"
    archive, _, _rest = package_file.partition(marker)
    if not zipfile.is_zipfile(archive):
        return
    if not any(isinstance(f, ZipExtensionFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, ZipExtensionFinder(archive, "rmqd/cython_ext"))
