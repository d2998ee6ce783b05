"""Users and ACLs on disk: ``<storePathRootDir>/config/auth.json``, rewritten whole on every change.

5.x keeps them in two RocksDB instances (``config/users``, ``config/acls``). rmqd keeps one JSON file written
with :func:`rmqd.common.fileutil.atomic_write` (temp file, fsync, rename, directory fsync): a crash at any instant of an
update leaves the old or the new content, never a mix, and a change is on disk before it is answered. The
previous content stays as ``auth.json.bak`` and is read when ``auth.json`` cannot be (a damaged disk).

Readers take :attr:`AuthStore.state`, an immutable snapshot replaced as a whole by each commit (no locks on the
request path); ``state.generation`` moves with every change, so decisions cached per snapshot stay right.
The :class:`~rmqd.common.data_version.DataVersion` moves with every change too; a slave compares it with its master's.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, cast

import orjson

from rmqd.auth.model import Acl, User, acl_from_store, acl_to_store, json_objects
from rmqd.common.backup_read import read_with_backup
from rmqd.common.data_version import DataVersion
from rmqd.common.fileutil import atomic_write

if TYPE_CHECKING:
    from rmqd.common.data_version import DataVersionJson

log = logging.getLogger(__name__)

FILE_NAME = "auth.json"


@dataclass(frozen=True)
class AuthState:
    users: Mapping[str, User] = field(default_factory=lambda: MappingProxyType({}))
    acls: Mapping[str, Acl] = field(default_factory=lambda: MappingProxyType({}))    # subject key -> Acl
    version: DataVersion = field(default_factory=DataVersion)
    generation: int = 0


class AuthStore:
    """See the module docstring. Mutations are serialised by :attr:`lock` (re-entrant: the metadata manager
    holds it over a read-modify-write)."""

    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, FILE_NAME)
        self.lock = threading.RLock()
        self.state = AuthState(version=DataVersion.fresh())
        self.listeners: list[Callable[[AuthState], None]] = []   # told the new state after every change (by the writer)

    # ------------------------------------------------------------------ disk
    def load(self) -> None:
        """Read the file (the backup when the file is damaged); nothing on disk is an empty store."""
        generation = self.state.generation + 1
        found = read_with_backup(self.path, lambda raw: self._state_of(orjson.loads(raw), generation),
                                 (OSError, ValueError, TypeError, AttributeError), "auth")
        if found is None:
            if os.path.exists(self.path):
                raise RuntimeError(f"auth: {self.path} and its backup are unreadable; refusing to start with no users")
            return
        path, self.state = found
        log.info("auth: %d user(s), %d ACL(s) from %s", len(self.state.users), len(self.state.acls), path)

    @staticmethod
    def _state_of(data: object, generation: int) -> AuthState:
        """The state a snapshot (:meth:`snapshot`) holds; TypeError / ValueError for a damaged one."""
        if not isinstance(data, dict):
            raise TypeError(f"the users and ACLs are not a JSON object: {type(data).__name__}")
        users: dict[str, User] = {}
        for entry in json_objects(data.get("users")):
            user = User.from_store(entry)
            if user.username is None:
                raise ValueError("a stored user has no username")
            users[user.username] = user
        acls: dict[str, Acl] = {}
        for d in json_objects(data.get("acls")):
            acl = acl_from_store(d)
            if acl.subject is not None:
                acls[acl.subject.subject_key] = acl
        # the JSON document's version entry (from_json reads a malformed one as 0/0)
        version = DataVersion.from_json(cast("Optional[DataVersionJson]", data.get("dataVersion")))
        return AuthState(MappingProxyType(users), MappingProxyType(acls), version, generation)

    def snapshot(self, state: Optional[AuthState] = None) -> dict[str, object]:
        """The whole store as JSON-able data (the file's content; what a slave copies)."""
        st = state or self.state
        return {"dataVersion": st.version.to_json(),
                "users": [st.users[k].to_store() for k in sorted(st.users, key=_utf8)],
                "acls": [acl_to_store(st.acls[k]) for k in sorted(st.acls, key=_utf8)]}

    def _write(self, state: AuthState) -> None:
        atomic_write(self.path, orjson.dumps(self.snapshot(state), option=orjson.OPT_INDENT_2))
        try:
            os.chmod(self.path, 0o600)          # passwords: as readable as the store itself
        except OSError as exc:
            log.warning("auth: cannot restrict %s to its owner: %r", self.path, exc)

    def _publish(self, state: AuthState) -> None:
        self.state = state
        for listener in list(self.listeners):
            try:
                listener(state)
            except Exception:
                log.exception("auth: a change listener failed")

    # ------------------------------------------------------------------ changes
    def commit(self, put_users: Iterable[User] = (), delete_users: Iterable[str] = (), put_acls: Iterable[Acl] = (),
               delete_acls: Iterable[str] = ()) -> AuthState:
        """Apply the changes as one write (on disk before it returns); the new state."""
        with self.lock:
            old = self.state
            users, acls = dict(old.users), dict(old.acls)
            for u in put_users:
                if u.username is None:
                    raise ValueError("a user without a name cannot be stored")
                users[u.username] = u
            for name in delete_users:
                users.pop(name, None)
            for a in put_acls:
                if a.subject is None:
                    raise ValueError("an ACL without a subject cannot be stored")
                acls[a.subject.subject_key] = a
            for key in delete_acls:
                acls.pop(key, None)
            version = DataVersion(old.version.timestamp, old.version.counter)
            version.next_version()
            new = AuthState(MappingProxyType(users), MappingProxyType(acls), version, old.generation + 1)
            self._write(new)
            self._publish(new)
            return new

    def replace(self, data: object) -> bool:
        """Take a master's snapshot (:meth:`snapshot`) as a whole; False when it is the version held already."""
        with self.lock:
            new = self._state_of(data, self.state.generation + 1)
            if new.version == self.state.version:
                return False
            self._write(new)
            self._publish(new)
            return True


def _utf8(key: str) -> bytes:
    """RocksDB's key order (5.x lists users and ACLs in it)."""
    return key.encode("utf-8")


def copy_user(u: User) -> User:
    return User(u.username, u.password, u.user_type, u.user_status)


def copy_acl(a: Acl) -> Acl:
    """A deep copy (the stored one is shared by readers and never changed in place)."""
    return acl_from_store(acl_to_store(a))

