"""Priority messages (5.4) and Lite Mode (5.5) in one broker: built and wired here.

:meth:`LitePriority.build` (before POP): the store/lite layer (:class:`rmqd.store.lite.LiteStore`: the lite
index and the views POP reads lite topics through) and the priority queue selector POP orders queues with.
:meth:`LitePriority.install` (after POP): the lite registry and delivery
(:class:`rmqd.lite.subscriptions.LiteSubscriptionManager`), the send hooks (priority queue, lite topic checks and
quota) and the remoting codes (:mod:`rmqd.lite.remoting`), and :class:`rmqd.lite.rounds.LiteRounds`, the
background rounds (due in-flight batches, blocked clients, quiet clients, idle lite topics, retention).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from rmqd.lite import priority_send
from rmqd.lite.config import LiteConfig, PriorityConfig
from rmqd.lite.parent_topics import fold_out
from rmqd.lite.priority_selector import PriorityQueueSelector
from rmqd.lite.rounds import LiteRounds
from rmqd.lite.subscriptions import LiteSubscriptionManager
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response
from rmqd.store.lite import LiteStore
from rmqd.store.lite.names import LITE_TOPIC_PROPERTY, check_name, lmq_name
from rmqd.store.message import find_property
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from rmqd.broker.context import BrokerContext
    from rmqd.cython_ext.store_put import MessageToStore
    from rmqd.pop.frontend import PopExecutor
    from rmqd.pop.service import PopService
    from rmqd.processors.send import SendContext, SendMessageProcessor
    from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
    from rmqd.store.layer import StoreChain
    from rmqd.store.metadata import TopicConfigManager

log = logging.getLogger(__name__)

INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"

LMQ_QUOTA_EXCEEDED = 2017                  # 5.5 ResponseCode
LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 2018


class LitePriority:
    """The broker's priority and Lite Mode parts (see the module docstring)."""

    def __init__(self, lite_config: LiteConfig, priority_config: PriorityConfig, lite_store: LiteStore) -> None:
        self.lite_config = lite_config
        self.priority_config = priority_config
        self.lite_store = lite_store
        self.queue_selector = PriorityQueueSelector(priority_config)
        self.manager: Optional[LiteSubscriptionManager] = None
        self.service: Optional[LiteRounds] = None
        self.refused_lite_sends = 0

    @classmethod
    def build(cls, properties: Mapping[str, str], store: StoreChain, topics: TopicConfigManager) -> "LitePriority":
        """Before POP is made: the store/lite layer over ``store`` and the queue selector."""
        return cls(LiteConfig.from_properties(properties), PriorityConfig.from_properties(properties),
                   LiteStore(store, topics))

    @staticmethod
    def fold_out(on_out: Callable[[str, str, int, int], None]) -> Callable[[str, str, int, int], None]:
        """POP's messages-out callback with lite topics counted under their parent."""
        return fold_out(on_out)

    def install(self, ctx: BrokerContext, pop_service: PopService, pop_executor: PopExecutor,
                send_processor: SendMessageProcessor, dispatcher: Dispatcher,
                pools: Mapping[str, ProcessorPool]) -> None:
        """After POP and the send processor are made: the registry, the send hooks, the remoting codes and the
        background service (the broker starts this object with its services)."""
        self.manager = LiteSubscriptionManager(self.lite_config, self.lite_store.index, pop_service,
                                               ctx.topics, ctx.groups, ctx.offsets)
        priority_send.install(send_processor)
        send_processor.add_before_store(self.before_store, (LITE_TOPIC_PROPERTY,))
        from rmqd.lite import remoting as lite_remoting
        lite_remoting.install(dispatcher, pools, ctx, pop_service, pop_executor, self)
        self.service = LiteRounds(self)

    def start(self) -> None:
        self.lite_store.start()
        if self.service is not None:
            self.service.start()

    def shutdown(self) -> None:
        if self.service is not None:
            self.service.shutdown()

    # ------------------------------------------------------------------ lite send hook
    def before_store(self, ctx: SendContext, msgs: list[MessageToStore]) -> Optional[RemotingCommand]:
        """Lite messages: a valid name; a LITE parent is indexed from now on; with ``enableLmqQuota``, a new lite
        topic beyond ``maxLmqConsumeQueueNum`` is refused (LMQ_QUOTA_EXCEEDED, 2017)."""
        tc = ctx.topic_config
        cfg = self.lite_config
        for m in msgs:
            props = m.properties or ""
            if LITE_TOPIC_PROPERTY not in props:
                continue
            lite = find_property(props, LITE_TOPIC_PROPERTY)
            reason = check_name(lite, cfg.maxLiteTopicSize)
            if reason or lite is None:      # check_name refuses a missing name
                self.refused_lite_sends += 1
                return error_response(ResponseCode.MESSAGE_ILLEGAL, f"illegal lite topic: {reason}")
            if not is_lite_topic(tc):
                continue                      # as Java: stored, not a lite message of a LITE parent
            self.lite_store.feed(tc.topic_name)
            index = self.lite_store.index
            if cfg.enableLmqQuota and not index.exists(tc.topic_name, lite) and \
                    index.lite_count >= cfg.maxLmqConsumeQueueNum:
                self.refused_lite_sends += 1
                return error_response(LMQ_QUOTA_EXCEEDED,
                                      f"[LMQ_CONSUME_QUEUE_NUM_EXCEEDED] the broker holds {index.lite_count} lite "
                                      f"topics, maxLmqConsumeQueueNum is {cfg.maxLmqConsumeQueueNum}")
            # as Java's SendMessageProcessor: the record names its LMQ (a 5.x client shows it as a user property)
            if INNER_MULTI_DISPATCH not in props:
                m.properties = f"{props}{'' if not props or props.endswith(chr(2)) else chr(2)}" \
                               f"{INNER_MULTI_DISPATCH}\x01{lmq_name(tc.topic_name, lite)}"
        return None
