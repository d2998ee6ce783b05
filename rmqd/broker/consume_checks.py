"""The consumer-group preconditions shared by PULL_MESSAGE and POP (Java repeats them in both processors)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

from rmqd.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from rmqd.store.metadata import SubscriptionGroupConfig


class GroupFinder(Protocol):
    """What the checks read of the subscription groups (SubscriptionGroupManager, POP's PopGroups)."""

    def find(self, group: str) -> Optional["SubscriptionGroupConfig"]: ...


def check_consume_group(groups: GroupFinder, group: str,
                        faq: str) -> tuple[Optional["SubscriptionGroupConfig"], Optional[tuple[int, str]]]:
    """``(group config, None)`` when ``group`` exists (or is auto-created) and may consume, else
    ``(None, (response code, remark))`` with the Java broker's remark (``faq``: the FAQ tail it appends)."""
    sg = groups.find(group)
    if sg is None:
        return None, (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist, {faq}")
    if not sg.consume_enable:
        return None, (ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
    return sg, None
