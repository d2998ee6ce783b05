"""How the differential tests pick the real RocketMQ they compare rmqd with (reference_target.py)."""
from __future__ import annotations

import pytest

from reference_target import DEFAULT_IMAGE, choose_reference, container_script, docker_engine_answers


def test_an_explicit_choice_wins_whatever_the_engine_says() -> None:
    assert choose_reference({"RMQD_REFERENCE": "kit"}, lambda: True) == "kit"
    assert choose_reference({"RMQD_REFERENCE": "Docker "}, lambda: False) == "docker"


def test_unset_means_docker_only_when_an_engine_answers() -> None:
    assert choose_reference({}, lambda: True) == "docker"
    assert choose_reference({}, lambda: False) == "kit"
    assert choose_reference({"RMQD_REFERENCE": ""}, lambda: False) == "kit"


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="RMQD_REFERENCE='podman'"):
        choose_reference({"RMQD_REFERENCE": "podman"}, lambda: True)


def test_the_engine_probe_says_no_when_nothing_listens(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert docker_engine_answers(timeout=1.0) is False
    assert choose_reference({}, lambda: docker_engine_answers(timeout=1.0)) == "kit"


def test_the_container_runs_namesrv_and_a_loopback_broker_on_the_published_ports() -> None:
    script = container_script(20001, 20004)
    assert "listenPort=20004" in script and "namesrvAddr=127.0.0.1:20001" in script
    assert "listenPort=20001" in script and "brokerIP1=127.0.0.1" in script
    assert script.index("mqnamesrv") < script.index("mqbroker")
    assert DEFAULT_IMAGE.startswith("apache/rocketmq:4.9.")


def test_the_container_broker_gets_the_kit_clusters_extra_conf() -> None:
    """The image's broker runs with the same extra settings as the kit's session cluster, so the differential
    tests compare rmqd with the same configuration whichever reference answers."""
    from javakit import reference_conf_lines

    lines = reference_conf_lines()
    assert "enablePropertyFilter=true" in lines and any(ln.startswith("messageDelayLevel=1s 1s") for ln in lines)
    script = container_script(20001, 20004, lines)
    for line in lines:
        assert line in script
