"""What a request needs, and the plain-ACL checks in the Java 4.9.8 broker's order.

``resources_of`` is Java's ``PlainAccessValidator.parse``: per request code, the topics and groups (a
group as its ``%RETRY%`` topic) the request touches and the permission it needs; every other code only
passes the account and signature checks. ``AclValidator.check`` is ``PlainPermissionManager.validate``:

1. the peer matches ``globalWhiteRemoteAddresses``: allowed, nothing else is checked;
2. no AccessKey: "No accessKey is configured"; 3. unknown AccessKey: "No acl config for <ak>";
4. the peer matches the account's ``whiteRemoteAddress``: allowed without signature or permissions;
5. bad signature: "Check signature failed for accessKey=<ak>";
6. a PUB to RMQ_SYS_TRACE_TOPIC: allowed;
7. admin codes need ``admin: true``; each resource needs its permission, from topicPerms/groupPerms,
   else from defaultTopicPerm/defaultGroupPerm: "No default permission for topic:T" / "group:G".

A refusal is answered as the 4.9.8 broker answers it: SYSTEM_ERROR (1) with the remark
``org.apache.rocketmq.acl.common.AclException: <message>, <first stack frame>``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Union

import orjson

from rmqd.acl import permission as P
from rmqd.acl.permission import AclError
from rmqd.acl.signer import ACCESS_KEY, SIGNATURE, UNIQUE_KEY_QUERY, Verifier, header_content

if TYPE_CHECKING:
    from rmqd.acl.handles import AclStateSource
    from rmqd.acl.plain_acl import Account, AclState
    from rmqd.remoting.command import BodyPart

#: A SEND's cached decision: ("pass",) when a white list lets it through, else (account, refusal or None).
SendDecision = Union[tuple[str], tuple["Account", Optional[AclError]]]

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
EXCEPTION_CLASS = "org.apache.rocketmq.acl.common.AclException"

# The first stack frame the 4.9.8 broker's remark names for each refusal (read off the reference broker).
_MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
FRAME_NO_ACCESS_KEY = f"{_MANAGER}.validate(PlainPermissionManager.java:664)"
FRAME_NO_ACL_CONFIG = f"{_MANAGER}.validate(PlainPermissionManager.java:668)"
FRAME_NO_RESOURCE = f"{_MANAGER}.validate(PlainPermissionManager.java:674)"
FRAME_SIGNATURE = f"{_MANAGER}.validate(PlainPermissionManager.java:684)"
FRAME_ADMIN = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:581)"
FRAME_DEFAULT_PERM = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:606)"
FRAME_RESOURCE_PERM = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:611)"
FRAME_PARSE = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"


def remark(err: AclError) -> str:
    """The remark of the 4.9.8 broker's SYSTEM_ERROR answer to a refused request."""
    text = f"{EXCEPTION_CLASS}: {err.message}"
    return f"{text}, {err.frame}" if err.frame else text


def send_resources(topic: Optional[str], group: Optional[str]) -> dict[str, int]:
    """A send needs PUB on its topic; a send to a ``%RETRY%`` topic needs SUB on the group instead."""
    if P.is_retry_topic(topic):
        return {} if group is None else {P.RETRY_PREFIX + group: P.SUB}
    return {} if topic is None else {topic: P.PUB}


def resources_of(code: int, ext: Mapping[str, str], body: Optional[BodyPart]) -> dict[str, int]:
    """Resource -> needed permission of one request (Java ``PlainAccessValidator.parse``)."""
    need: dict[str, int] = {}

    def add(resource: Optional[str], perm: int) -> None:
        if resource is not None:
            need[resource] = perm

    get = ext.get
    try:
        if code == 10 or code == 310:
            topic, group = (get("topic"), get("group")) if code == 10 else (get("b"), get("a"))
            return send_resources(topic, group)
        elif code == 36:                                   # CONSUMER_SEND_MSG_BACK
            add(P.retry_topic(get("group")), P.SUB)
        elif code == 11:                                   # PULL_MESSAGE
            add(get("topic"), P.SUB)
            add(P.retry_topic(get("consumerGroup")), P.SUB)
        elif code == 12:                                   # QUERY_MESSAGE
            add(get("topic"), P.SUB)
        elif code == 34:                                   # HEART_BEAT
            data = orjson.loads(body or b"")
            for consumer in data.get("consumerDataSet") or ():
                add(P.retry_topic(consumer.get("groupName")), P.SUB)
                for sub in consumer.get("subscriptionDataSet") or ():
                    add(sub.get("topic"), P.SUB)
        elif code in (35, 38):                             # UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP
            add(P.retry_topic(get("consumerGroup")), P.SUB)
        elif code == 15:                                   # UPDATE_CONSUMER_OFFSET
            add(P.retry_topic(get("consumerGroup")), P.SUB)
            add(get("topic"), P.SUB)
    except (ValueError, TypeError, AttributeError) as exc:
        raise AclError(f"{type(exc).__name__}: {exc}", FRAME_PARSE) from exc
    return need


