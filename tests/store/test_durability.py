"""The durability seam: a put is answered once every CommitWait stage reached its offset; a stage that
times out gives the put's status (the place a SYNC_MASTER replica wait plugs in)."""
import threading

from rmqd.store.durability import Durability
from rmqd.store.message import MessageToStore
from rmqd.store.results import PutMessageStatus as P


class ReplicaWait:
    """A stand-in for an HA transfer wait: acknowledges offsets up to ``acked``."""
    timeout_status = P.FLUSH_SLAVE_TIMEOUT

    def __init__(self, acked: int) -> None:
        self.acked = acked
        self.asked: list[int] = []

    def on_reached(self, offset, done):
        self.asked.append(offset)
        threading.Thread(target=done, args=(offset <= self.acked,)).start()


def test_stages_run_in_order_and_the_first_timeout_decides():
    d = Durability()
    assert not d.waits and d.wait_durable(10, 1.0) is P.PUT_OK
    first, second = ReplicaWait(100), ReplicaWait(50)
    first.timeout_status = P.FLUSH_DISK_TIMEOUT
    d.add_stage(first)
    d.add_stage(second)
    assert d.wait_durable(40, 5.0) is P.PUT_OK and first.asked == [40] and second.asked == [40]
    assert d.wait_durable(60, 5.0) is P.FLUSH_SLAVE_TIMEOUT               # flushed, not replicated
    assert d.wait_durable(200, 5.0) is P.FLUSH_DISK_TIMEOUT and second.asked == [40, 60]   # stops at stage 1


def test_a_replica_stage_after_the_group_commit(make_store):
    s = make_store(flush_disk_type="SYNC_FLUSH")
    r = s.put_message(MessageToStore.create("T", 0, b"flushed"))
    assert r.status is P.PUT_OK and s.commitlog.flushed_where >= r.end_offset
    replica = ReplicaWait(acked=r.end_offset)
    s.durability.add_stage(replica)
    r2 = s.put_message(MessageToStore.create("T", 0, b"not yet replicated"))
    assert r2.status is P.FLUSH_SLAVE_TIMEOUT and replica.asked == [r2.end_offset]
    assert s.get_max_offset("T", 0) == 2                                   # stored all the same
    answers = []
    done = threading.Event()
    s.on_flushed(r.end_offset, lambda ok: (answers.append(ok), done.set()))
    assert done.wait(5) and answers == [True]
