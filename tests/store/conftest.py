import pytest

from rmqd.store.message_store import MessageStore, StoreConfig


class FakeClock:
    def __init__(self, start_ms: int = 1_700_000_000_000):
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def small_config(root, **kw) -> StoreConfig:
    base = dict(mapped_file_size_commitlog=64 * 1024, mapped_file_size_consume_queue=20 * 100,
                max_hash_slot_num=64, max_index_num=200, max_message_size=16 * 1024,
                flush_interval_commitlog_ms=50, flush_interval_consume_queue_ms=100,
                clean_resource_interval_ms=3_600_000)
    base.update(kw)
    return StoreConfig(str(root), **base)


@pytest.fixture
def make_store(tmp_path):
    stores = []

    def factory(root=None, **kw):
        s = MessageStore(small_config(root or tmp_path / "store", **kw))
        s.start()
        stores.append(s)
        return s

    yield factory
    for s in stores:
        s.shutdown()