class AclValidator:
    """Checks requests against a :class:`rmqd.acl.plain_acl.PlainAclManager`'s current accounts."""

    def __init__(self, manager: AclStateSource) -> None:
        self.manager = manager
        self._send_state: Optional[AclState] = None
        self._send_cache: dict[tuple[str, Optional[str], Optional[str], Optional[str]], SendDecision] = {}

    def _send_decision(self, state: AclState, remote_host: str, ak: Optional[str], topic: Optional[str],
                       group: Optional[str]) -> SendDecision:
        """Steps 1-4 and 6-7 of a SEND_MESSAGE_V2 for one (peer, key, topic, group), cached per ACL
        snapshot: ("pass",) when a white list lets it through, else (account, refusal or None). Only the
        signature (step 5) depends on the request itself."""
        if self._send_state is not state:
            self._send_state, self._send_cache = state, {}
        key = (remote_host, ak, topic, group)
        d = self._send_cache.get(key)
        if d is None:
            account = self._signer_of(state, remote_host, ak)     # raises for steps 2-3 (not cached)
            if account is None:
                d = ("pass",)
            else:
                try:
                    self._check_perm(310, send_resources(topic, group), account)
                    d = (account, None)
                except AclError as exc:
                    d = (account, exc)
            if len(self._send_cache) > 10000:
                self._send_cache.clear()
            self._send_cache[key] = d
        return d

    def check(self, remote_host: str, code: int, ext: Optional[Mapping[str, str]], body: Optional[BodyPart]) -> None:
        """Raise AclError when the request is refused."""
        state = self.manager.state
        if code == 310 and ext is not None:                 # the common case, without re-deciding
            d = self._send_decision(state, remote_host, ext.get(ACCESS_KEY), ext.get("b"), ext.get("a"))
            if len(d) == 1:
                return
            account, refusal = d
            if not self._signature_ok(ext, body, account.verifier):
                raise AclError(f"Check signature failed for accessKey={account.access_key}", FRAME_SIGNATURE)
            if refusal is not None:
                raise AclError(refusal.message, refusal.frame)
            return
        need: dict[str, int]
        if ext is None:
            need = {}
        elif code == 310:                                   # the common case first
            need = send_resources(ext.get("b"), ext.get("a"))
        else:
            need = resources_of(code, ext, body)            # Java parses before it checks
        ext = ext or {}
        signer = self._signer_of(state, remote_host, ext.get(ACCESS_KEY))
        if signer is None:
            return
        if not self._signature_ok(ext, body, signer.verifier):
            raise AclError(f"Check signature failed for accessKey={signer.access_key}", FRAME_SIGNATURE)
        self._check_perm(code, need, signer)

    def check_signed_send(self, remote_host: str, code: int, access_key: str, given: str, content: bytes,
                          body: Optional[BodyPart], topic: str, group: Optional[str]) -> None:
        """:meth:`check` for a SEND (10/310) whose signed content (the header values, without the body)
        the send lane built from the raw header; raise AclError when refused. The decision of steps
        1-4 and 6-7 is cached per (peer, key, topic, group) and ACL snapshot, as in :meth:`check`."""
        d = self._send_decision(self.manager.state, remote_host, access_key, topic, group)
        if len(d) == 1:
            return
        account, refusal = d
        if not account.verifier.matches(content, given, body):
            raise AclError(f"Check signature failed for accessKey={access_key}", FRAME_SIGNATURE)
        if refusal is not None:
            raise AclError(refusal.message, refusal.frame)

    @staticmethod
    def _signer_of(state: AclState, remote_host: str, access_key: Optional[str]) -> Optional[Account]:
        """Steps 1-4: None when a white list lets the request through unchecked, else the account
        whose signature and permissions decide."""
        for match in state.global_white:
            if match(remote_host):
                return None
        if access_key is None:
            raise AclError("No accessKey is configured", FRAME_NO_ACCESS_KEY)
        account = state.accounts.get(access_key)
        if account is None:
            raise AclError(f"No acl config for {access_key}", FRAME_NO_ACL_CONFIG)
        if account.white_match(remote_host):
            return None
        return account

    @staticmethod
    def _signature_ok(ext: Mapping[str, str], body: Optional[BodyPart], verifier: Verifier) -> bool:
        """Java 4.9.8 leaves ``_UNIQUE_KEY_QUERY`` out of the signed content; later clients sign it:
        either matches."""
        given = ext.get(SIGNATURE)
        if given is None:
            return False
        if verifier.matches(header_content(ext, (SIGNATURE, UNIQUE_KEY_QUERY)), given, body):
            return True
        return UNIQUE_KEY_QUERY in ext and verifier.matches(header_content(ext), given, body)

    @staticmethod
    def _check_perm(code: int, need: dict[str, int], account: Account) -> None:
        if need.get(TRACE_TOPIC) == P.PUB:
            return
        if code in P.ADMIN_CODES and not account.admin:
            raise AclError(f"Need admin permission for request code={code}, but accessKey={account.access_key} "
                           "is not", FRAME_ADMIN)
        if not need or (not account.perms and account.admin):
            return
        for resource, needed in need.items():
            owned = account.perms.get(resource)
            if owned is None:
                default = account.default_group_perm if P.is_retry_topic(resource) else account.default_topic_perm
                if not P.check_permission(needed, default):
                    raise AclError(f"No default permission for {P.describe_resource(resource)}",
                                   FRAME_DEFAULT_PERM)
            elif not P.check_permission(needed, owned):
                raise AclError(f"No default permission for {P.describe_resource(resource)}", FRAME_RESOURCE_PERM)
