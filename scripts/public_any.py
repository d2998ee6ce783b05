"""Count ``Any`` in the public signatures of rmqd's packages (the measure of issue 41's type-checking work).

A public signature is a module-level function, a class, or a method / class attribute of a public class
whose name does not start with ``_`` (``__init__`` and the other dunders count). One is counted for each
parameter that has no annotation or whose annotation names ``Any``, each return that has none (except
``__init__``) or names ``Any``, and each annotated class attribute (dataclass fields: constructor
parameters) that names ``Any``. ``self`` / ``cls`` are not counted.

    python3 scripts/public_any.py                 # every package under rmqd/
    python3 scripts/public_any.py store remoting  # these packages, with each place
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Iterator, Optional, Union

ROOT = Path(__file__).resolve().parent.parent / "rmqd"

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def names_any(annotation: Optional[ast.expr]) -> bool:
    """The annotation mentions ``Any`` (``Any``, ``typing.Any``, ``dict[str, Any]``, ``"Any"``)."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if names_any(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
    return False


def is_public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def function_findings(fn: FunctionNode, in_class: bool) -> Iterator[str]:
    args = fn.args
    params = args.posonlyargs + args.args
    if in_class and params and not any(isinstance(d, ast.Name) and d.id == "staticmethod"
                                       for d in fn.decorator_list):
        params = params[1:]                       # self / cls
    params = params + args.kwonlyargs
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    for arg in params:
        if arg.annotation is None:
            yield f"{fn.name}({arg.arg}) unannotated"
        elif names_any(arg.annotation):
            yield f"{fn.name}({arg.arg}: Any)"
    if fn.returns is None:
        if fn.name != "__init__":
            yield f"{fn.name}() -> unannotated"
    elif names_any(fn.returns):
        yield f"{fn.name}() -> Any"


def module_findings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_public(node.name):
            for finding in function_findings(node, in_class=False):
                yield node.lineno, finding
        elif isinstance(node, ast.ClassDef) and is_public(node.name):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_public(member.name):
                    for finding in function_findings(member, in_class=True):
                        yield member.lineno, f"{node.name}.{finding}"
                elif (isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name)
                      and is_public(member.target.id) and names_any(member.annotation)):
                    yield member.lineno, f"{node.name}.{member.target.id}: Any"


def package_findings(package: str) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if "_pb2" in path.name:
            continue
        rel = path.relative_to(ROOT.parent).as_posix()
        found += [f"{rel}:{line}: {finding}" for line, finding in module_findings(path)]
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", help="packages under rmqd/ (default: all, counts only)")
    opts = parser.parse_args(argv)
    packages = opts.packages or sorted(p.name for p in ROOT.iterdir()
                                       if p.is_dir() and (p / "__init__.py").exists())
    total = 0
    for package in packages:
        found = package_findings(package)
        total += len(found)
        print(f"{package:12} {len(found)}")
        if opts.packages:
            for line in found:
                print(f"    {line}")
    print(f"{'total':12} {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
