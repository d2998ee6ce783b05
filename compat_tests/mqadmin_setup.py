"""Topics and consumer groups made the way an operator makes them: with 5.x mqadmin (``updateTopic`` /
``updateSubGroup`` / ``updateBrokerConfig`` through the session's :class:`java5kit.Mqadmin5`), against the Java
reference and rmqd alike, before an application starts; then wait until the name server routes each topic (a client
that finds no route at its start gives up, or looks again only 30 s later)."""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterable, Mapping, Sequence

from scenarios import wait_for

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

GET_ROUTEINFO_BY_TOPIC = 105


def _ok(res, what: str) -> None:
    assert res.returncode == 0 and "success" in res.stdout, f"mqadmin {what}: {res.stdout[-2000:]}"


def create_topics(mqadmin, namesrv: str, topics: Mapping[str, Sequence[str]], cluster: str = "DefaultCluster",
                  queues: int = 4) -> None:
    """``updateTopic`` per topic with its extra options (e.g. ``("-a", "+message.type=FIFO")``)."""
    for topic, extra in topics.items():
        _ok(mqadmin.run("updateTopic", "-n", namesrv, "-c", cluster, "-t", topic, "-r", str(queues),
                        "-w", str(queues), *extra), f"updateTopic {topic}")


def create_groups(mqadmin, namesrv: str, groups: Mapping[str, Sequence[str]], cluster: str = "DefaultCluster") -> None:
    """``updateSubGroup`` per group with its extra options (e.g. ``("-r", "1")``, ``("-o", "true")``,
    ``("--attributes", "+lite.bind.topic=T")``)."""
    for group, extra in groups.items():
        _ok(mqadmin.run("updateSubGroup", "-n", namesrv, "-c", cluster, "-g", group, *extra),
            f"updateSubGroup {group}")


def update_broker_config(mqadmin, namesrv: str, settings: Mapping[str, str], cluster: str = "DefaultCluster") -> None:
    """``updateBrokerConfig -k K -v V`` per setting, on every broker of the cluster."""
    for key, value in settings.items():
        _ok(mqadmin.run("updateBrokerConfig", "-n", namesrv, "-c", cluster, "-k", key, "-v", value),
            f"updateBrokerConfig {key}={value}")


def broker_config_values(mqadmin, namesrv: str, keys: Iterable[str], cluster: str = "DefaultCluster") -> dict[str, str]:
    """The current values of ``keys`` on the cluster's brokers (``getBrokerConfig``; the first broker's answer)."""
    res = mqadmin.run("getBrokerConfig", "-n", namesrv, "-c", cluster)
    assert res.returncode == 0, f"mqadmin getBrokerConfig: {res.stdout[-2000:]}"
    found: dict[str, str] = {}
    for line in res.stdout.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key in keys and key not in found:
            found[key] = value.strip()
    missing = set(keys) - set(found)
    assert not missing, f"getBrokerConfig shows no {sorted(missing)}: {res.stdout[-2000:]}"
    return found

# The Java broker refuses a send SYSTEM_BUSY when it waited longer than waitTimeMillsInSendQueue (200 ms) in its
# queue ([TIMEOUT_CLEAN_QUEUE]) or when the put before it held the store longer than osPageCacheBusyTimeOutMills
# (1 s, [PCBUSY_CLEAN_QUEUE]); the Go remoting client does not retry SYSTEM_BUSY. On these shared, loaded machines
# the scenarios give both 10 s, as the operator of a busy broker would.
BUSY_MACHINE = {"waitTimeMillsInSendQueue": "10000", "osPageCacheBusyTimeOutMills": "10000"}


@contextmanager
def broker_settings(mqadmin, namesrvs: Iterable[str], settings: Mapping[str, str]):
    """``settings`` on the brokers of each name server for the duration, then the values they had again (the
    session's reference is shared by every test)."""
    namesrvs = list(namesrvs)
    before = {namesrv: broker_config_values(mqadmin, namesrv, settings) for namesrv in namesrvs}
    try:
        for namesrv in namesrvs:
            update_broker_config(mqadmin, namesrv, settings)
        yield
    finally:
        for namesrv in namesrvs:
            update_broker_config(mqadmin, namesrv, before[namesrv])


def wait_routes(namesrv: str, topics: Iterable[str], timeout: float = 30.0) -> None:
    """Until the name server answers GET_ROUTEINFO_BY_TOPIC with a readable queue for every topic."""
    def routed(topic: str) -> bool:
        with BlockingClient(namesrv) as c:
            resp = c.invoke(new_request(GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)
        if resp.code != 0 or not resp.body:
            return False
        # fastjson's route body is not strict JSON (integer map keys): look for a readable queue in the text
        return any(int(n) > 0 for n in re.findall(rb'"readQueueNums":(\d+)', resp.body_bytes()))

    for topic in topics:
        wait_for(lambda: routed(topic), timeout, interval=0.2, what=f"the route of {topic} at {namesrv}")
