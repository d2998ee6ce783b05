"""Python started in a source tree whose Cython extensions were never built (e.g. the repository root after a
plain `pip install .`) imports that tree: the import of a compiled module says what to run instead of a bare
ImportError."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import rmqd


def test_an_unbuilt_source_tree_says_to_run_pip_install_e(tmp_path):
    tree = tmp_path / "checkout"
    shutil.copytree(Path(rmqd.__file__).parent, tree / "rmqd",
                    ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    for statement in ("import rmqd.store.message_store", "from rmqd.cython_ext import send_lane"):
        res = subprocess.run([sys.executable, "-c", statement], cwd=tree, capture_output=True, text=True,
                             timeout=60, env={"PATH": "/usr/bin:/bin"})
        assert res.returncode == 1
        last = res.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: rmqd's compiled module rmqd.cython_ext.") and "is not built" in last
        assert f"Run `pip install -e .` in {tree}" in last
    # a module that is not one of the extensions is still a plain ModuleNotFoundError
    res = subprocess.run([sys.executable, "-c", "import rmqd.cython_ext.no_such_module"], cwd=tree,
                         capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert "ModuleNotFoundError: No module named 'rmqd.cython_ext.no_such_module'" in res.stderr
