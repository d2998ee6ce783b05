"""Authentication, then authorization, of every remoting request and gRPC call (5.x's two pipelines).

Each step runs only when its setting is on (``authenticationEnabled``, ``authorizationEnabled``); a refusal raises
:class:`~rmqd.auth.errors.AuthError` with 5.x's message. The subject of the authorization is the request's
``AccessKey`` (remoting) or the authenticated user (gRPC; with authentication off, the ``x-mq-authorization-ak``
header, which is all 5.x has then).

Sends are the hot path: the decision of everything but the signature (user enabled, policies) is cached per
(peer, user, topic, group) and :attr:`AuthStore.state` generation, so a send costs one HMAC on top of the store.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional

from rmqd.auth.authentication import ACCESS_KEY, Authenticator
from rmqd.auth.authorization import Authorizer
from rmqd.auth.config import AuthConfig
from rmqd.auth.errors import AuthError, AuthenticationError
from rmqd.auth.remoting_contexts import contexts_of as remoting_contexts_of, send_contexts
from rmqd.auth.store import AuthState, AuthStore

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from rmqd.acl.signer import Verifier
    from rmqd.remoting.command import BodyPart

SEND_CACHE_MAX = 10000

#: A send's cached decision: (the user's verifier, or None when not authenticated; the user's refusal; the
#: authorization's refusal).
SendDecision = tuple[Optional["Verifier"], Optional[AuthError], Optional[AuthError]]


class AuthGuard:
    def __init__(self, cfg: AuthConfig, store: AuthStore) -> None:
        self.cfg = cfg
        self.store = store
        self.cluster = cfg.clusterName
        self.authn = Authenticator(store, cfg.authentication_whitelist) if cfg.authenticationEnabled else None
        self.authz = Authorizer(cfg.authorization_whitelist) if cfg.authorizationEnabled else None
        self._send_generation = -1
        self._send_cache: dict[tuple[str, str, Optional[str], Optional[str], int], SendDecision] = {}

    @property
    def enabled(self) -> bool:
        return self.authn is not None or self.authz is not None

    # ------------------------------------------------------------------ remoting
    def check_remoting(self, peer_host: str, code: int, ext: Optional[Mapping[str, str]], body: Optional[BodyPart],
                       version: int = 0) -> None:
        if self.authn is not None:
            self.authn.check_remoting(code, ext, body, version)
        if self.authz is not None:
            contexts = remoting_contexts_of(code, ext, body, self.cluster)
            if contexts:
                username = ext.get(ACCESS_KEY) if ext and ACCESS_KEY in ext else None
                self.authz.check(self.store.state, username, contexts, peer_host, str(code))

    def check_send(self, peer_host: str, code: int, access_key: str, signature: str, content: bytes,
                   body: Optional[BodyPart], topic: Optional[str], group: Optional[str]) -> None:
        """A send (10/310) whose signed header content the send lane built: the cached decision, then the
        signature (authentication first, as 5.x: a bad signature is answered before a missing permission)."""
        state = self.store.state
        if state.generation != self._send_generation:
            self._send_generation, self._send_cache = state.generation, {}
        key = (peer_host, access_key, topic, group, code)
        decided = self._send_cache.get(key)
        if decided is None:
            decided = self._decide_send(state, peer_host, code, access_key, topic, group)
            if len(self._send_cache) >= SEND_CACHE_MAX:
                self._send_cache.clear()
            self._send_cache[key] = decided
        verifier, user_refusal, refusal = decided
        if user_refusal is not None:
            raise user_refusal
        if verifier is not None and not verifier.matches(content, signature, body):
            raise AuthenticationError("check signature failed.")
        if refusal is not None:
            raise refusal

    def _decide_send(self, state: AuthState, peer_host: str, code: int, access_key: str, topic: Optional[str],
                     group: Optional[str]) -> SendDecision:
        verifier: Optional[Verifier] = None
        user_refusal: Optional[AuthError] = None
        refusal: Optional[AuthError] = None
        if self.authn is not None and not (self.authn.whitelist and str(code) in self.authn.whitelist):
            try:
                verifier = self.authn.verifier(self.authn.user_of(access_key))
            except AuthError as exc:
                user_refusal = exc
        if self.authz is not None:
            try:
                self.authz.check(state, access_key, send_contexts(topic, group), peer_host, str(code))
            except AuthError as exc:
                refusal = exc
        return verifier, user_refusal, refusal

    # ------------------------------------------------------------------ gRPC
    def check_grpc(self, request: Message, metadata: Mapping[str, str], peer_host: str) -> None:
        rpc_name = request.DESCRIPTOR.full_name
        username: Optional[str] = None
        if self.authn is not None:
            username = self.authn.check_grpc(rpc_name, metadata)
        if self.authz is not None:
            from rmqd.auth.grpc_contexts import contexts_of as grpc_contexts_of    # protobuf: gRPC brokers only
            contexts = grpc_contexts_of(request)
            if contexts:
                if username is None:
                    username = _header_user(metadata)
                self.authz.check(self.store.state, username, contexts, peer_host, rpc_name)


def _header_user(metadata: Mapping[str, str]) -> Optional[str]:
    """With authentication off, 5.x's authorization knows the user only from the ``x-mq-authorization-ak``
    header (which clients do not send: such calls are refused)."""
    return metadata.get("x-mq-authorization-ak")
