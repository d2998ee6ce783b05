"""mkdocs hooks: pages that show a file kept at the repository root, with links that work on both sides.

README.md, BENCHMARKS.md and RELIABILITY.md stay at the root (scripts write BENCHMARKS.md; the README is the
repository's front page). A page in docs/ shows one of them with an include block::

    <!-- rmqd-include: ../BENCHMARKS.md -->
    The measurements are in [BENCHMARKS.md](../BENCHMARKS.md).
    <!-- rmqd-include-end -->

On GitHub the text between the markers is shown; in the site the whole block is replaced by the file. Links
are written as they work in the repository (``docs/configuration.md`` from the README, ``../BENCHMARKS.md``
from a page) and rewritten here to the page that shows their target, so ``mkdocs build --strict`` checks them
all: a target that is neither a page nor a file shown by one fails the build.
"""
from __future__ import annotations

import os
import posixpath
import re

INCLUDE = re.compile(r"<!-- rmqd-include: (?P<path>\S+) -->.*?<!-- rmqd-include-end -->", re.S)
LINK = re.compile(r"(?P<pre>\]\()(?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?(?P<post>\))")


def _root_files(docs_dir: str) -> dict[str, str]:
    """Absolute path of a file shown by a page -> that page (relative to docs/)."""
    shown = {}
    for dirpath, _, files in os.walk(docs_dir):
        for name in files:
            if not name.endswith(".md"):
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                text = f.read()
            page = os.path.relpath(os.path.join(dirpath, name), docs_dir).replace(os.sep, "/")
            for m in INCLUDE.finditer(text):
                shown[os.path.normpath(os.path.join(dirpath, m.group("path")))] = page
    return shown


def _rewrite_links(markdown: str, source_dir: str, docs_dir: str, page_dir: str, shown: dict[str, str]) -> str:
    """Relative links of a text written in ``source_dir`` (absolute), now shown on a page in ``page_dir``
    (relative to docs/): each points where it pointed, or to the page that shows that file."""
    def fix(m: re.Match) -> str:
        target = m.group("target")
        if "://" in target or target.startswith(("mailto:", "/")):
            return m.group(0)
        resolved = os.path.normpath(os.path.join(source_dir, target))
        if resolved in shown:
            resolved = os.path.join(docs_dir, shown[resolved])
        new = os.path.relpath(resolved, os.path.join(docs_dir, page_dir)).replace(os.sep, "/")
        return f"{m.group('pre')}{new}{m.group('anchor') or ''}{m.group('post')}"
    return LINK.sub(fix, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs_dir = os.path.abspath(config["docs_dir"])
    shown = _root_files(docs_dir)
    page_dir = posixpath.dirname(page.file.src_uri)
    here = os.path.join(docs_dir, page_dir)

    def include(m: re.Match) -> str:
        path = os.path.normpath(os.path.join(here, m.group("path")))
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return _rewrite_links(text, os.path.dirname(path), docs_dir, page_dir, shown)
    markdown = INCLUDE.sub(include, markdown)
    # the page's own links to files that pages show (../BENCHMARKS.md) go to those pages
    return _rewrite_links(markdown, here, docs_dir, page_dir, shown)
