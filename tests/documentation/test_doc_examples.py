"""Every code example of the README and docs/ runs: `sh` blocks against a started rmqd on free ports, `python`
blocks as scripts (Spark ones on the suite's SparkSession, 5.x client ones in its venv), `java` blocks compiled
against the 4.9.8 client and run. The rules are in docs/development.md ("Documentation"); a block marked
`# no-run: <why>` is reported as skipped with its reason (`-ra` lists them)."""
from __future__ import annotations

from pathlib import Path

import pytest

from documentation.doc_examples import PageRun, all_blocks, py5_interpreter

BLOCKS = all_blocks()
pytestmark = pytest.mark.timeout(600)      # a Spark block may start the suite's SparkSession (a JVM)


class Pages:
    """The page being run (its blocks come in document order); the previous page's servers stop when the next
    page starts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.current: PageRun | None = None
        self.py5: str | None = None

    def enter(self, path: Path) -> PageRun:
        if self.current is None or self.current.path != path:
            self.close()
            self.current = PageRun(path, self.root / path.name.replace(".md", ""))
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from documentation.doc_examples import REPO
    before = set(REPO.iterdir())
    p = Pages(tmp_path_factory.mktemp("doc-examples"))
    try:
        yield p
    finally:
        p.close()
    # an example writes into its page's directory, never into the repository (a relative path that Spark's JVM
    # resolved against its own working directory did once)
    assert set(REPO.iterdir()) <= before, f"examples wrote into the repository: {set(REPO.iterdir()) - before}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_example(block, pages, request):
    if block.no_run:
        pytest.skip(f"{block.id} is marked no-run: {block.no_run}")
    page = pages.enter(block.path)
    if page.needs_default_server(block):
        page.ensure_server()

    def py5() -> str:
        if pages.py5 is None:
            pages.py5 = py5_interpreter()
        return pages.py5
    page.run(block, spark=lambda: request.getfixturevalue("spark"), py5=py5)


def test_examples_were_found():
    """The runner sees the README's tour and every kind of block (a parser that finds nothing passes nothing)."""
    ids = {b.id.split(":")[0] for b in BLOCKS}
    assert "README.md" in ids and len(ids) >= 10
    assert {b.lang for b in BLOCKS} == {"sh", "python", "java"}
