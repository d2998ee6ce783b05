"""What every MessagingService RPC passes first, and how a unary RPC answers a failure.

:class:`CallChecks`: access control 2.0 on the request (5.x's pipelines run before anything else: UNAUTHORIZED),
the client id (CLIENT_ID_REQUIRED), then ACL 1.0 on the resources the call names. :func:`unary`: an RPC's
:class:`RpcError` (or :class:`rmqd.pop.frontend.Busy`, or a bug) as a response with just a status.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Optional, Protocol, TypeVar

from rmqd.auth.errors import AuthError
from rmqd.grpc import auth
from rmqd.grpc.errors import RpcError, status
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.pop.frontend import Busy

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from rmqd.grpc.backend import Access, RpcContext
    from rmqd.grpc.bad_input import CauseLog
    from rmqd.grpc.clients import GrpcClientManager

R = TypeVar("R")
Q = TypeVar("Q")
R_co = TypeVar("R_co", covariant=True)

C = d.Code

#: the client behind a gRPC peer address (the TLS front's loopback connection -> the client)
PeerOf = Callable[[str, int], tuple[str, int]]


class StatusResponse(Protocol[R_co]):
    """A response message class: made with just a status (an RPC that failed)."""

    __name__: str

    def __call__(self, *, status: d.Status) -> R_co: ...


def peer_address(context: RpcContext) -> tuple[str, int]:
    """(host, port) of the call's peer (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    peer = context.peer() or ""
    addr = peer.split(":", 1)[1] if ":" in peer else peer
    host, _, port = addr.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port) if port.isdigit() else 0


def same_peer(host: str, port: int) -> tuple[str, int]:
    return host, port


class CallChecks:
    """The checks of every call (see the module docstring)."""

    def __init__(self, access: Access, clients: GrpcClientManager, peer_of: PeerOf = same_peer) -> None:
        self.access = access
        self.clients = clients
        self.peer_of = peer_of

    def begin(self, context: RpcContext, need: Optional[dict[str, int]] = None,
              request: Optional[Message] = None) -> tuple[dict[str, str], tuple[str, int]]:
        """The call's metadata and peer, once it passed the checks: access control 2.0 on ``request`` first, the
        client id, then ACL 1.0 on ``need``."""
        # (grpc's binary "-bin" values are bytes: no header read here is one)
        md = {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}
        peer = self.peer_of(*peer_address(context))
        guard = self.access.guard
        if guard is not None and request is not None:
            try:
                guard.check_grpc(request, md, peer[0])
            except AuthError as exc:
                raise RpcError(C.UNAUTHORIZED, exc.message) from None
        client_id = md.get("x-mq-client-id")
        if not client_id:
            raise RpcError(C.CLIENT_ID_REQUIRED, "client id cannot be empty")
        self.clients.seen(client_id)
        if need is not None:
            self.authorize(md, peer, need)
        return md, peer

    def authorize(self, md: dict[str, str], peer: tuple[str, int], need: dict[str, int]) -> None:
        """ACL 1.0: the caller may do ``need`` (resource -> PUB/SUB)."""
        if self.access.acl_manager is not None:
            try:
                auth.check(self.access.acl_manager, peer[0], md, need)
            except auth.GrpcAuthError as exc:
                raise RpcError(exc.code, exc.message) from None


async def unary(fn: Callable[[Q, RpcContext], Awaitable[R]], response_type: StatusResponse[R], request: Q,
                context: RpcContext, causes: CauseLog) -> R:
    """``fn``'s response, or ``response_type`` with the status of its failure (a bug: INTERNAL_ERROR, noted in
    ``causes``)."""
    try:
        return await fn(request, context)
    except RpcError as exc:
        return response_type(status=status(exc.code, exc.message))
    except Busy as exc:
        return response_type(status=status(C.TOO_MANY_REQUESTS, str(exc)))
    except Exception as exc:
        causes.exception(f"gRPC {response_type.__name__} failed with {type(exc).__name__}", str(exc), exc)
        return response_type(status=status(C.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
