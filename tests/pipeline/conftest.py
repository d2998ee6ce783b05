"""The pipeline tests' shared store and archive (module-independent: made once per session)."""
from __future__ import annotations

import pytest

from tests.pipeline.helpers import fill, open_store


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory):
    """2,400 varied messages over ten 64 KB CommitLog files (nine sealed), across a UTC midnight."""
    root = str(tmp_path_factory.mktemp("pipe-store"))
    store = open_store(root)
    fill(store, 2400, seed=11)
    store.shutdown()
    return root


@pytest.fixture(scope="session")
def archived(spark, store_dir, tmp_path_factory):
    """(output directory, summary) of one uninterrupted archive run of store_dir."""
    from rmqd.pipeline.archive import Archive
    out = str(tmp_path_factory.mktemp("pipe-archive") / "arch")
    summary = Archive(store_dir, out).run(spark)
    return out, summary
