"""The layering rules of docs/architecture.md, checked on the source with ``ast`` (no import of rmqd needed).

* Request handlers (processors/), broker services (broker/) and the front ends beside the broker (grpc/,
  console/, metrics/, admin/) never import ``rmqd.broker.controller``: they get their collaborators passed in.
* Nobody looks the broker's parts up by name (``getattr(broker, "...")``): every part is declared where the
  broker is built.
* The lower layers (store/, remoting/, cython_ext/) never import the request handlers or the broker.
* lite/ (priority and Lite Mode, beside processors/) is imported by none of the layers it uses (pop/, processors/,
  store/, remoting/, cython_ext/).
* processors/ and broker/ use no other object's ``_private`` attribute and import no ``_private`` name.
* Every package of rmqd has its place in ``LAYERS`` and imports only packages of its own layer or below (a
  package's settings modules, ``<package>.config`` or ``*_config``, and the generated protocol, ``rmqd.grpc.pb``, may be read from
  anywhere; the composition root, ``broker/controller.py``, assembles everything).
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent / "rmqd"

NO_CONTROLLER = ("processors", "broker", "grpc", "console", "metrics", "admin", "lite", "pop")
LOWER_LAYERS = ("store", "remoting", "cython_ext")
BELOW_LITE = ("pop", "processors", *LOWER_LAYERS)
NO_PRIVATE_REACH = ("processors", "broker")
# The receivers a getattr lookup on the broker goes through.
BROKER_NAMES = re.compile(r"^(broker|broker_ctl|controller|ctx)$")

# The layers of docs/architecture.md, lowest first: a package imports only packages of its layer or below.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("base", frozenset({"common", "cython_ext"})),
    ("settings", frozenset({"config", "tls"})),
    ("wire", frozenset({"remoting", "filter", "acl", "auth"})),
    ("storage and cluster state", frozenset({"store", "namesrv", "controller"})),
    ("replication", frozenset({"replicas"})),
    ("broker", frozenset({"broker", "processors", "pop", "lite"})),
    ("endpoints", frozenset({"metrics", "console", "grpc", "proxy", "admin"})),
    ("applications", frozenset({"runtime", "pipeline", "spark", "testing"})),
)
# Modules whose layer is not their package's: the metric instruments the broker and the controller record into
# (the exporter, metrics/endpoint.py and the collectors, is an endpoint).
MODULE_LAYERS = {"rmqd.metrics.recorders": "storage and cluster state", "rmqd.metrics.histogram": "base",
                 "rmqd.metrics.families": "base"}
COMPOSITION_ROOT = "broker/controller.py"

# Store internals the processors still reach until the MessageStore API of the store-layers work replaces them
# (that merge deletes these entries; an entry whose access is gone fails below, so the list only shrinks).
PENDING_STORE_API: set[tuple[str, str]] = set()


def modules(*packages: str, suffixes: tuple[str, ...] = (".py",)) -> Iterator[tuple[str, Path]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*")):
            if path.suffix in suffixes and "_pb2" not in path.name:
                yield path.relative_to(ROOT).as_posix(), path


@functools.lru_cache(maxsize=None)
def tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imported_modules(node: ast.AST) -> Iterator[tuple[int, str]]:
    """Every module an ``import`` / ``from ... import`` names (also under TYPE_CHECKING and in functions)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Import):
            for alias in n.names:
                yield n.lineno, alias.name
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            yield n.lineno, n.module
            for alias in n.names:
                yield n.lineno, f"{n.module}.{alias.name}"


