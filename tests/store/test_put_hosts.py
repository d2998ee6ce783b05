"""The put engine's born/store host bytes past its host cache (4096 hosts): each record keeps the hosts
of its own message. Before the fix the packed bytes of an uncached host were freed as soon as the
message was prepared and the record was written from freed memory (wrong hosts in most records)."""
from rmqd.store.message import MessageToStore, decode_message
from rmqd.store.message_store import MessageStore, StoreConfig

CACHE = 4096


def test_hosts_beyond_the_host_cache_are_written_intact(tmp_path):
    s = MessageStore(StoreConfig(str(tmp_path), mapped_file_size_commitlog=1 << 20, disk_usage=lambda p: 10.0))
    s.start()
    try:
        for i in range(CACHE + 4):                       # fill the engine's host cache
            assert s.put_message(MessageToStore.create("Fill", 0, b"x", {}, born_host=(f"10.0.{i // 256}.{i % 256}", 1),
                                                       store_host=("127.0.0.1", 10911))).ok
        want = []
        for r in range(40):                              # batches of new hosts, born and store
            batch = [MessageToStore.create("T", 0, b"y", {}, born_host=(f"127.1.{r}.{k}", 4000 + k),
                                           store_host=(f"127.2.{r}.{k}", 5000 + k)) for k in range(8)]
            assert s.put_messages(batch).ok
            want += [(m.born_host, m.store_host) for m in batch]
        got = []
        off = 0
        while off < len(want):
            res = s.get_messages("T", 0, off, 32)
            got += [decode_message(bytes(b)) for b in res.buffers]
            off = res.next_begin_offset
        assert [(tuple(m.born_host), tuple(m.store_host)) for m in got] == want
    finally:
        s.shutdown()
