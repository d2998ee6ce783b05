"""rmqd.proxy.brokers.parse_cluster_info: a GET_BROKER_CLUSTER_INFO answer that is not the table it should be is a
TypeError (the directory's "unreadable cluster info": logged, the last table kept), null parts read as empty."""
from __future__ import annotations

import pytest

from rmqd.proxy.brokers import parse_cluster_info


def test_null_parts_read_as_empty():
    assert parse_cluster_info(b'{"brokerAddrTable":null}') == {}
    assert parse_cluster_info(b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":null}}}') == {"broker-a": {}}
    assert parse_cluster_info(b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"h:1"}}}}') == \
        {"broker-a": {0: "h:1"}}


@pytest.mark.parametrize("body", [b'[1, 2]', b'{"brokerAddrTable":[1]}', b'{"brokerAddrTable":{"a":7}}',
                                  b'{"brokerAddrTable":{"a":{"brokerAddrs":"x"}}}'])
def test_an_answer_of_another_shape_is_a_type_error(body):
    with pytest.raises(TypeError):
        parse_cluster_info(body)
