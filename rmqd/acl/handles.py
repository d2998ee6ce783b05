"""The narrow interfaces the ACL check takes instead of the broker's objects."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rmqd.acl.plain_acl import AclState


class AclStateSource(Protocol):
    """Where the current ACL snapshot is read (a :class:`rmqd.acl.plain_acl.PlainAclManager`)."""

    @property
    def state(self) -> AclState: ...


class RequestPeer(Protocol):
    """The connection a request came on, as a request hook sees it: who sent it."""

    @property
    def remote_address(self) -> str:
        """``host:port`` of the peer."""

    @property
    def peer_host(self) -> str: ...
