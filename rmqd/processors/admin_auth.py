"""Access control 2.0's admin codes (mqadmin createUser ... listAcl): AUTH_CREATE_USER (3001) to AUTH_LIST_ACL
(3010), answered as 5.x's ``AdminBrokerProcessor`` answers them.

- Success: SUCCESS with the remark "not set any response code" (5.x never clears it), and for the reads a
  ``UserInfo`` / ``AclInfo`` JSON body (none when there is nothing).
- A refusal of the metadata manager: NO_PERMISSION (16) with its message ("The user is existed", ...); a
  blank username in the header: INVALID_PARAMETER (29) "The username is blank".
- Only a super user may create or change a super user (SYSTEM_ERROR / NO_PERMISSION, 5.x's split).
- A body 5.x cannot read: SYSTEM_ERROR with the exception 5.x's broker reports (its class, and its text where it
  does not depend on the JSON parser's internals).

The codes work whether or not authentication is on (5.x's too: they are admin codes like the others). They run in
the admin pool: every change is written to disk before it is answered. In controller mode a change is answered
once every in-sync replica holds it (SYSTEM_ERROR "... not copied ..." otherwise; the caller retries), so a
failover cannot take back a user or an ACL that was answered SUCCESS.

rmqd's GET_AUTH_METADATA (9020) answers the whole store for a slave to copy (rmqd.replicas.slave_sync); with
authentication on, only a super user's request (the slave signs with ``innerClientAuthenticationCredentials``).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Mapping, Optional

import orjson

from rmqd.auth.errors import AuthError, AuthenticationError, AuthorizationError
from rmqd.auth.metadata import AuthMetadataManager, AuthSystemError
from rmqd.auth.model import PolicyType, Resource, User, UserType, acl_from_info, subject_of
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer

log = logging.getLogger(__name__)

OK_REMARK = "not set any response code"
SYSTEM_ERROR_REMARK = "An system error occurred, please try again later."
_PROCESSOR = "org.apache.rocketmq.broker.processor.AdminBrokerProcessor"
# 5.5.0's remarks for the bodies its processor fails on (read off the 5.5.0 broker)
NULL_USER_INFO = ('java.lang.NullPointerException: Cannot invoke "org.apache.rocketmq.remoting.protocol.body.UserInfo'
                  '.setUsername(String)" because "userInfo" is null, ' + _PROCESSOR
                  + ".{}(AdminBrokerProcessor.java:{})")
NULL_ACL_BODY = ("org.apache.rocketmq.auth.authorization.exception.AuthorizationException: The body of acl is null, "
                 + _PROCESSOR + ".{}(AdminBrokerProcessor.java:{})")
NULL_ACTIONS = ('java.lang.NullPointerException: Cannot invoke "java.util.List.iterator()" because the return value of '
                '"org.apache.rocketmq.remoting.protocol.body.AclInfo$PolicyEntryInfo.getActions()" is null, '
                'org.apache.rocketmq.broker.auth.converter.AclConverter.convertAcl(AclConverter.java:54)')
JSON_EXCEPTION = "com.alibaba.fastjson2.JSONException"
_LINES = {"createUser": 3097, "updateUser": 3129, "createAcl": 3241, "updateAcl": 3268}


class BodyError(Exception):
    """A body the 5.x broker fails on; ``remark`` is its answer's."""

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark


def _json_body(request: RemotingCommand) -> object:
    """The body as JSON (None for none, or for ``null``); BodyError with 5.x's exception class otherwise."""
    raw = request.body_bytes() if request.body is not None else b""
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"{JSON_EXCEPTION}: {exc}, {raw[:200].decode('utf-8', 'replace')}") from None


def _object(data: object, what: str) -> Optional[dict[str, object]]:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise BodyError(f"{JSON_EXCEPTION}: expect {{, but {type(data).__name__}, class {what}")
    return data


def _string_fields(d: Mapping[str, object], names: tuple[str, ...], what: str) -> dict[str, object]:
    """fastjson2 reads a number or boolean into a String field as its text, and fails on an object or array."""
    out = dict(d)
    for n in names:
        v = d.get(n)
        if isinstance(v, (dict, list)):
            raise BodyError(f"{JSON_EXCEPTION}: {n} of {what} cannot be read from {type(v).__name__}")
        if isinstance(v, bool):
            out[n] = "true" if v else "false"
        elif isinstance(v, (int, float)):
            out[n] = str(v)
    return out


USER_INFO = "org.apache.rocketmq.remoting.protocol.body.UserInfo"
ACL_INFO = "org.apache.rocketmq.remoting.protocol.body.AclInfo"


