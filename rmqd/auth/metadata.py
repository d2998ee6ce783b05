"""The admin operations on users and ACLs, with 5.x's checks, defaults and messages
(``AuthenticationMetadataManagerImpl``, ``AuthorizationMetadataManagerImpl``).

Refusals raise :class:`~rmqd.auth.errors.AuthenticationError` / :class:`~rmqd.auth.errors.AuthorizationError`
(5.x answers them NO_PERMISSION with the message) or :class:`AuthSystemError` where 5.x fails on a null
(answered SYSTEM_ERROR "An system error occurred, please try again later."). Each change is one
:meth:`~rmqd.auth.store.AuthStore.commit`: on disk before it returns. Blocking: call from a pool thread.
"""
from __future__ import annotations

import logging
from typing import Callable, Mapping, Optional, TypeGuard

from rmqd.auth.config import AuthConfig
from rmqd.auth.errors import AuthenticationError, AuthorizationError
from rmqd.auth.model import Acl, Action, Policy, PolicyType, Resource, User, UserStatus, UserType
from rmqd.auth.source_ip import is_valid_ip_or_cidr
from rmqd.auth.store import AuthStore, copy_acl, copy_user

log = logging.getLogger(__name__)


class AuthSystemError(Exception):
    """Where 5.x's manager fails with a NullPointerException (a request without a subject)."""


def _given(s: Optional[str]) -> TypeGuard[str]:
    """Not None and not blank (the negation of 5.x's ``StringUtils.isBlank``)."""
    return s is not None and bool(s.strip())


