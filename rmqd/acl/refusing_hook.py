"""The request hook both access controls use (ACL 1.0's and 2.0's): each request, and each raw send of the send lane,
is checked before it is processed; a check that raises the hook's refusal is answered (and counted) instead."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Generic, Optional, TypeVar

from rmqd.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rmqd.acl.handles import RequestPeer
    from rmqd.remoting.command import BodyPart

E = TypeVar("E", bound=Exception)

#: A check of the send lane's raw sends: (peer host, code, access key, signature, signed content, body, topic, group);
#: it raises the refusal to refuse.
SendCheck = Callable[[str, int, str, str, bytes, Optional["BodyPart"], str, Optional[str]], None]


class RefusingHook(Generic[E]):
    """``hook(conn, request)`` -> None (go on) or the answer to send instead; ``signed_send`` for the send lane.

    ``check(peer host, request)`` and ``check_send`` raise ``refusal`` to refuse; ``answer(code, peer, refusal)``
    makes (and logs) the answer; ``refused`` counts the refusals."""

    def __init__(self, refusal: type[E], check: Callable[[str, RemotingCommand], None], check_send: SendCheck,
                 answer: Callable[[int, str, E], RemotingCommand]) -> None:
        self.refusal = refusal
        self._check = check
        self._check_send = check_send
        self._answer = answer
        self.refused = 0

    def __call__(self, conn: RequestPeer, request: RemotingCommand) -> Optional[RemotingCommand]:
        try:
            self._check(conn.peer_host, request)
        except self.refusal as exc:
            return self._refuse(request.code, conn.remote_address, exc)
        return None

    def signed_send(self, peer_host: str, code: int, access_key: str, signature: str, content: bytes,
                    body: Optional[BodyPart], topic: str, group: Optional[str]) -> Optional[RemotingCommand]:
        """The send lane's entry (it read the header from the raw bytes and built the signed content)."""
        try:
            self._check_send(peer_host, code, access_key, signature, content, body, topic, group)
        except self.refusal as exc:
            return self._refuse(code, peer_host, exc)
        return None

    def _refuse(self, code: int, peer: str, exc: E) -> RemotingCommand:
        self.refused += 1
        return self._answer(code, peer, exc)
