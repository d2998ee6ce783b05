"""The topic table the lite layer reads and its topics view passes on (what it uses of
:class:`rmqd.store.metadata.TopicConfigManager`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Protocol

if TYPE_CHECKING:
    from rmqd.store.metadata import TopicConfig


class TopicTable(Protocol):
    """The broker's topic configs: looked up by name, listed, and the calls POP makes through
    :class:`rmqd.store.lite.view.LiteTopicsView`."""

    @property
    def table(self) -> Mapping[str, "TopicConfig"]: ...

    def get(self, topic: str) -> Optional["TopicConfig"]: ...

    def add_system_topic(self, tc: "TopicConfig") -> None: ...

    def update(self, tc: "TopicConfig") -> None: ...

    def create_topic_in_send_message_back_method(self, topic: str, client_queue_nums: int, perm: int = ...,
                                                 topic_sys_flag: int = 0) -> "TopicConfig": ...
