"""Orderly POP (a FIFO group, or ``order=true``): a queue hands out one batch at a time, in order; a batch
not acked in its invisible time comes back from the same queue with its count, then the DLQ."""
from __future__ import annotations

import threading
import time

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.testing import EmbeddedServer
from tests.kit.waits import poll
from tests.pop.pop_helpers import ack, create_group, create_topic, extra_info, pop, popped, send


@pytest.fixture(scope="module")
def server():
    with EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1"}) as s:
        yield s


def test_one_batch_at_a_time_and_redelivery_in_order(client, server):
    create_topic(client, "OrdT")
    create_group(client, "OrdG", orderly=True)
    uniq = [send(client, "OrdT", f"o{i}".encode()) for i in range(4)]
    first = pop(client, "OrdT", "OrdG", max_nums=2, invisible=1000, order=True)
    assert [m.body for m in popped(first)] == [b"o0", b"o1"]
    assert first.ext_fields["orderCountInfo"] == "0 0 0"
    assert pop(client, "OrdT", "OrdG", order=True).code == 210          # the queue is locked by that batch
    m0 = popped(first)[0]
    assert ack(client, "OrdT", "OrdG", extra_info(first, m0), m0.queue_offset).code == 0
    assert pop(client, "OrdT", "OrdG", order=True).code == 210          # o1 is still out
    again = poll(lambda: (r := pop(client, "OrdT", "OrdG", max_nums=2, invisible=5000, order=True)).code == 0
                 and r, timeout=5)
    assert [m.properties["UNIQ_KEY"] for m in popped(again)] == [uniq[1]]  # o1 again, not o2
    assert again.ext_fields["orderCountInfo"] == "0 0 1"
    # a parked orderly pop goes on as soon as the batch is acked
    out = {}
    c2 = BlockingClient(server.broker_addr)
    th = threading.Thread(target=lambda: out.update(r=pop(c2, "OrdT", "OrdG", poll=5000, order=True),
                                                    t=time.monotonic()))
    th.start()
    time.sleep(0.3)
    m1 = popped(again)[0]
    t_ack = time.monotonic()
    assert ack(client, "OrdT", "OrdG", extra_info(again, m1), m1.queue_offset).code == 0
    th.join(10)
    c2.close()
    assert [m.body for m in popped(out["r"])] == [b"o2", b"o3"] and out["t"] - t_ack < 2


def test_orderly_dlq_after_max_attempts_then_the_next_message(client):
    create_topic(client, "OrdD")
    create_group(client, "OrdDG", retry_max_times=1, orderly=True)
    poison = send(client, "OrdD", b"poison")
    send(client, "OrdD", b"next")
    bodies = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and b"next" not in bodies:
        bodies += [m.body for m in popped(pop(client, "OrdD", "OrdDG", max_nums=1, invisible=400, poll=600,
                                              order=True))]
    assert bodies == [b"poison", b"poison", b"next"]
    dlq = poll(lambda: popped(pop(client, "%DLQ%OrdDG", "dlq-reader", init_mode=1)), timeout=5)
    assert [m.properties["UNIQ_KEY"] for m in dlq] == [poison]
