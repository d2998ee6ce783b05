"""The type checker passes: mypy, configured in pyproject.toml ([tool.mypy]: the whole ``rmqd`` package is
checked strictly, an explicit ``Any`` is an error), and the ``.pyi`` stubs of the Cython modules
match the compiled modules (mypy's stubtest: names, and the signatures of module-level functions and
methods).

mypy's cache lives in ~/.cache/rmqd/mypy, one directory per checkout and commit (and mypy version), so a run
after a small change is incremental; a cache is never reused across commits (one made before a module moved or
a generated module was rebuilt answered "module has no attribute" for modules that are there).
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CYTHON_EXT = ROOT / "rmqd" / "cython_ext"
ALLOWLIST = Path(__file__).resolve().parent / "stubtest_allowlist.txt"

pytestmark = pytest.mark.timeout(600)


def _cache_dir() -> Path:
    import shutil

    import mypy.version

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    checkout = Path(os.path.expanduser("~/.cache/rmqd/mypy")) / hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
    key = hashlib.sha1(f"{head or 'no-git'}|{mypy.version.__version__}".encode()).hexdigest()[:12]
    if checkout.is_dir():      # this checkout's caches of other commits (or of the old one-per-checkout layout)
        for old in checkout.iterdir():
            if old.name == key:
                continue
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()
    return checkout / key


def _require_mypy() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: pip install -e '.[test]' (the test extra brings it)")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=540)


def test_mypy_passes_on_the_configured_packages() -> None:
    _require_mypy()
    cache = _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    result = _run(["mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache)])
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"


def stubbed_modules() -> list[str]:
    return sorted(f"rmqd.cython_ext.{p.stem}" for p in CYTHON_EXT.glob("*.pyi"))


def test_every_stub_is_next_to_its_cython_module() -> None:
    assert stubbed_modules(), "no .pyi stubs under rmqd/cython_ext"
    for stub in CYTHON_EXT.glob("*.pyi"):
        assert stub.with_suffix(".pyx").exists(), f"{stub.name} has no {stub.stem}.pyx beside it"


def test_cython_stubs_match_the_compiled_modules() -> None:
    _require_mypy()
    result = _run(["mypy.stubtest", "--mypy-config-file", str(ROOT / "pyproject.toml"), "--concise",
                   "--ignore-disjoint-bases", "--allowlist", str(ALLOWLIST), *stubbed_modules()])
    assert result.returncode == 0, f"stubtest: the .pyi stubs differ from the compiled modules:\n" \
                                   f"{result.stdout}{result.stderr}"


def _typed_properties(cls_name: str) -> dict[str, str]:
    """The ``if TYPE_CHECKING:`` annotations in the body of ``rmqd.config.<cls_name>``: name -> annotation."""
    tree = ast.parse((ROOT / "rmqd" / "config" / "__init__.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    out: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out[item.target.id] = ast.unparse(item.annotation)
    return out


@pytest.mark.parametrize("cls_name", ["BrokerConfig", "NamesrvConfig"])
def test_config_typed_properties_match_its_defaults(cls_name: str) -> None:
    """A config class's properties are typed for the checker in an ``if TYPE_CHECKING:`` block: one annotation
    per key of ``_DEFAULTS``, of the default's type (``X | None`` where the default is None)."""
    import rmqd.config

    typed = _typed_properties(cls_name)
    defaults = getattr(rmqd.config, cls_name)._DEFAULTS
    assert sorted(set(defaults) - set(typed)) == [], "properties without a type"
    assert sorted(set(typed) - set(defaults)) == [], "types of no property"
    wrong = {}
    for key, default in defaults.items():
        annotation = typed[key]
        if default is None:
            ok = annotation.endswith("| None")
        else:
            ok = annotation.removesuffix(" | None") == type(default).__name__
        if not ok:
            wrong[key] = (annotation, default)
    assert wrong == {}, "annotation differs from the default's type"
