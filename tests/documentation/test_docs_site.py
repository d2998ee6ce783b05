"""The documentation site builds with `mkdocs build --strict` (a broken link, or a nav entry without its page,
fails), shows the README as its home page, and the README's two commands are the ones CI and the fresh-install
test run."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.documentation.doc_examples import REPO, blocks_of

pytestmark = pytest.mark.timeout(120)

INSTALL_AND_SERVE = "python3 -m pip install -e . && rmqd serve"
INSTALL_AND_TEST = "python3 -m pip install -e '.[test]' && python3 -m pytest"


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=100, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert "A 30-second tour" in home and 'href="configuration/"' in home      # the README, links rewritten
    assert "Benchmarks" in (tmp_path / "site" / "benchmarks" / "index.html").read_text()


def test_readme_commands_are_what_ci_and_the_install_test_run():
    first = blocks_of(REPO / "README.md")[0]
    commands = [ln for ln in first.code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert commands == [INSTALL_AND_SERVE, INSTALL_AND_TEST]
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert INSTALL_AND_TEST in ci, ".ci/run must run the README's test command verbatim"
