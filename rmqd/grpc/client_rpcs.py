"""A 5.x client's session: Heartbeat, the Telemetry stream (its Settings, checked and answered as the proxy's
``processAndWriteClientSettings``; the server's commands to it) and NotifyClientTermination. A consumer group that
must exist (lite groups always; others when ``autoCreateSubscriptionGroup`` is off) is refused on the Telemetry
stream as INVALID_ARGUMENT."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncGenerator, AsyncIterator

import grpc

from rmqd.auth.errors import AuthError
from rmqd.grpc import message_types, validate
from rmqd.grpc.bad_input import MalformedRequest
from rmqd.grpc.clients import GrpcChannel, Outgoing, TelemetryFailed
from rmqd.grpc.convert import ms_to_duration
from rmqd.grpc.errors import RpcError, status
from rmqd.grpc.lite import LITE_CLIENT_TYPES
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.receive_rpcs import MAX_BATCH

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.grpc.backend import Access, LiteService, Metadata, RpcContext
    from rmqd.grpc.bad_input import CauseLog
    from rmqd.grpc.call_checks import CallChecks
    from rmqd.grpc.clients import GrpcClientManager
    from rmqd.grpc.lookups import Lookups

log = logging.getLogger(__name__)

C = d.Code
NO_SETTINGS = "cannot find client settings for this client"
CONSUMER_TYPES = (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER, *LITE_CLIENT_TYPES)
TELEMETRY_FAILED = "process client telemetryCommand failed. "
#: the backoff a consumer is told, ms (the proxy's: the 4.x delay levels from 1 s)
CONSUMER_BACKOFF_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000,
                       540000, 600000, 1200000, 1800000, 3600000, 7200000)


class LanguageError(Exception):
    """An ``x-mq-language`` the proxy's ``LanguageCode`` has no constant for."""


def check_language(language: str) -> None:
    """The proxy registers a client under ``LanguageCode.valueOf(x-mq-language)``: one it does not know fails."""
    error = validate.language_error(language)
    if error is not None:
        raise LanguageError(error)


def language_refused(language: str) -> None:
    """A unary call that registers or unregisters the client: Java's INTERNAL_SERVER_ERROR for the language."""
    error = validate.language_error(language)
    if error is not None:
        raise RpcError(C.INTERNAL_SERVER_ERROR, f"{error}. IllegalArgumentException. "
                                                "java.base/java.lang.Enum.valueOf(Enum.java:273)")


