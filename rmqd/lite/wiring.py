"""Priority messages (5.4) and Lite Mode (5.5) in one broker: built and wired here.

:meth:`LitePriority.build` (before POP): the store/lite layer (:class:`rmqd.store.lite.LiteStore`: the lite
index and the views POP reads lite topics through) and the priority queue selector POP orders queues with.
:meth:`LitePriority.install` (after POP): the lite registry and delivery
(:class:`rmqd.lite.subscriptions.LiteSubscriptionManager`), the send hooks (priority queue, lite topic checks and
quota) and the remoting codes (:mod:`rmqd.lite.remoting`), and :class:`LiteService`, the
background rounds (due in-flight batches, blocked clients, quiet clients, idle lite topics, retention).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from rmqd.lite.config import LiteConfig, PriorityConfig
from rmqd.lite.subscriptions import LiteSubscriptionManager
from rmqd.lite.priority_selector import PriorityQueueSelector
from rmqd.lite import priority_send
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response
from rmqd.common.service_thread import ServiceThread
from rmqd.store.lite import LiteStore
from rmqd.store.lite.names import LITE_TOPIC_PROPERTY, check_name, lmq_name, parse_lmq
from rmqd.store.message import find_property
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from rmqd.broker.context import BrokerContext
    from rmqd.cython_ext.store_put import MessageToStore
    from rmqd.metrics.recorders import PopCounters
    from rmqd.pop.frontend import PopExecutor
    from rmqd.pop.service import PopService
    from rmqd.processors.send import SendContext, SendMessageProcessor
    from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
    from rmqd.store.layer import StoreChain
    from rmqd.store.lite.view import LiteStoreView, LiteTopicsView
    from rmqd.store.metadata import TopicConfigManager

log = logging.getLogger(__name__)

INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"

LMQ_QUOTA_EXCEEDED = 2017                  # 5.5 ResponseCode
LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 2018


def parent_topic(topic: str) -> str:
    """The LITE parent of an LMQ name, else the name itself (keeps metrics and stats per parent)."""
    pl = parse_lmq(topic) if topic[:1] == "%" else None
    return pl[0] if pl is not None else topic


class ParentTopicCounters:
    """POP's counters with LMQ names folded into their parent topic (one series per parent, not per lite topic)."""

    def __init__(self, counters: PopCounters) -> None:
        self._counters = counters

    def on_revive_put(self, group: str, topic: str, tag: str, status: str) -> None:
        self._counters.on_revive_put(group, parent_topic(topic), tag, status)

    def on_settled(self, group: str, topic: str, revive_qid: int, ck_records: int, ack_records: int) -> None:
        self._counters.on_settled(group, parent_topic(topic), revive_qid, ck_records, ack_records)

    def on_retry_put(self, group: str, topic: str, status: str) -> None:
        self._counters.on_retry_put(group, parent_topic(topic), status)


class LiteService(ServiceThread):
    """Lite Mode's background rounds (once a second; each kind of work at its own Java interval)."""

    def __init__(self, lp: "LitePriority") -> None:
        super().__init__("lite-service", interval=0.2)
        self.lp = lp
        self._last: dict[str, float] = {}
        self.started = time.monotonic()

    def _due(self, what: str, interval_ms: int) -> bool:
        now = time.monotonic()
        if now - self._last.get(what, self.started) >= interval_ms / 1000.0:
            self._last[what] = now
            return True
        return False

    def run_once(self) -> None:
        m, cfg = self.lp.manager, self.lp.lite_config
        assert m is not None            # LitePriority.install makes the manager before this service
        m.run_due()
        if self._due("events", cfg.liteEventCheckInterval):
            m.check_events()
        if self._due("clients", cfg.liteSubscriptionCheckInterval):
            m.expire_clients()
        if (time.monotonic() - self.started) * 1000 >= cfg.minLiteTTl and self._due("ttl", cfg.liteTtlCheckInterval):
            m.sweep_expired()
        if self._due("trim", 10_000):
            self.lp.lite_store.trim()


class LitePriority:
    """The broker's priority and Lite Mode parts (see the module docstring)."""

    def __init__(self, lite_config: LiteConfig, priority_config: PriorityConfig, lite_store: LiteStore) -> None:
        self.lite_config = lite_config
        self.priority_config = priority_config
        self.lite_store = lite_store
        self.queue_selector = PriorityQueueSelector(priority_config)
        self.manager: Optional[LiteSubscriptionManager] = None
        self.service: Optional[LiteService] = None
        self.refused_lite_sends = 0

    @classmethod
    def build(cls, properties: Mapping[str, str], store: StoreChain, topics: TopicConfigManager) -> "LitePriority":
        """Before POP is made: the store/lite layer over ``store`` and the queue selector."""
        return cls(LiteConfig.from_properties(properties), PriorityConfig.from_properties(properties),
                   LiteStore(store, topics))

    @property
    def store_view(self) -> LiteStoreView:
        return self.lite_store.store_view

    @property
    def topics_view(self) -> LiteTopicsView:
        return self.lite_store.topics_view

    @staticmethod
    def fold_out(on_out: Callable[[str, str, int, int], None]) -> Callable[[str, str, int, int], None]:
        """POP's messages-out callback with lite topics counted under their parent."""
        return lambda group, topic, n, size: on_out(group, parent_topic(topic), n, size)

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
        self.service = LiteService(self)

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
