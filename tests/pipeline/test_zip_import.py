"""`spark-submit --py-files rmqd-0.1.0-cp311.zip` (the wheel under a .zip name): with rmqd only inside a zip
archive (no site-packages at all), the compiled modules the jobs use import from the archive and work."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHECK = r'''
import sys
sys.path.insert(0, sys.argv[1])
import rmqd.cython_ext.record_columns as rc, rmqd.cython_ext.store_commitlog as cl, rmqd.cython_ext.compaction as cx
assert "site-packages" not in "".join(sys.path)
m = cx.OffsetMap(1 << 12)
assert m.put(b"0123456789abcdef", 7) and m.get(b"0123456789abcdef") == 7
cols, used = rc.decode(b"")
assert cols["rows"] == 0 and used == 0
print(rc.__file__)
print(cl.__file__)
'''


def test_compiled_modules_import_from_a_zip(tmp_path):
    whl = str(tmp_path / "rmqd-0.1.0-cp311.zip")
    with zipfile.ZipFile(whl, "w") as z:
        for dp, _dn, files in os.walk(os.path.join(REPO, "rmqd")):
            for f in files:
                if f.endswith((".py", ".so")):
                    p = os.path.join(dp, f)
                    z.write(p, os.path.relpath(p, REPO))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["TMPDIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-S", "-c", CHECK, whl], capture_output=True, text=True, timeout=60,
                       env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    paths = r.stdout.split()
    assert len(paths) == 2 and all(p.startswith(str(tmp_path / f"rmqd-ext-{os.getuid()}")) for p in paths), paths


ORJSON_CHECK = r'''
import sys
sys.path.insert(0, sys.argv[1])
from rmqd.remoting import fastjson                 # imports orjson: served from the archive too
import orjson
assert fastjson.loads_lenient(fastjson.dumps({"a": [1, 2]})) == {"a": [1, 2]}
assert "site-packages" not in "".join(sys.path)
print(orjson.__file__)
print(orjson.orjson.__file__)
'''


@pytest.mark.slow
def test_the_pyfiles_archive_brings_orjson_and_loads_its_compiled_module(tmp_path):
    """`python -m rmqd.spark.pyfiles` (docs/spark-cluster.md): rmqd and orjson in one archive; with nothing
    but the archive on sys.path, rmqd imports orjson from it and orjson's compiled module loads."""
    from rmqd.spark.pyfiles import build
    archive = build(str(tmp_path / "dist"))
    assert os.path.isfile(tmp_path / "dist" / "rmqd_pipeline.py")
    names = zipfile.ZipFile(archive).namelist()
    assert "pyspark_rmqd/__init__.py" in names and any(n.startswith("orjson/orjson.") for n in names)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["TMPDIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-S", "-c", ORJSON_CHECK, archive], capture_output=True, text=True,
                       timeout=60, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    package, compiled = r.stdout.split()
    assert package == os.path.join(archive, "orjson", "__init__.py")
    assert compiled.startswith(str(tmp_path / f"rmqd-ext-{os.getuid()}")), compiled