@dataclass
class ClientRpcs:
    checks: CallChecks
    lookups: Lookups
    access: Access
    metadata: Metadata
    clients: GrpcClientManager
    lite: LiteService
    config: BrokerConfig
    causes: CauseLog

    def __post_init__(self) -> None:
        self.max_long_polling_ms = int(self.config.grpcClientConsumerMaxLongPollingTimeoutMillis)

    def settings_of(self, client_id: str) -> d.Settings:
        ch = self.clients.channels.get(client_id)
        if ch is None or ch.settings is None:
            raise RpcError(C.UNRECOGNIZED_CLIENT_TYPE, NO_SETTINGS)
        return ch.settings

    # ------------------------------------------------------------------ heartbeat, termination
    async def heartbeat(self, request: s.HeartbeatRequest, context: RpcContext) -> s.HeartbeatResponse:
        md, peer = self.checks.begin(context, {}, request)
        settings = self.settings_of(md["x-mq-client-id"])
        ctype = settings.client_type
        if ctype in CONSUMER_TYPES:
            validate.check_group(request.group.name)
            language_refused(md.get("x-mq-language", ""))
            await self.lookups.consumer_group(request.group.name, ctype, settings.subscription.subscriptions)
        elif ctype == d.PRODUCER:
            language_refused(md.get("x-mq-language", ""))
        else:
            raise RpcError(C.UNRECOGNIZED_CLIENT_TYPE, d.ClientType.Name(ctype))
        ch = self.clients.channel(md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
        self.clients.touch(ch)
        return s.HeartbeatResponse(status=status(C.OK))

    async def terminate(self, request: s.NotifyClientTerminationRequest,
                        context: RpcContext) -> s.NotifyClientTerminationResponse:
        md, _ = self.checks.begin(context, request=request)
        cid = md["x-mq-client-id"]
        language_refused(md.get("x-mq-language", ""))
        settings = self.settings_of(cid)
        if settings.client_type in CONSUMER_TYPES:
            validate.check_group(request.group.name)
        elif settings.client_type != d.PRODUCER:
            raise RpcError(C.UNRECOGNIZED_CLIENT_TYPE, d.ClientType.Name(settings.client_type))
        self.clients.terminate(cid)
        self.lite.client_gone(cid, "client terminated")
        return s.NotifyClientTerminationResponse(status=status(C.OK))

    # ------------------------------------------------------------------ telemetry
    async def telemetry(self, request_iterator: AsyncIterator[s.TelemetryCommand],
                        context: RpcContext) -> AsyncGenerator[s.TelemetryCommand, None]:
        try:
            md, peer = self.checks.begin(context)
        except RpcError as exc:
            yield s.TelemetryCommand(status=status(exc.code, exc.message))
            return
        guard = self.access.guard
        ch = self.clients.channel(md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
        ch.language_header = md.get("x-mq-language", "")
        outbox: asyncio.Queue[Outgoing] = asyncio.Queue()
        ch.outbox = outbox

        async def read() -> None:
            try:
                async for cmd in request_iterator:
                    ch.last_seen = time.monotonic()
                    if guard is not None:           # 5.x runs its pipelines on every command of the stream,
                        try:                        # and a refusal is its last answer (the stream completes)
                            guard.check_grpc(cmd, md, peer[0])
                        except AuthError as exc:
                            outbox.put_nowait(s.TelemetryCommand(status=status(C.UNAUTHORIZED, exc.message)))
                            return
                    if cmd.HasField("settings"):
                        try:
                            answer = await self.accept_settings(ch, cmd.settings)
                        except TelemetryFailed as failed:
                            outbox.put_nowait(failed)
                            return
                        except Exception as exc:        # a bug: the proxy's INTERNAL, a line per cause
                            self.causes.exception(f"gRPC Telemetry settings failed with {type(exc).__name__}",
                                                  str(exc), exc)
                            outbox.put_nowait(TelemetryFailed(grpc.StatusCode.INTERNAL, TELEMETRY_FAILED + str(exc)))
                            return
                        outbox.put_nowait(s.TelemetryCommand(status=status(C.OK), settings=answer))
                    elif cmd.HasField("thread_stack_trace") or cmd.HasField("verify_message_result"):
                        pass
            except asyncio.CancelledError:
                raise
            except MalformedRequest:     # noted by rmqd.grpc.bad_input; the call ends as grpc-java ends it
                outbox.put_nowait(TelemetryFailed(grpc.StatusCode.UNKNOWN, ""))
            except Exception as exc:     # the client went away mid-stream
                log.debug("telemetry stream of %s ended: %r", ch.client_id, exc)
            finally:
                outbox.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                cmd = await outbox.get()
                if cmd is None:
                    break
                if isinstance(cmd, TelemetryFailed):
                    await context.abort(cmd.code, cmd.details)
                yield cmd
        finally:
            reader.cancel()
            if ch.outbox is outbox:
                ch.outbox = None
                if not ch.closed:        # ended (or cancelled) by the client without NotifyClientTermination
                    self.clients.release(ch)
                self.lite.client_gone(ch.client_id, "telemetry stream ended")

    async def accept_settings(self, ch: GrpcChannel, settings: d.Settings) -> d.Settings:
        """A client's Settings, checked and registered as the proxy does (``processAndWriteClientSettings``);
        the Settings to answer. Raises :class:`TelemetryFailed` with the status the proxy ends the stream with."""
        kind = settings.WhichOneof("pub_sub")
        if kind is None:
            raise TelemetryFailed(grpc.StatusCode.INVALID_ARGUMENT,
                                   "there is no publishing or subscription data in settings")
        try:
            if kind == "publishing":
                for t in settings.publishing.topics:
                    validate.check_topic(t.name)
                    check_language(ch.language_header)
            else:
                validate.check_group(settings.subscription.group.name)
                check_language(ch.language_header)
                await self.lookups.consumer_group(settings.subscription.group.name, settings.client_type,
                                                  settings.subscription.subscriptions)
                if settings.client_type not in CONSUMER_TYPES:
                    raise RpcError(C.INTERNAL_SERVER_ERROR,
                                   f"Client type is not consumer, type: {d.ClientType.Name(settings.client_type)}")
        except RpcError as exc:
            grpc_code = grpc.StatusCode.INVALID_ARGUMENT if C.BAD_REQUEST <= exc.code < C.INTERNAL_ERROR \
                else grpc.StatusCode.INTERNAL
            raise TelemetryFailed(grpc_code, TELEMETRY_FAILED + exc.message) from None
        except LanguageError as exc:
            raise TelemetryFailed(grpc.StatusCode.INTERNAL, TELEMETRY_FAILED + str(exc)) from None
        self.clients.on_settings(ch, settings)
        return await self.server_settings(settings)

    async def server_settings(self, client: d.Settings) -> d.Settings:
        """The Settings the server answers with (the proxy's ``GrpcClientSettingsManager``: its producer and
        consumer defaults merged with the group's config; metrics off)."""
        c = self.config
        st = d.Settings()
        st.CopyFrom(client)
        st.request_timeout.CopyFrom(client.request_timeout if client.HasField("request_timeout")
                                    else ms_to_duration(3000))
        if client.HasField("subscription"):
            sg = await self.metadata.group(client.subscription.group.name, create=False)
            attempts = (sg.retry_max_times if sg is not None else 16) + 1
            st.backoff_policy.CopyFrom(d.RetryPolicy(max_attempts=attempts, customized_backoff=d.CustomizedBackoff(
                next=[ms_to_duration(ms) for ms in CONSUMER_BACKOFF_MS])))
            st.subscription.fifo = bool(sg is not None and sg.consume_message_orderly)
            st.subscription.receive_batch_size = MAX_BATCH
            st.subscription.long_polling_timeout.CopyFrom(ms_to_duration(self.max_long_polling_ms))
            self.lite.fill_settings(st, sg)
        else:
            st.backoff_policy.CopyFrom(d.RetryPolicy(max_attempts=3, exponential_backoff=d.ExponentialBackoff(
                initial=ms_to_duration(10), max=ms_to_duration(1000), multiplier=2.0)))
            st.publishing.max_body_size = int(c.maxMessageSize)
            st.publishing.validate_message_type = message_types.enabled(c)
        st.metric.CopyFrom(d.Metric(on=False))
        return st
