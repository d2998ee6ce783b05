"""What the ``rmqd admin`` sub-command families share: the option flags most of them take, the shape of their
part of the command table, and the reading and printing of values as mqadmin does (booleans, times)."""
from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Literal, Optional, TypedDict, overload

if TYPE_CHECKING:
    from rmqd.admin.client import AdminClient

BROKER = ("-b", "--brokerAddr")
CLUSTER = ("-c", "--clusterName")
TOPIC = ("-t", "--topic")
GROUP = ("-g", "--consumerGroup")



class OptionArgs(TypedDict, total=False):
    """The ``argparse.add_argument`` keyword arguments the command table uses."""
    action: Literal["store_true"]
    type: Callable[[str], int]
    default: str | int
    required: bool
    help: str
    choices: list[str]


#: a sub-command's handler: the admin client and the parsed options
Handler = Callable[["AdminClient", argparse.Namespace], None]
#: one sub-command: (handler, help, [(flags, argparse keyword arguments)...])
SpecEntry = tuple[Handler, str, list[tuple[tuple[str, ...], OptionArgs]]]
#: sub-command -> its entry
SpecTable = dict[str, SpecEntry]


def is_true(v: object) -> bool:
    """An option given as ``true``/``false`` (mqadmin's Boolean.parseBoolean)."""
    return str(v).strip().lower() == "true"


def human_time(ms: int) -> str:
    """mqadmin's ``yyyy-MM-dd HH:mm:ss,SSS`` of epoch milliseconds (``N/A`` for none)."""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] if ms > 0 else "N/A"


@overload
def parse_time(s: str) -> int: ...
@overload
def parse_time(s: None) -> None: ...


def parse_time(s: Optional[str]) -> Optional[int]:
    """mqadmin time formats: millis, ``now``, ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    if s is None:
        return None
    if s == "now":
        return int(time.time() * 1000)
    if s.lstrip("-").isdigit():
        return int(s)
    return int(datetime.strptime(s, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
