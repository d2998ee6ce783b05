"""Dispatch listener filters: by topic, and by a live container of watched (topic, queue) keys."""
from rmqd.store.message import MessageToStore
from rmqd.store.message_store import MessageStore, StoreConfig


def put(store, topic, qid):
    m = MessageToStore(topic, qid, b"x", "TAGS\x01t", 0, 0, 1, ("127.0.0.1", 1), ("127.0.0.1", 2), 0, 0, 0, None, None)
    assert store.put_message(m).ok


def test_listener_filters(tmp_path):
    store = MessageStore(StoreConfig(store_root_dir=str(tmp_path), mapped_file_size_commitlog=1 << 20))
    store.start()
    try:
        every, by_topic, watched = [], [], []
        watch = {}
        store.add_dispatch_listener(lambda r: every.append((r.topic, r.queue_id)))
        store.add_dispatch_listener(lambda r: by_topic.append((r.topic, r.queue_id)), topic="A")
        store.add_dispatch_listener(lambda r: watched.append((r.topic, r.queue_id)), watch=watch)
        put(store, "A", 0)
        put(store, "B", 1)
        watch[("B", 1)] = ["a hold"]          # the container is live: later puts see the new key
        put(store, "B", 1)
        put(store, "B", 2)
        assert every == [("A", 0), ("B", 1), ("B", 1), ("B", 2)]
        assert by_topic == [("A", 0)]
        assert watched == [("B", 1)]
    finally:
        store.shutdown()


def test_vanished_store_directory_refuses_writes_and_logs_once(tmp_path, caplog):
    import shutil
    store = MessageStore(StoreConfig(store_root_dir=str(tmp_path / "s"), mapped_file_size_commitlog=1 << 20))
    store.start()
    try:
        shutil.rmtree(tmp_path / "s" / "consumequeue", ignore_errors=True)
        with caplog.at_level("ERROR"):
            for _ in range(3):
                assert store.stats.consume_queue_disk_ratio == 100.0
        assert caplog.text.count("cannot read the disk usage") == 1
    finally:
        store.shutdown()
