"""POP consumption state, shared by the remoting POP codes and the gRPC endpoint.

RocketMQ 5.x POP: the broker assigns queues, hands out messages with an invisible time and takes
them back (revive) unless they are acked in time.  Modules:

- ``extra_info``: the ``extraInfo``/``POP_CK`` text, the response offset infos and gRPC receipt handles;
- ``checkpoint``: one pop's checkpoint (queue offsets handed out, which are acked) and its revive-log records;
- ``revive``: the crash-safe revive log (the revive system topic) and its replay, the revive thread;
- ``service``: ``PopService`` (pop, ack, change invisible time, peek, notification), made of ``queue_reads``
  (pop preconditions, one queue read handed out), ``orderly`` (one batch out per orderly or lite queue), ``acks``
  (ack, renew, change invisible time) and ``revive``; ``results``: what a pop hands out;
- ``queue_selector``: the order a pop reads a topic's queues in;
- ``long_polling``, ``frontend``: parked pops, the bounded executor both front ends await;
- ``codes``: the refusals (``PopError``) and 5.x response codes.
- ``handles``: what POP is given of the broker (store, topics, groups, offsets, metrics), as narrow Protocols.
"""
from rmqd.pop.service import PopError, PopResult, PopService  # noqa: F401 (the package's API)
