"""5.x's SWITCH_TIMER_ENGINE (5001, ``mqadmin switchTimerEngine -e R|F``): the engine of timer messages.

Java 5.5 has two: the file time wheel (``F``, TimerMessageStore) and the RocksDB timeline (``R``, which it can only
switch to when it started with ``timerRocksDBEnable``). rmqd has one engine, rmqd.broker.timer, in the place of the
file time wheel, and no RocksDB timeline: ``F`` is the engine that runs (success, as Java answers once its wheel
is running again), ``R`` gets Java's answer for a broker started without the RocksDB timeline. Bad input and a
broker whose timer is off (``timerWheelEnable=false``) get Java's codes and remarks.

Java: ``AdminBrokerProcessor.switchTimerEngine``.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer

log = logging.getLogger(__name__)

SWITCH_TIMER_ENGINE = 5001
INVALID_PARAMETER = 29          # 5.x ResponseCode
ENGINE_TYPE = "E_T"             # the request's ext field: R (RocksDB timeline) or F (file time wheel)


class TimerEngine(Protocol):
    """What the switch needs of the timer (rmqd.broker.timer.TimerMessageService)."""

    enabled: bool


class TimerAdminProcessor:
    def __init__(self, timer: TimerEngine) -> None:
        self.timer = timer

    def switch_timer_engine(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        peer = getattr(conn, "remote_address", "?")
        if not self.timer.enabled:
            log.info("switchTimerEngine from %s refused: timerWheelEnable is false", peer)
            return error_response(INVALID_PARAMETER, "broker timerWheelEnable is false")
        ext = request.ext_fields
        if ext is None:
            return error_response(INVALID_PARAMETER, "param error, extFields is null")
        engine = ext.get(ENGINE_TYPE)
        if engine not in ("R", "F"):
            return error_response(INVALID_PARAMETER, "param error")
        if engine == "R":
            log.info("switchTimerEngine to the RocksDB timeline from %s refused: rmqd has none", peer)
            return error_response(INVALID_PARAMETER, "timerRocksDBEnable must be configured true when broker start")
        log.info("switchTimerEngine to the time wheel from %s: rmqd's timer is that engine and runs", peer)
        return new_response(ResponseCode.SUCCESS, "switch timer engine success")

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register(SWITCH_TIMER_ENGINE, self.switch_timer_engine, pool)
