"""``python -m rmqd.spark.pyfiles [-o DIR]``: the one file to give ``spark-submit --py-files`` so executors
whose Python does not have rmqd installed run the connector and ``rmqd pipeline``.

The archive holds this installation's ``rmqd`` and ``pyspark_rmqd`` packages (Python modules and the
compiled ``rmqd.cython_ext`` modules, as the wheel lays them out) and the one runtime dependency the
executors need that Spark does not bring: ``orjson`` (rmqd's remoting codec and store metadata use it).
Compiled modules load from the archive (:mod:`rmqd.cython_ext._zipload`), so the executors need only
what every PySpark job using Arrow needs: the same Python minor version and platform as this one, with
pyarrow, pandas and numpy (docs/spark-cluster.md). Also writes ``rmqd_pipeline.py`` beside it, the driver
script that runs ``rmqd pipeline`` under spark-submit. Prints the archive's path.
"""
from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import zipfile
from typing import Iterator, Optional, Sequence

import rmqd

PACKAGES = ("rmqd", "pyspark_rmqd", "orjson")
_EPOCH = (2020, 1, 1, 0, 0, 0)          # fixed member times: the same installation gives the same bytes


def archive_name() -> str:
    """``rmqd-<version>-cp311-linux_x86_64.zip``: the Python and platform the compiled modules are for."""
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"rmqd-{rmqd.__version__}-{py}-{plat}.zip"


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"rmqd.spark.pyfiles: package {name!r} is not installed in {sys.executable}")
    return list(spec.submodule_search_locations)[0]


def _members(name: str) -> Iterator[tuple[str, str]]:
    """(file, name in the archive) of a package's modules: Python files and this interpreter's compiled
    modules; orjson whole (its type stubs included)."""
    root = _package_dir(name)
    ext = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for dp, dn, files in os.walk(root):
        dn[:] = sorted(d for d in dn if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py") or f.endswith(ext) or (name == "orjson" and not f.endswith(".pyc")):
                path = os.path.join(dp, f)
                yield path, os.path.join(name, os.path.relpath(path, root)).replace(os.sep, "/")


def _check_compiled(root: str) -> None:
    """Every ``.pyx`` of rmqd.cython_ext has its compiled module (an editable checkout may lack them)."""
    ext_dir = os.path.join(root, "cython_ext")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    missing = [f[:-4] for f in os.listdir(ext_dir) if f.endswith(".pyx")
               and not os.path.exists(os.path.join(ext_dir, f[:-4] + suffix))]
    if missing:
        raise SystemExit(f"rmqd.spark.pyfiles: compiled modules missing in {ext_dir}: {', '.join(sorted(missing))} "
                         "(build them: python setup.py build_ext --inplace)")


DRIVER = "rmqd_pipeline.py"
DRIVER_TEXT = '''"""`rmqd pipeline` under spark-submit: spark-submit --py-files <rmqd zip> rmqd_pipeline.py archive ..."""
import sys

from rmqd.pipeline.cli import main

sys.exit(main())
'''


def build(out_dir: str) -> str:
    """Write the archive (and ``rmqd_pipeline.py``, the driver script of ``rmqd pipeline`` for spark-submit)
    into ``out_dir``; returns the archive's path."""
    _check_compiled(_package_dir("rmqd"))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, archive_name())
    tmp = path + ".part"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in PACKAGES:
            for file, member in _members(pkg):
                info = zipfile.ZipInfo(member, _EPOCH)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                with open(file, "rb") as f:
                    z.writestr(info, f.read())
    os.replace(tmp, path)
    with open(os.path.join(out_dir, DRIVER), "w") as f:
        f.write(DRIVER_TEXT)
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rmqd.spark.pyfiles", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out-dir", default="dist", help="where to write the archive (default dist/)")
    args = ap.parse_args(argv)
    print(build(args.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
