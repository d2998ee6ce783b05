"""rmqd.proxy.popped: a broker's POP_MESSAGE answer read as the 5.x proxy reads it; the handles it makes are the
ones the broker takes back (ACK_MESSAGE), against a real rmqd broker."""
from __future__ import annotations

import pytest

from tests.pop.pop_helpers import ack, create_group, create_topic, extra_info, pop, popped, send
from rmqd.proxy.popped import parse_order_counts, parse_start_offsets, popped_records
from rmqd.remoting.client import BlockingClient
from rmqd.testing import EmbeddedServer


@pytest.fixture(scope="module")
def client():
    with EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1"}) as s:
        c = BlockingClient(s.broker_addr)
        yield c
        c.close()


def test_header_fields_parse():
    assert parse_start_offsets("0 1 5;1 0 7") == {("0", 1): 5, ("1", 0): 7}
    assert parse_start_offsets(None) == {}
    assert parse_order_counts("0 0 2;0 1 9 3") == {("0", 0): 2, ("0", 1, 9): 3}
    with pytest.raises(ValueError):
        parse_start_offsets("0 1")
    with pytest.raises(ValueError):
        parse_order_counts("0")


def test_handles_are_the_brokers_extra_info_and_ack_with_it(client):
    create_topic(client, "PxPopT", queues=2)
    create_group(client, "PxPopG")
    for i in range(4):
        send(client, "PxPopT", f"m{i}".encode(), queue_id=i % 2)
    resp = pop(client, "PxPopT", "PxPopG", invisible=30000)
    assert resp.code == 0
    records = popped_records(resp.ext_fields, resp.body_bytes(), "broker-a")
    assert sorted(r.message.body for r in records) == [b"m0", b"m1", b"m2", b"m3"]
    by_offset = {(m.queue_id, m.queue_offset): extra_info(resp, m) for m in popped(resp)}
    for r in records:
        assert r.handle.extra.encode() == by_offset[(r.message.queue_id, r.message.queue_offset)]
        assert r.handle.commit_log_offset == r.message.commit_log_offset and r.attempt == 0
        assert ack(client, "PxPopT", "PxPopG", r.handle.extra.encode(), r.message.queue_offset,
                   r.message.queue_id).code == 0
    assert pop(client, "PxPopT", "PxPopG").code != 0                 # every one acked: nothing left


def test_orderly_pop_counts_become_delivery_attempts(client):
    create_topic(client, "PxOrdT")
    create_group(client, "PxOrdG", orderly=True)
    send(client, "PxOrdT", b"o0")
    first = pop(client, "PxOrdT", "PxOrdG", invisible=30000, order=True)
    [rec] = popped_records(first.ext_fields, first.body_bytes(), "broker-a")
    assert rec.attempt == 1 and rec.message.body == b"o0"


def test_a_record_without_start_offset_is_refused():
    with pytest.raises(ValueError):
        popped_records({"popTime": "1", "invisibleTime": "1", "reviveQid": "0"}, _one_record(), "broker-a")


def _one_record() -> bytes:
    """One stored record, as a broker's POP body carries it (from a real rmqd broker)."""
    with EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1"}) as s:
        with BlockingClient(s.broker_addr) as c:
            create_topic(c, "PxRecT")
            create_group(c, "PxRecG")
            send(c, "PxRecT", b"x")
            return pop(c, "PxRecT", "PxRecG").body_bytes()
