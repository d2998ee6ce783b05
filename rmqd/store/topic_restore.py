"""Re-create topic configs the store still has messages for (topics.json lost or damaged).

Java's broker would start without them and answer TOPIC_NOT_EXIST for data it still holds; the
consume queues on disk say which topics and queues exist, so rmqd puts them back (read/write
queue numbers = highest queue id + 1, perm RW) and logs each one.  Deleted topics are not
resurrected: DELETE_TOPIC removes their consume queues too.
"""
from __future__ import annotations

import logging
from typing import Iterable

from rmqd.store.metadata import PERM_READ, PERM_WRITE, TopicConfig, TopicConfigManager, is_valid_topic_name

log = logging.getLogger(__name__)


def restore_topics_from_store(topics: TopicConfigManager, queues: Iterable[tuple[str, int]]) -> list[str]:
    """Add a config for every (topic, queue id) the store holds but ``topics`` lacks."""
    want: dict[str, int] = {}
    for topic, queue_id in queues:
        want[topic] = max(want.get(topic, 0), queue_id + 1)
    restored = []
    for topic, nums in sorted(want.items()):
        tc = topics.get(topic)
        if tc is not None:
            if max(tc.read_queue_nums, tc.write_queue_nums) < nums:
                log.warning("topic %s has consume queues up to id %d but its config has %d/%d queues; "
                            "widening it", topic, nums - 1, tc.read_queue_nums, tc.write_queue_nums)
                tc.read_queue_nums = max(tc.read_queue_nums, nums)
                topics.update(tc)
            continue
        if not is_valid_topic_name(topic):
            log.error("store has consume queues of an invalid topic name %r; not restoring it", topic)
            continue
        log.warning("topic %s is missing from %s but the store holds %d queue(s) of it; restoring "
                    "its config", topic, topics.path, nums)
        topics.update(TopicConfig(topic_name=topic, read_queue_nums=nums, write_queue_nums=nums,
                                  perm=PERM_READ | PERM_WRITE))
        restored.append(topic)
    return restored
