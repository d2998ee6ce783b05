"""C put engine specifics: per-topic listeners, MessageToStore value semantics, page warmer."""
from rmqd.cython_ext.store_put import populate
from rmqd.store.message import MessageToStore, decode_message
from rmqd.store.message_store import MessageStore, StoreConfig


def _store(tmp_path, **kw) -> MessageStore:
    s = MessageStore(StoreConfig(str(tmp_path), mapped_file_size_commitlog=1 << 20,
                                 max_hash_slot_num=64, max_index_num=100,
                                 disk_usage=lambda p: 10.0, **kw))
    s.start()
    return s


def test_topic_listener_and_batch(tmp_path):
    s = _store(tmp_path)
    try:
        seen_all, seen_b = [], []
        s.add_dispatch_listener(seen_all.append)
        s.add_dispatch_listener(seen_b.append, topic="B")
        r = s.put_messages([MessageToStore.create("A", 1, b"a%d" % i, {"KEYS": "k%d x" % i})
                            for i in range(3)])
        assert r.ok and r.msg_count == 3 and r.queue_offset == 0 and len(r.wrote_offsets) == 3
        assert s.put_message(MessageToStore("B", 0, b"b")).ok
        assert [q.topic for q in seen_all] == ["A", "A", "A", "B"]
        assert [(q.topic, q.queue_offset) for q in seen_b] == [("B", 0)]
        assert [q.queue_offset for q in seen_all[:3]] == [0, 1, 2]
        assert s.get_max_offset("A", 1) == 3
        m = decode_message(s.read_message(r.wrote_offsets[2]))
        assert m.body == b"a2" and m.queue_offset == 2 and m.properties["KEYS"] == "k2 x"
        assert len(s.query_message("A", "x", 10).messages) == 3
        assert len(s.query_message("A", "k1", 10).messages) == 1
    finally:
        s.shutdown()


def test_message_to_store_value_semantics():
    a = MessageToStore.create("T", 2, b"x", {"TAGS": "t", "UNIQ_KEY": "u"}, flag=3)
    b = MessageToStore("T", 2, b"x", "TAGS\x01t\x02UNIQ_KEY\x01u", 3, tags_code=a.tags_code,
                       uniq_key="u")
    assert a == b and a.keys is None and a.uniq_key == "u"
    b.sys_flag &= ~0xC
    b.topic = "U"
    assert a != b and "topic='U'" in repr(b)


def test_rejects_before_writing(tmp_path):
    s = _store(tmp_path)
    try:
        before = s.commitlog_max_offset()
        r = s.put_messages([MessageToStore("T", 0, b"ok"), MessageToStore("", 0, b"bad")])
        assert not r.ok and s.commitlog_max_offset() == before
    finally:
        s.shutdown()


def test_populate_and_warmer(tmp_path):
    s = _store(tmp_path)
    try:
        s.put_message(MessageToStore("T", 0, b"x"))
        mf = s.commitlog.mfq.last()
        assert populate(mf.ptr, 0, 1 << 16) in (0, 22)   # 22: kernel without MADV_POPULATE_WRITE
        s._warmer.warm_once() if s._warmer else None
        assert decode_message(s.read_message(0)).body == b"x"
    finally:
        s.shutdown()
    assert populate(mf.ptr, 0, 4096) == 0                  # released pointer: no-op


def test_lock_time_mills_is_how_long_the_running_put_holds_the_lock(tmp_path):
    """pageCacheLockTimeMills (GET_BROKER_RUNTIME_INFO): Java's CommitLog.lockTimeMills, from the put path."""
    import threading
    import time

    s = _store(tmp_path)
    entered, release = threading.Event(), threading.Event()
    real_reserve = s.commitlog.reserve

    def slow_reserve(total):                  # the first put maps its segment under the put lock
        entered.set()
        release.wait(10)
        return real_reserve(total)

    s.commitlog.reserve = slow_reserve
    try:
        assert s.lock_time_mills() == 0
        t = threading.Thread(target=lambda: s.put_message(MessageToStore("L", 0, b"x")))
        t.start()
        assert entered.wait(10)
        time.sleep(0.3)
        held = s.lock_time_mills()
        release.set()
        t.join(10)
        assert 250 <= held < 10_000, held
        assert s.lock_time_mills() == 0 and s.get_max_offset("L", 0) == 1
    finally:
        release.set()
        s.shutdown()


def test_dispatch_behind_bytes_follows_the_dispatched_offset(tmp_path):
    """dispatchBehindBytes (GET_BROKER_RUNTIME_INFO): CommitLog max minus what ConsumeQueue/index hold."""
    s = _store(tmp_path)
    try:
        assert s.stats.dispatch_behind_bytes == 0
        for i in range(3):
            assert s.put_message(MessageToStore("D", 0, b"x" * (100 + i))).ok
        assert s._engine.dispatched_where == s.commitlog.max_offset() > 0
        assert s.stats.dispatch_behind_bytes == 0
        s._engine.dispatched_where -= 10                 # as seen while a record is being written
        assert s.stats.dispatch_behind_bytes == 10
    finally:
        s.shutdown()
