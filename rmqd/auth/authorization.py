"""What a user may do: 5.x's ``UserAuthorizationHandler`` + ``AclAuthorizationHandler``.

A request becomes contexts (:mod:`rmqd.auth.remoting_contexts`, :mod:`rmqd.auth.grpc_contexts`): a literal
resource (``Topic:T``, ``Group:G``, ``Cluster:C``), the actions it needs (any one of them will do) and the source
IP. Each context is decided on its own, in order; the first refusal answers the request:

1. the request code is in ``authorizationWhitelist``: allowed;
2. no user: "Authorization failed. Please verify your access rights and try again." (5.x fails on the null);
   an unknown user: "User:<u> not found."; a super user: allowed;
3. the policy entries whose resource covers the context's, whose actions hold one of the needed ones (or
   ``All``), and whose source IPs hold the request's (or are none) match; the Custom policy's first, the
   Default policy's only when no Custom entry matches;
4. none match: "User:<u> has no permission to access <resource> from <ip>, no matched policies.";
5. the most specific matching entries decide (a resource of a type before ``*``; literal, then prefixed with the
   longer prefix first, then any name); among equally specific ones a Deny wins (5.5's comparator ranks it
   first): "the decision is deny.".
"""
from __future__ import annotations

from typing import Iterable, NamedTuple, Optional, Sequence

from rmqd.auth.errors import AuthorizationError
from rmqd.auth.model import Acl, Action, Decision, PolicyEntry, PolicyType, Resource, User, UserType
from rmqd.auth.store import AuthState

AUTHORIZATION_FAILED = "Authorization failed. Please verify your access rights and try again."


class AuthContext(NamedTuple):
    """One thing a request does: ``actions`` (any of them) on ``resource``."""

    resource: Resource
    actions: tuple[Action, ...]


def refusal(subject: User, resource: Resource, source_ip: Optional[str], detail: str) -> AuthorizationError:
    return AuthorizationError("{} has no permission to access {} from {}, " + detail, subject.subject_key,
                              resource.key, source_ip)


def decide(acl: Optional[Acl], subject: User, ctx: AuthContext, source_ip: Optional[str]) -> None:
    """Steps 3-5 for one context (raises AuthorizationError)."""
    if acl is None:
        raise refusal(subject, ctx.resource, source_ip, "no matched policies.")
    matched: list[PolicyEntry] = []
    for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policy(policy_type)
        if policy is None:
            continue
        matched = [e for e in policy.entries
                   if e.resource is not None and e.resource.matches(ctx.resource) and e.matches_action(ctx.actions)
                   and e.matches_source(source_ip)]
        if matched:
            break
    if not matched:
        raise refusal(subject, ctx.resource, source_ip, "no matched policies.")
    ranked = [(e.resource.specificity(), e) for e in matched if e.resource is not None]
    best = min(rank for rank, _ in ranked)
    if any(e.decision is Decision.DENY for rank, e in ranked if rank == best):
        raise refusal(subject, ctx.resource, source_ip, "the decision is deny.")


class Authorizer:
    """Decides contexts against an :class:`AuthState` (read once per request)."""

    def __init__(self, whitelist: frozenset[str] = frozenset()) -> None:
        self.whitelist = whitelist

    def check(self, state: AuthState, username: Optional[str], contexts: Iterable[AuthContext],
              source_ip: Optional[str], rpc_code: str) -> None:
        """Raise AuthorizationError at the first context refused."""
        if self.whitelist and rpc_code in self.whitelist:
            return
        contexts = list(contexts)
        if not contexts:
            return
        if username is None:
            raise AuthorizationError(AUTHORIZATION_FAILED)
        user = state.users.get(username)
        if user is None:
            raise AuthorizationError("User:{} not found.", username)
        if user.user_type is UserType.SUPER:
            return
        acl = state.acls.get(user.subject_key)
        for ctx in contexts:
            decide(acl, user, ctx, source_ip)


def contexts_of(pairs: Sequence[tuple[Resource, tuple[Action, ...]]]) -> list[AuthContext]:
    return [AuthContext(r, a) for r, a in pairs]


SUB = (Action.SUB,)
PUB = (Action.PUB,)