def _user_body(request: RemotingCommand, method: str) -> dict[str, object]:
    info = _object(_json_body(request), USER_INFO)
    if info is None:
        raise BodyError(NULL_USER_INFO.format(method, _LINES[method]))
    return _string_fields(info, ("username", "password", "userType", "userStatus"), USER_INFO)


NOT_COPIED = ("users and ACLs changed on the master but not copied by every in-sync replica within slaveTimeout; "
              "retry")


class AuthAdminProcessor:
    """``manager``: the broker's users and ACLs (built even with authentication off, as 5.x's are);
    ``authentication``: whether requests are signed (then GET_AUTH_METADATA needs a super user);
    ``wait_replicated``: after a change, whether every in-sync replica holds it (controller mode)."""

    def __init__(self, manager: AuthMetadataManager, authentication: bool = False,
                 wait_replicated: Optional[Callable[[], bool]] = None) -> None:
        self.manager = manager
        self.authentication = authentication
        self.wait_replicated = wait_replicated

    # ------------------------------------------------------------------ helpers
    def _not_super_login(self, request: RemotingCommand) -> bool:
        """5.x ``isNotSuperUserLogin``: unsigned (authentication off) counts as super; an unknown signer raises."""
        ak = (request.ext_fields or {}).get("AccessKey")
        if not ak:
            return False
        return not self.manager.is_super_user(ak)

    def _check_super_changed_by_super(self, user: User, request: RemotingCommand) -> None:
        """5.x: a super user is updated or deleted only by a super user (its message says "update" for both)."""
        if user.user_type is UserType.SUPER and self._not_super_login(request):
            raise AuthenticationError("The super user can only be update by super user")

    def _answer(self, fn: Callable[[], Optional[bytes]], what: str, change: bool = False) -> RemotingCommand:
        """5.x's ``handleAuthException``: its refusals NO_PERMISSION, anything else SYSTEM_ERROR; a ``change`` is
        a success once the in-sync replicas hold it."""
        try:
            body = fn()
        except AuthError as exc:
            log.info("auth admin: %s refused: %s", what, exc.message)
            return error_response(ResponseCode.NO_PERMISSION, exc.message)
        except AuthSystemError as exc:
            log.warning("auth admin: %s failed: %s", what, exc)
            return error_response(ResponseCode.SYSTEM_ERROR, SYSTEM_ERROR_REMARK)
        if change and self.wait_replicated is not None and not self.wait_replicated():
            return error_response(ResponseCode.SYSTEM_ERROR, NOT_COPIED)
        return new_response(ResponseCode.SUCCESS, OK_REMARK, body=body)

    @staticmethod
    def _guarded(fn: Callable[[], RemotingCommand]) -> RemotingCommand:
        try:
            return fn()
        except BodyError as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, exc.remark)

    # ------------------------------------------------------------------ users
    def create_user(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        return self._guarded(lambda: self._create_or_update_user(request, True))

    def update_user(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        return self._guarded(lambda: self._create_or_update_user(request, False))

    def _create_or_update_user(self, request: RemotingCommand, create: bool) -> RemotingCommand:
        name = (request.ext_fields or {}).get("username")
        if not name:
            return error_response(ResponseCode.INVALID_PARAMETER, "The username is blank")
        info = _user_body(request, "createUser" if create else "updateUser")
        info["username"] = name
        user = User.from_info(info)
        verb = "create" if create else "update"
        if user.user_type is UserType.SUPER:
            try:
                refuse = self._not_super_login(request)
            except AuthError as exc:
                return error_response(ResponseCode.SYSTEM_ERROR, f"java.util.concurrent.CompletionException: "
                                                                  f"{exc.java_class}: {exc.message}")
            if refuse:
                return error_response(ResponseCode.SYSTEM_ERROR, f"The super user can only be {verb} by super user")
        if create:
            return self._answer(lambda: self.manager.create_user(user), f"createUser {name}", True)

        def update() -> None:
            old = self.manager.get_user(name)
            if old is None:
                raise AuthenticationError("The user is not exist")
            self._check_super_changed_by_super(old, request)
            self.manager.update_user(user)
        return self._answer(update, f"updateUser {name}", True)

    def delete_user(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        name = (request.ext_fields or {}).get("username")

        def delete() -> None:
            old = self.manager.get_user(name)
            if old is None:
                return
            self._check_super_changed_by_super(old, request)
            self.manager.delete_user(name)
        return self._answer(delete, f"deleteUser {name}", True)

    def get_user(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        name = (request.ext_fields or {}).get("username")
        if name is None or not name.strip():
            return error_response(ResponseCode.INVALID_PARAMETER, "The username is blank")

        def get() -> Optional[bytes]:
            user = self.manager.get_user(name)
            return None if user is None else orjson.dumps(user.to_info(), option=orjson.OPT_SORT_KEYS)
        return self._answer(get, f"getUser {name}")

    def list_user(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        filter_text = (request.ext_fields or {}).get("filter")

        def listing() -> Optional[bytes]:
            users = self.manager.list_users(filter_text)
            return orjson.dumps([u.to_info() for u in users], option=orjson.OPT_SORT_KEYS) if users else None
        return self._answer(listing, "listUser")

    # ------------------------------------------------------------------ ACLs
    def create_acl(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        return self._guarded(lambda: self._put_acl(request, "createAcl"))

    def update_acl(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        return self._guarded(lambda: self._put_acl(request, "updateAcl"))

    def _put_acl(self, request: RemotingCommand, method: str) -> RemotingCommand:
        header_subject = subject_of((request.ext_fields or {}).get("subject"))
        info = _object(_json_body(request), ACL_INFO)
        if info is None or not info.get("policies"):
            raise BodyError(NULL_ACL_BODY.format(method, _LINES[method]))
        try:
            acl = acl_from_info(info)
        except TypeError as exc:
            if "getActions" in str(exc):
                raise BodyError(NULL_ACTIONS) from None
            raise BodyError(f"{JSON_EXCEPTION}: {exc}") from None
        if acl.subject is None:
            acl.subject = header_subject
        return self._answer(lambda: self.manager.put_acl(acl), f"{method} {acl.subject and acl.subject.subject_key}",
                            True)

    def delete_acl(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        subject = subject_of(ext.get("subject"))
        named = PolicyType.by_name(ext.get("policyType"))     # typed as the base enum's lookup: narrowed here
        policy_type = named if isinstance(named, PolicyType) else None
        resource = Resource.parse(ext.get("resource"))
        return self._answer(lambda: self.manager.delete_acl(subject, policy_type, resource),
                            f"deleteAcl {ext.get('subject')}", True)

    def get_acl(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        subject = subject_of((request.ext_fields or {}).get("subject"))

        def get() -> Optional[bytes]:
            if subject is None:
                raise AuthorizationError("The subject is null.")
            acl = self.manager.get_acl(subject)
            return None if acl is None else orjson.dumps(acl.to_info(), option=orjson.OPT_SORT_KEYS)
        return self._answer(get, "getAcl")

    def list_acl(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}

        def listing() -> Optional[bytes]:
            acls = self.manager.list_acls(ext.get("subjectFilter"), ext.get("resourceFilter"))
            return orjson.dumps([a.to_info() for a in acls], option=orjson.OPT_SORT_KEYS) if acls else None
        return self._answer(listing, "listAcl")

    # ------------------------------------------------------------------ replication
    def get_all_metadata(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """GET_AUTH_METADATA (rmqd): the store's snapshot, for a slave; passwords included, so with authentication
        on only for a super user."""
        if self.authentication:
            ak = (request.ext_fields or {}).get("AccessKey")
            user = self.manager.store.state.users.get(ak) if ak else None
            if user is None or user.user_type is not UserType.SUPER:
                return error_response(ResponseCode.NO_PERMISSION, "only a super user may copy the users and ACLs")
        return new_response(ResponseCode.SUCCESS, None, body=orjson.dumps(self.manager.store.snapshot()))

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register 3001-3010 and GET_AUTH_METADATA in ``pool`` (they write or read files' worth of data)."""
        from rmqd.replicas.slave_sync import GET_AUTH_METADATA
        dispatcher.register(GET_AUTH_METADATA, self.get_all_metadata, pool)
        for code, handler in ((RequestCode.AUTH_CREATE_USER, self.create_user),
                              (RequestCode.AUTH_UPDATE_USER, self.update_user),
                              (RequestCode.AUTH_DELETE_USER, self.delete_user),
                              (RequestCode.AUTH_GET_USER, self.get_user),
                              (RequestCode.AUTH_LIST_USER, self.list_user),
                              (RequestCode.AUTH_CREATE_ACL, self.create_acl),
                              (RequestCode.AUTH_UPDATE_ACL, self.update_acl),
                              (RequestCode.AUTH_DELETE_ACL, self.delete_acl),
                              (RequestCode.AUTH_GET_ACL, self.get_acl),
                              (RequestCode.AUTH_LIST_ACL, self.list_acl)):
            dispatcher.register(code, handler, pool)

