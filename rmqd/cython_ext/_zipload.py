"""Loading compiled modules of packages imported from a zip archive.

``spark-submit --py-files rmqd-<version>-cp311-linux_x86_64.zip`` (``python -m rmqd.spark.pyfiles``, or the
wheel under a ``.zip`` name: Spark ships ``.zip``, not ``.whl``, files to the executors) puts the archive on
``sys.path``. Python imports pure modules from a zip but not extension modules, so the ones rmqd needs (its
own ``rmqd.cython_ext.*`` and orjson's ``orjson.orjson``) would fail there. :class:`ZipExtensionFinder`
serves them: for a module ``<package>.<name>`` whose package was itself imported from an archive, the
member ``<package dir>/<name><EXTENSION_SUFFIX>`` is extracted once per archive version into
``<tmp>/rmqd-ext-<uid>/<digest>/`` (written under a temporary name, then renamed, so concurrent workers are
safe) and loaded from there.

``rmqd/__init__.py`` puts the finder first on ``sys.meta_path`` (:func:`install`) when rmqd itself was
imported from an archive, so it is in place before any rmqd module imports orjson or a compiled module;
``rmqd.cython_ext`` checks again for itself (:func:`install_if_zipped`).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import zipimport
from importlib.machinery import ModuleSpec
from typing import Optional, Sequence


def zip_location(package: object) -> Optional[tuple[str, str]]:
    """(archive, directory inside it) of a package imported from a zip archive, else None."""
    spec = getattr(package, "__spec__", None)
    loader = getattr(spec, "loader", None)
    paths = list(getattr(package, "__path__", None) or [])
    if not isinstance(loader, zipimport.zipimporter) or not paths:
        return None
    archive = loader.archive
    inner = os.path.relpath(paths[0], archive)
    if inner.startswith(".."):
        return None
    return archive, inner.replace(os.sep, "/")


class _Archive:
    def __init__(self, path: str) -> None:
        import hashlib      # here, not at import: every rmqd process imports this module, few use an archive
        import tempfile
        import zipfile
        self.path = path
        with zipfile.ZipFile(path) as z:
            self.names = set(z.namelist())
        st = os.stat(path)
        digest = hashlib.sha1(f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
        self.cache = os.path.join(tempfile.gettempdir(), f"rmqd-ext-{os.getuid()}", digest)

    def extract(self, member: str) -> str:
        import zipfile
        dest = os.path.join(self.cache, os.path.basename(member))
        if not os.path.exists(dest):
            os.makedirs(self.cache, exist_ok=True)
            tmp = f"{dest}.{os.getpid()}.{threading.get_ident()}.part"
            with zipfile.ZipFile(self.path) as z, z.open(member) as src, open(tmp, "wb") as out:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
            os.replace(tmp, dest)
        return dest


class ZipExtensionFinder(importlib.abc.MetaPathFinder):
    """Extension modules of packages imported from zip archives (see the module docstring)."""

    def __init__(self) -> None:
        self._archives: dict[str, _Archive] = {}
        self._lock = threading.Lock()

    def _archive(self, path: str) -> _Archive:
        with self._lock:
            a = self._archives.get(path)
            if a is None:
                a = self._archives[path] = _Archive(path)
            return a

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: object = None) -> Optional[ModuleSpec]:
        parent, _, name = fullname.rpartition(".")
        if not parent:
            return None
        where = zip_location(sys.modules.get(parent))
        if where is None:
            return None
        archive = self._archive(where[0])
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            member = f"{where[1]}/{name}{suffix}"
            if member in archive.names:
                file = archive.extract(member)
                loader = importlib.machinery.ExtensionFileLoader(fullname, file)
                return importlib.util.spec_from_file_location(fullname, file, loader=loader)
        return None


def install() -> None:
    """Put one ZipExtensionFinder first on ``sys.meta_path`` (once per process)."""
    if not any(isinstance(f, ZipExtensionFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, ZipExtensionFinder())


def install_if_zipped(spec: object) -> None:
    """:func:`install` when the module of ``spec`` (a package's ``__spec__``) was imported from an archive."""
    if isinstance(getattr(spec, "loader", None), zipimport.zipimporter):
        install()