class AuthMetadataManager:
    """Users and ACLs over an :class:`AuthStore`. ``on_change`` (optional) runs after every committed change (a
    controller-mode master waits there until its SyncStateSet members hold the change)."""

    def __init__(self, store: AuthStore, on_change: Optional[Callable[[], None]] = None) -> None:
        self.store = store
        self.on_change = on_change

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ start-up users
    def init_users(self, cfg: AuthConfig) -> None:
        """``initAuthenticationUser`` and ``innerClientAuthenticationCredentials`` become super users when missing
        (5.x; a bad value stops the start)."""
        init = cfg.init_user()
        if init is not None:
            user = User.from_info(init)
            user.user_type = UserType.SUPER
            if user.username is None or self.store.state.users.get(user.username) is None:
                try:
                    self.create_user(user)
                except AuthenticationError as exc:
                    raise ValueError(f"Init authentication user error: {exc.message}") from None
                log.info("auth: created the initial super user %s", user.username)
        inner = cfg.inner_credentials()
        if inner is not None and self.store.state.users.get(inner[0]) is None:
            self.create_user(User(inner[0], inner[1], UserType.SUPER))
            log.info("auth: created the inner client super user %s", inner[0])

    # ------------------------------------------------------------------ users
    def get_user(self, username: Optional[str]) -> Optional[User]:
        if not _given(username):
            raise AuthenticationError("username can not be blank")
        return self.store.state.users.get(username)

    def is_super_user(self, username: str) -> bool:
        user = self.get_user(username)
        if user is None:
            raise AuthenticationError("User:{} is not found", username)
        return user.user_type is UserType.SUPER

    @staticmethod
    def _validate(user: Optional[User], create: bool) -> str:
        """The user's name, when the user may be stored (AuthenticationError otherwise)."""
        if user is None:
            raise AuthenticationError("user can not be null")
        username = user.username
        if not _given(username):
            raise AuthenticationError("username can not be blank")
        if create and not _given(user.password):
            raise AuthenticationError("password can not be blank")
        return username

    def create_user(self, user: User) -> None:
        username = self._validate(user, True)
        user = copy_user(user)
        user.user_type = user.user_type or UserType.NORMAL
        user.user_status = user.user_status or UserStatus.ENABLE
        with self.store.lock:
            if self.store.state.users.get(username) is not None:
                raise AuthenticationError("The user is existed")
            self.store.commit(put_users=[user])
        self._changed()

    def update_user(self, user: User) -> None:
        """Only what is given changes: the password when not blank, the type and status when named."""
        username = self._validate(user, False)
        with self.store.lock:
            old = self.store.state.users.get(username)
            if old is None:
                raise AuthenticationError("The user is not exist")
            new = copy_user(old)
            if _given(user.password):
                new.password = user.password
            if user.user_type is not None:
                new.user_type = user.user_type
            if user.user_status is not None:
                new.user_status = user.user_status
            self.store.commit(put_users=[new])
        self._changed()

    def delete_user(self, username: Optional[str]) -> None:
        """The user and its ACL go together (one write)."""
        if not _given(username):
            raise AuthenticationError("username can not be blank")
        with self.store.lock:
            self.store.commit(delete_users=[username], delete_acls=[User(username).subject_key])
        self._changed()

    def list_users(self, filter_text: Optional[str]) -> list[User]:
        users = self.store.state.users
        return [users[k] for k in sorted(users, key=lambda k: k.encode("utf-8"))
                if not _given(filter_text) or filter_text in k]

    # ------------------------------------------------------------------ ACLs
    @staticmethod
    def _validate_acl(acl: Acl) -> User:
        """The ACL's subject, when the ACL may be stored (AuthorizationError / AuthSystemError otherwise)."""
        subject = acl.subject
        if subject is None:
            raise AuthSystemError("the ACL has no subject")
        if not acl.policies:
            raise AuthorizationError("The policies is empty.")
        for policy in acl.policies:
            if not policy.entries:
                raise AuthorizationError("The policy entries is empty.")
            for entry in policy.entries:
                if entry.resource is None:
                    raise AuthorizationError("The resource is null.")
                if not entry.actions:
                    raise AuthorizationError("The actions is empty.")
                if Action.ANY in entry.actions:
                    raise AuthorizationError("The actions can not be Any.")
                for ip in entry.source_ips or ():
                    if not _given(ip):
                        raise AuthorizationError("The source ip is empty.")
                    if not is_valid_ip_or_cidr(ip):
                        raise AuthorizationError("The source ip is invalid.")
                if entry.decision is None:
                    raise AuthorizationError("The decision is null or illegal.")
        return subject

    def put_acl(self, acl: Acl) -> None:
        """createAcl and updateAcl (the same in 5.x): a new ACL is stored as given; into an existing one each policy
        is merged, an entry of the same resource replacing the old one."""
        subject = self._validate_acl(acl)
        for policy in acl.policies:
            if policy.policy_type is None:
                policy.policy_type = PolicyType.CUSTOM
        key = subject.subject_key
        with self.store.lock:
            state = self.store.state
            if not self._exists(state.users, subject):
                raise AuthorizationError("The subject of {} is not exist.", key)
            old = state.acls.get(key)
            if old is None:
                new = copy_acl(acl)
            else:
                new = copy_acl(old)
                new.update_policies(copy_acl(acl).policies)
            self.store.commit(put_acls=[new])
        self._changed()

    def delete_acl(self, subject: Optional[User], policy_type: Optional[PolicyType] = None,
                   resource: Optional[Resource] = None) -> None:
        """Without a resource (or an unknown one, as 5.x parses it to none) the subject's whole ACL goes; with one,
        that entry of the policy type (Custom by default), and the ACL when nothing is left."""
        if subject is None:
            raise AuthorizationError("The subject is null.")
        policy_type = policy_type or PolicyType.CUSTOM
        with self.store.lock:
            state = self.store.state
            if not self._exists(state.users, subject):
                raise AuthorizationError("The subject is not exist.")
            old = state.acls.get(subject.subject_key)
            if old is None:
                raise AuthorizationError("The acl is not exist.")
            acl = copy_acl(old)
            if resource is not None:
                acl.delete_policy(policy_type, resource)
            if resource is None or not acl.policies:
                self.store.commit(delete_acls=[subject.subject_key])
            else:
                self.store.commit(put_acls=[acl])
        self._changed()

    @staticmethod
    def _exists(users: Mapping[str, User], subject: User) -> bool:
        """Is ``subject`` a stored user?"""
        return subject.username is not None and users.get(subject.username) is not None

    def get_acl(self, subject: User) -> Optional[Acl]:
        state = self.store.state
        if not self._exists(state.users, subject):
            raise AuthorizationError("The subject is not exist.")
        return state.acls.get(subject.subject_key)

    def list_acls(self, subject_filter: Optional[str], resource_filter: Optional[str]) -> list[Acl]:
        """5.x's listing: ACLs whose subject contains ``subject_filter``; unless the subject contains
        ``resource_filter`` too, only the entries whose resource does (policies left empty are dropped)."""
        acls = self.store.state.acls
        out: list[Acl] = []
        for key in sorted(acls, key=lambda k: k.encode("utf-8")):
            if _given(subject_filter) and subject_filter not in key:
                continue
            acl = copy_acl(acls[key])
            kept: list[Policy] = []
            for policy in acl.policies:
                if not policy.entries:
                    kept.append(policy)
                    continue
                if _given(resource_filter) and resource_filter not in key:
                    wanted = resource_filter
                    policy.entries = [e for e in policy.entries if e.resource is not None and
                                      wanted in e.resource.key]
                if policy.entries:
                    kept.append(policy)
            acl.policies = kept
            if acl.policies:
                out.append(acl)
        return out
