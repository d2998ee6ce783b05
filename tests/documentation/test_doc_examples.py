"""Every code example of the README and docs/ runs: `sh` blocks against a started rmqd on free ports, `python`
blocks as scripts (Spark ones on the suite's SparkSession, 5.x client ones in its venv), `java` blocks compiled
against the 4.9.8 client and run. The rules are in docs/development.md ("Documentation"); a block marked
`# no-run: <why>` is not run; :func:`test_no_run_blocks_say_why` checks each gives its reason."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.documentation.doc_examples import PageRun, all_blocks, py5_interpreter

BLOCKS = all_blocks()
RUN = [b for b in BLOCKS if not b.no_run]
# Directories other suites' fixtures make in the repository (ignored by git): the 5.x Python and Node clients
FIXTURE_DIRS = {".venv-py5", ".node-client5"}
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
    from tests.documentation.doc_examples import REPO
    before = set(REPO.iterdir())
    p = Pages(tmp_path_factory.mktemp("doc-examples"))
    try:
        yield p
    finally:
        p.close()
    # an example writes into its page's directory, never into the repository (a relative path that Spark's JVM
    # resolved against its own working directory did once)
    wrote = {p for p in set(REPO.iterdir()) - before if p.name not in FIXTURE_DIRS}
    assert not wrote, f"examples wrote into the repository: {wrote}"


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_example(block, pages, request):
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


def test_no_run_blocks_say_why():
    """The few blocks that cannot run here (the install commands themselves, a whole-suite run) say why, and
    stay few."""
    no_run = [b for b in BLOCKS if b.no_run]
    assert all(len(b.no_run.strip()) >= 10 for b in no_run), [(b.id, b.no_run) for b in no_run]
    assert len(no_run) <= len(BLOCKS) // 10, [b.id for b in no_run]
