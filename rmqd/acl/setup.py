"""Where the broker's ACL files are, and the hook built from them."""
from __future__ import annotations

import os
from typing import Optional

from rmqd.acl.hook import AclRequestHook, acl_request_hook
from rmqd.acl.plain_acl import PlainAclManager
from rmqd.acl.validator import AclValidator


def acl_locations(acl_file: Optional[str]) -> tuple[str, str]:
    """(home, default file). ``aclFile`` (``rmqd serve --acl FILE``) names the default file, and its home
    is the directory holding ``conf/`` (or the file's own directory); otherwise Java's place:
    ``$ROCKETMQ_HOME/conf/plain_acl.yml``, with ``~/.rmqd`` standing in for an unset ROCKETMQ_HOME."""
    if acl_file:
        path = os.path.abspath(os.path.expanduser(acl_file))
        parent = os.path.dirname(path)
        home = os.path.dirname(parent) if os.path.basename(parent) == "conf" else parent
        return home, path
    home = os.environ.get("ROCKETMQ_HOME") or os.path.join(os.path.expanduser("~"), ".rmqd")
    return home, os.path.join(home, "conf", "plain_acl.yml")


def build_acl(acl_file: Optional[str]) -> tuple[PlainAclManager, AclRequestHook]:
    home, default_file = acl_locations(acl_file)
    manager = PlainAclManager(home, default_file)
    return manager, acl_request_hook(AclValidator(manager))
