"""plain_acl.yml: accounts and white lists, hot reload, and the updates of the ACL admin codes.

Where Java looks (``PlainPermissionManager``): the default file ``<home>/conf/plain_acl.yml`` (or the
file given with ``rmqd serve --acl``) plus every ``.yml``/``.yaml`` under ``<home>/conf/acl/``.
An access key defined in two files belongs to the first one read. Edits to any of the files take
effect without a restart: a watcher thread compares their modification stamps every half second and
reloads; a file that fails to parse is logged and the previous configuration stays in force.

The admin codes (updateAclConfig 50, deleteAclConfig 51, updateGlobalWhiteAddr 53) rewrite the file that
holds the account (a new account goes to the default file) atomically (rmqd.common.fileutil.atomic_write), with
the file's ``dataVersion`` bumped, and the change is live at once. Secret keys are never logged.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Optional, cast

import orjson

from rmqd.acl import permission as P
from rmqd.acl.address import Matcher, address_matcher
from rmqd.acl.permission import AclError
from rmqd.acl.signer import Verifier
from rmqd.common.data_version import DataVersion
from rmqd.common.fileutil import atomic_write
from rmqd.common.yaml_files import YAMLError, dump_yaml, load_yaml

if TYPE_CHECKING:
    from rmqd.common.data_version import DataVersionJson

log = logging.getLogger(__name__)

MIN_KEY_LENGTH = 6            # access and secret keys must be longer than this
WATCH_INTERVAL_S = 0.5


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: Optional[str]
    white_match: Matcher = field(repr=False)
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int] = field(repr=False)          # resource (topic, or %RETRY%group) -> permission
    verifier: Verifier = field(repr=False, compare=False)


@dataclass
class AclState:
    """One consistent snapshot of every file (replaced as a whole on reload, read without locks)."""
    accounts: dict[str, Account] = field(default_factory=dict)       # access key -> Account
    file_of: dict[str, str] = field(default_factory=dict)            # access key -> file
    global_white: list[Matcher] = field(default_factory=list)
    global_white_text: list[str] = field(default_factory=list)       # the patterns as written (for display)
    versions: dict[str, DataVersion] = field(default_factory=dict)   # file -> DataVersion


def _check_keys(access_key: object, secret_key: object) -> None:
    if (access_key is None or secret_key is None or len(str(access_key)) <= MIN_KEY_LENGTH
            or len(str(secret_key)) <= MIN_KEY_LENGTH):
        raise AclError(f"The accessKey={access_key} and secretKey=<hidden> cannot be null and length should "
                       f"longer than {MIN_KEY_LENGTH}")


def build_account(cfg: Mapping[str, object]) -> Account:
    """An account from its plain_acl.yml entry (raises AclError for a bad one)."""
    _check_keys(cfg.get("accessKey"), cfg.get("secretKey"))
    white = cfg.get("whiteRemoteAddress")
    perms = P.resource_perms(_items(cfg, "groupPerms"), topics=False)
    perms.update(P.resource_perms(_items(cfg, "topicPerms"), topics=True))
    return Account(str(cfg["accessKey"]), str(cfg["secretKey"]), None if white is None else str(white),
                   address_matcher(None if white is None else str(white)), _truthy(cfg.get("admin")),
                   P.parse_perm(cfg.get("defaultTopicPerm")), P.parse_perm(cfg.get("defaultGroupPerm")), perms,
                   Verifier(str(cfg["secretKey"])))


def _truthy(value: object) -> bool:
    return value is True or str(value).strip().lower() == "true"


#: A plain_acl.yml document (or one account's entry) as PyYAML reads it.
YamlMapping = dict[str, object]


def _items(entry: Mapping[str, object], key: str) -> list[object]:
    """A list field of a YAML mapping (absent or empty: no items); AclError for a value that is no list."""
    value = entry.get(key)
    if not value:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    raise AclError(f"{key} must be a list, not {type(value).__name__}")


def _account_entries(data: Mapping[str, object], path: str) -> list[YamlMapping]:
    """The ``accounts`` of a file; AclError for an entry that is not a mapping."""
    entries: list[YamlMapping] = []
    for entry in _items(data, "accounts"):
        if not isinstance(entry, dict):
            raise AclError(f"{path}: an account must be a mapping, not {type(entry).__name__}")
        entries.append(entry)
    return entries


def _read_yaml(path: str) -> YamlMapping:
    with open(path, encoding="utf-8") as f:
        data = load_yaml(f)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AclError(f"{path}: not a plain ACL file (a mapping is expected)")
    return data


def _version_of(data: Mapping[str, object]) -> DataVersion:
    versions = data.get("dataVersion")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        # the YAML document's version entry; from_json reads a malformed one as 0/0
        return DataVersion.from_json(cast("DataVersionJson", versions[0]))
    return DataVersion.fresh()


class PlainAclManager:
    """The accounts and white lists of every ACL file, kept current."""

    def __init__(self, home: str, default_file: Optional[str] = None) -> None:
        self.home = os.path.abspath(home)
        self.acl_dir = os.path.join(self.home, "conf", "acl")
        self.default_file = os.path.abspath(default_file or os.path.join(self.home, "conf", "plain_acl.yml"))
        self._lock = threading.RLock()
        self._stamps: dict[str, tuple[int, int, int]] = {}
        self._stop = threading.Event()
        self._watcher: Optional[threading.Thread] = None
        self.state = self._load()

    # ------------------------------------------------------------------ files
    def files(self) -> list[str]:
        found = []
        if os.path.isdir(self.acl_dir):
            for root, _dirs, names in os.walk(self.acl_dir):
                found += [os.path.join(root, n) for n in sorted(names) if n.endswith((".yml", ".yaml"))]
        if os.path.isfile(self.default_file) and self.default_file not in found:
            found.append(self.default_file)
        return found

    def _file_stamps(self) -> dict[str, tuple[int, int, int]]:
        stamps = {}
        for path in self.files():
            try:
                st = os.stat(path)
                stamps[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except FileNotFoundError:
                continue
        return stamps

    def _load(self) -> AclState:
        """Read every file into a new state (AclError / yaml.YAMLError when one is bad)."""
        os.makedirs(os.path.dirname(self.default_file), exist_ok=True)
        if not os.path.exists(self.default_file):
            open(self.default_file, "a").close()               # Java creates an empty default file
        state = AclState()
        stamps = self._file_stamps()
        for path in stamps:
            data = _read_yaml(path)
            for pattern in _items(data, "globalWhiteRemoteAddresses"):
                state.global_white.append(address_matcher(str(pattern)))
                state.global_white_text.append(str(pattern))
            for cfg in _account_entries(data, path):
                account = build_account(cfg)
                if account.access_key in state.accounts:
                    log.warning("ACL: access key %s is defined again in %s; the one in %s is used",
                                account.access_key, path, state.file_of[account.access_key])
                    continue
                state.accounts[account.access_key] = account
                state.file_of[account.access_key] = path
            state.versions[path] = _version_of(data)
        self._stamps = stamps
        log.info("ACL: %d account(s), %d global white address pattern(s) from %d file(s)",
                 len(state.accounts), len(state.global_white), len(stamps))
        return state

    def reload(self) -> bool:
        """Reload every file; False (and the old state kept) when one is bad."""
        with self._lock:
            try:
                self.state = self._load()
                return True
            except (AclError, YAMLError, OSError, KeyError, TypeError, ValueError) as exc:
                log.error("ACL: not reloaded, keeping the previous configuration: %s", exc)
                self._stamps = self._file_stamps()              # do not retry until the next edit
                return False

    # ------------------------------------------------------------------ watching
    def start(self) -> None:
        if self._watcher is None:
            self._stop.clear()
            self._watcher = threading.Thread(target=self._watch, name="rmqd-acl-watch", daemon=True)
            self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(5)
            self._watcher = None

    shutdown = stop        # the broker's background-service interface (start/shutdown)

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            try:
                if self._file_stamps() != self._stamps:
                    log.info("ACL: a configuration file changed; reloading")
                    self.reload()
            except Exception:
                log.exception("ACL: watching the configuration files failed")

    # ------------------------------------------------------------------ admin codes
    def _rewrite(self, path: str, data: YamlMapping) -> None:
        version = _version_of(data)
        version.next_version()
        data["dataVersion"] = [{"counter": version.counter, "timestamp": version.timestamp}]
        atomic_write(path, dump_yaml(data), keep_backup=False)

    def update_account(self, cfg: Mapping[str, object]) -> None:
        """updateAclConfig (50): create or update an account; raises AclError for bad input."""
        _check_keys(cfg.get("accessKey"), cfg.get("secretKey"))
        P.check_resource_perms(_items(cfg, "topicPerms"))
        P.check_resource_perms(_items(cfg, "groupPerms"))
        with self._lock:
            path = self.state.file_of.get(str(cfg["accessKey"]), self.default_file)
            data = _read_yaml(path) if os.path.exists(path) else {}
            accounts = _account_entries(data, path)
            entry: YamlMapping = {}
            for i, existing in enumerate(accounts):
                if existing.get("accessKey") == cfg["accessKey"]:
                    entry = accounts.pop(i)
                    break
            for key, value in cfg.items():
                if value is not None:
                    entry[key] = value
            build_account(entry)                                     # refuse what would not load
            accounts.append(entry)
            data["accounts"] = accounts
            self._rewrite(path, data)
            self.reload()
        log.info("ACL: account %s updated in %s", cfg["accessKey"], path)

    def delete_account(self, access_key: str) -> bool:
        """deleteAclConfig (51): False when no file holds the account."""
        if not access_key:
            return False
        with self._lock:
            path = self.state.file_of.get(access_key)
            if path is None:
                return False
            data = _read_yaml(path)
            every = _account_entries(data, path)
            accounts = [a for a in every if a.get("accessKey") != access_key]
            if len(accounts) == len(every):
                return False
            data["accounts"] = accounts
            self._rewrite(path, data)
            self.reload()
        log.info("ACL: account %s deleted from %s", access_key, path)
        return True

    def update_global_white(self, addresses: Iterable[str], path: Optional[str] = None) -> bool:
        """updateGlobalWhiteAddr (53): replace one file's ``globalWhiteRemoteAddresses``. Like Java, only
        an existing ``.yml`` file under the ACL home is accepted."""
        path = os.path.abspath(path) if path else self.default_file
        if not os.path.isfile(path) or not path.startswith(self.home) or not path.endswith((".yml", ".yaml")):
            log.error("ACL: %s is not an ACL file under %s", path, self.home)
            return False
        addresses = [a for a in addresses if a]
        for a in addresses:
            address_matcher(a)                                        # refuse malformed patterns
        with self._lock:
            data = _read_yaml(path)
            data["globalWhiteRemoteAddresses"] = addresses
            self._rewrite(path, data)
            self.reload()
        log.info("ACL: global white addresses of %s set to %s", path, addresses)
        return True

    def version_info(self) -> tuple[str, str]:
        """GET_BROKER_CLUSTER_ACL_INFO (52): the default file's version and every file's, as JSON."""
        versions = self.state.versions
        default = versions.get(self.default_file) or DataVersion.fresh()
        return (orjson.dumps(default.to_json()).decode(),
                orjson.dumps({p: v.to_json() for p, v in versions.items()}).decode())
