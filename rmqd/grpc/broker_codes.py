"""The brokers' refusals as 5.x codes: what the proxy answers for a send, a pop, an ack or a change of invisible
time the broker refused (its cluster mapping; any other send refusal is the local proxy's INTERNAL_SERVER_ERROR
with the broker's remark)."""
from __future__ import annotations

from rmqd.grpc.pb import definition_pb2 as d
from rmqd.remoting.codes import ResponseCode

C = d.Code

#: send answers a client retries or tells apart
SEND_CODES: dict[int, d.Code.ValueType] = {ResponseCode.SYSTEM_BUSY: C.TOO_MANY_REQUESTS,
                                           2017: C.LITE_TOPIC_QUOTA_EXCEEDED}
#: a stored message whose flush or replication failed: (code, the send status the proxy names)
FLUSH_CODES: dict[int, tuple[d.Code.ValueType, str]] = {
    ResponseCode.FLUSH_DISK_TIMEOUT: (C.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
    ResponseCode.FLUSH_SLAVE_TIMEOUT: (C.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
    ResponseCode.SLAVE_NOT_AVAILABLE: (C.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE")}
#: a refused pop, ack or change of invisible time (rmqd.pop.codes.PopError's code)
POP_CODES: dict[int, d.Code.ValueType] = {
    ResponseCode.TOPIC_NOT_EXIST: C.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: C.CONSUMER_GROUP_NOT_FOUND, ResponseCode.NO_PERMISSION: C.FORBIDDEN, ResponseCode.NO_MESSAGE: C.INVALID_RECEIPT_HANDLE,
    ResponseCode.MESSAGE_ILLEGAL: C.INVALID_RECEIPT_HANDLE, 29: C.BAD_REQUEST}
#: an ack or a change of invisible time the broker refused (offset out of the queue, queue id out of the topic): the
#: 5.x local proxy turns every refusal into AckStatus.NO_EXIST (answered with the texts of rmqd.grpc.settle_rpcs)
SETTLE_REFUSED = frozenset({ResponseCode.NO_MESSAGE, ResponseCode.MESSAGE_ILLEGAL})