def dotted(node: ast.AST) -> str:
    """``a.b.c`` of a Name/Attribute chain ('' for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def controller_imports() -> list[str]:
    found = {}
    for rel, path in modules(*NO_CONTROLLER):
        for line, name in imported_modules(tree(path)):
            if name == "rmqd.broker.controller" or name.startswith("rmqd.broker.controller."):
                found.setdefault((rel, line), f"{rel}:{line} imports rmqd.broker.controller")
    return list(found.values())


def broker_getattr_lookups() -> list[str]:
    found = []
    for rel, path in modules(*[p.name for p in ROOT.iterdir() if p.is_dir()]):
        found += _getattr_lookups(rel, path)
    for path in sorted(ROOT.glob("*.py")):
        found += _getattr_lookups(path.name, path)
    return found


def _getattr_lookups(rel: str, path: Path) -> list[str]:
    out = []
    for n in ast.walk(tree(path)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr") \
                and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
            receiver = dotted(n.args[0])
            if receiver and BROKER_NAMES.match(receiver.rsplit(".", 1)[-1]):
                out.append(f"{rel}:{n.lineno} {n.func.id}({receiver}, {n.args[1].value!r})")
    return out


_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(rmqd[\w.]*)\s+c?import|c?import\s+(rmqd[\w.]*))", re.M)


def upward_imports() -> list[str]:
    found = []
    upward = re.compile(r"^rmqd\.(processors|broker|runtime)(\.|$)")
    for rel, path in modules(*LOWER_LAYERS):
        for line, name in imported_modules(tree(path)):
            if upward.match(name) and (not found or not found[-1].startswith(f"{rel}:{line} ")):
                found.append(f"{rel}:{line} imports {name}")
    for rel, path in modules("cython_ext", suffixes=(".pyx", ".pxd", ".pxi")):
        text = path.read_text(encoding="utf-8")
        for m in _PYX_IMPORT.finditer(text):
            name = m.group(1) or m.group(2)
            if upward.match(name):
                found.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1} imports {name}")
    return found


def imports_of_lite() -> list[str]:
    found = []
    for rel, path in modules(*BELOW_LITE):
        for line, name in imported_modules(tree(path)):
            if (name == "rmqd.lite" or name.startswith("rmqd.lite.")) and \
                    (not found or not found[-1].startswith(f"{rel}:{line} ")):
                found.append(f"{rel}:{line} imports {name}")
    return found


def private_reach_ins() -> list[tuple[str, str, str]]:
    """(module, private name, where) for each ``x._name`` with x not self/cls, and each imported ``_name``."""
    found = []
    for rel, path in modules(*NO_PRIVATE_REACH):
        for n in ast.walk(tree(path)):
            if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__"):
                receiver = dotted(n.value)
                if receiver in ("self", "cls"):
                    continue
                found.append((rel, n.attr, f"{rel}:{n.lineno} {receiver or '<expr>'}.{n.attr}"))
            elif isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("rmqd"):
                for alias in n.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append((rel, alias.name, f"{rel}:{n.lineno} from {n.module} import {alias.name}"))
    return found


def test_no_handler_service_or_front_end_imports_the_broker_controller():
    found = controller_imports()
    assert not found, f"{len(found)} imports of the controller:\n" + "\n".join(found)


def test_the_broker_is_never_searched_by_attribute_name():
    found = broker_getattr_lookups()
    assert not found, f"{len(found)} lookups by name:\n" + "\n".join(found)


def test_lower_layers_never_import_handlers_or_the_broker():
    found = upward_imports()
    assert not found, f"{len(found)} upward imports:\n" + "\n".join(found)


def test_lite_is_imported_by_no_layer_it_uses():
    found = imports_of_lite()
    assert not found, f"{len(found)} imports of rmqd.lite from below it:\n" + "\n".join(found)


def test_no_private_reach_ins_from_processors_or_broker_services():
    found = private_reach_ins()
    unexpected = [where for rel, name, where in found if (rel, name) not in PENDING_STORE_API]
    assert not unexpected, f"{len(unexpected)} private reach-ins:\n" + "\n".join(unexpected)
    stale = PENDING_STORE_API - {(rel, name) for rel, name, _ in found}
    assert not stale, f"these store reach-ins are gone: drop them from PENDING_STORE_API: {sorted(stale)}"


def _rank(layer: str) -> int:
    return [name for name, _ in LAYERS].index(layer)


def layer_of_package(package: str) -> int | None:
    for i, (_, packages) in enumerate(LAYERS):
        if package in packages:
            return i
    return None


def downward_violations() -> list[str]:
    found = []
    for rel, path in modules(*sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())):
        if rel == COMPOSITION_ROOT:
            continue
        package = rel.split("/", 1)[0]
        own = MODULE_LAYERS.get("rmqd." + rel[:-3].replace("/", "."))
        mine = _rank(own) if own else layer_of_package(package)
        assert mine is not None
        for line, name in imported_modules(tree(path)):
            parts = name.split(".")
            if parts[0] != "rmqd" or len(parts) < 2 or parts[1] == package:
                continue
            if _is_settings(parts) or name.startswith("rmqd.grpc.pb") or parts[1] not in _packages():
                continue
            target = next((_rank(MODULE_LAYERS[m]) for m in MODULE_LAYERS if name == m or name.startswith(m + ".")),
                          layer_of_package(parts[1]))
            if target is not None and target > mine:
                found.append(f"{rel}:{line} imports {name} ({LAYERS[target][0]} above {LAYERS[mine][0]})")
    return sorted(set(found))


def _is_settings(parts: list[str]) -> bool:
    """``rmqd.<package>[.<sub>].config`` or ``..._config`` (and the names imported from it)."""
    return any(p == "config" or p.endswith("_config") for p in parts[2:])


@functools.lru_cache(maxsize=None)
def _packages() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def test_every_package_has_a_layer():
    missing = sorted(p for p in _packages() if layer_of_package(p) is None)
    assert not missing, f"packages with no place in LAYERS: {missing}"
    stale = sorted(p for _, packages in LAYERS for p in packages if p not in _packages())
    assert not stale, f"LAYERS names packages that are gone: {stale}"


def test_packages_import_only_their_layer_or_below():
    found = downward_violations()
    assert not found, f"{len(found)} upward imports:\n" + "\n".join(found)


# The only store code that may take the whole local store down the chain (``message_store``): its replication,
# which appends to and truncates the CommitLog, and the chain's own definition.
WHOLE_LOCAL_STORE = ("store/ha/", "store/layer.py", "store/message_store.py")


def chain_reach_ins() -> list[str]:
    """Store layers talk to the next layer through the API: the local store's parts come passed in (a
    LocalStoreAPI from build_store), never as ``.local`` / ``.inner.local`` / ``.inner.inner`` down the chain."""
    found = []
    for rel, path in modules("store"):
        for n in ast.walk(tree(path)):
            if not isinstance(n, ast.Attribute):
                continue
            name = dotted(n)
            if n.attr == "local" or name.endswith("inner.inner") or ".inner.inner." in name:
                found.append(f"{rel}:{n.lineno} {name or n.attr}")
            elif n.attr == "message_store" and not rel.startswith(WHOLE_LOCAL_STORE):
                found.append(f"{rel}:{n.lineno} {name or n.attr} (only replication takes the whole local store)")
    return found


def test_store_layers_reach_the_local_store_only_through_what_is_passed_in():
    found = chain_reach_ins()
    assert not found, f"{len(found)} reach-ins down the store chain:\n" + "\n".join(found)
