"""ACL from the command line: `rmqd serve --acl FILE`, the default file under $ROCKETMQ_HOME with
aclEnable=true in broker.conf, and `rmqd admin updateGlobalWhiteAddr`."""
from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator


from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

READY = re.compile(r"rmqd ready: name server (127\.0\.0\.1:\d+), broker (127\.0\.0\.1:\d+)")
ACL = "accounts:\n  - {accessKey: cliAdmin01, secretKey: cliAdminSk01, admin: true}\n"
ADMIN = ("cliAdmin01", "cliAdminSk01")
TOPIC_EXT = {"topic": "CliAcl", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
             "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}


def send_ext(topic: str) -> dict:
    return {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
            "i": "", "j": "0", "k": "false", "m": "false"}


@contextlib.contextmanager
def serve(args: list[str], tmp_path: Path, env: dict | None = None) -> Iterator[tuple[str, str]]:
    """`rmqd serve ARGS` on free ports; yields (name server, broker) once it is ready."""
    proc = subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", "serve", "--namesrv-port", "0", "--broker-port", "0",
                             "--console-port", "0", "--grpc-port", "0", "--store-dir", str(tmp_path / "store"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path,
                            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    try:
        deadline = time.monotonic() + 20
        ready = None
        while ready is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            ready = READY.search(line)
        assert ready, "rmqd serve did not get ready"
        yield ready.group(1), ready.group(2)
    finally:
        proc.terminate()
        assert proc.wait(15) == 0


def assert_acl_on_with_the_file(broker: str) -> None:
    """Unsigned requests are refused; the file's admin account (defined nowhere else) is accepted."""
    with BlockingClient(broker) as c:
        r = c.invoke(new_request(17, dict(TOPIC_EXT)), 5)
        assert r.code == 1 and "No accessKey is configured" in r.remark
        assert c.invoke(new_request(17, sign_request(dict(TOPIC_EXT), None, *ADMIN)), 5).code == 0
        r = c.invoke(new_request(310, send_ext("CliAcl"), b"unsigned"), 5)
        assert r.code == 1 and "No accessKey is configured" in r.remark
        assert c.invoke(new_request(310, sign_request(send_ext("CliAcl"), b"signed", *ADMIN), b"signed"), 5).code == 0


def test_serve_acl_file(tmp_path):
    acl = tmp_path / "elsewhere" / "my_acl.yml"
    acl.parent.mkdir()
    acl.write_text(ACL)
    with serve(["--acl", str(acl)], tmp_path, {"ROCKETMQ_HOME": str(tmp_path / "no-home")}) as (_, broker):
        assert_acl_on_with_the_file(broker)


def test_acl_enable_reads_the_default_file_under_rocketmq_home(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    conf = tmp_path / "broker.conf"
    conf.write_text("aclEnable=true\n")
    with serve(["-c", str(conf)], tmp_path, {"ROCKETMQ_HOME": str(home)}) as (_, broker):
        assert_acl_on_with_the_file(broker)


def test_rmqd_admin_update_global_white_addr(tmp_path, monkeypatch):
    """`rmqd admin updateGlobalWhiteAddr -g 127.0.0.1` lets unsigned requests from 127.0.0.1 through at once;
    setting the list back refuses them again. The file is rewritten."""
    from rmqd.admin.main import main
    from rmqd.testing import EmbeddedServer

    (tmp_path / "conf").mkdir()
    acl = tmp_path / "conf" / "plain_acl.yml"
    acl.write_text("globalWhiteRemoteAddresses: [10.9.9.9]\n" + ACL)
    tools = tmp_path / "tools"
    (tools / "conf").mkdir(parents=True)
    (tools / "conf" / "tools.yml").write_text(f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(tools))

    def admin(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = main([*argv, "-n", server.namesrv_addr, "-c", "DefaultCluster"])
        return rc, out.getvalue()

    with EmbeddedServer(broker_properties={"aclEnable": "true", "aclFile": str(acl)}) as server, \
            BlockingClient(server.broker_addr) as c:
        unsigned = lambda: c.invoke(new_request(17, dict(TOPIC_EXT)), 5)  # noqa: E731
        assert unsigned().code == 1
        rc, out = admin("updateGlobalWhiteAddr", "-g", "127.0.0.1,10.9.9.9")
        assert rc == 0 and f"update global white remote addresses to {server.broker_addr} success." in out, out
        assert "127.0.0.1" in acl.read_text()
        assert unsigned().code == 0
        rc, out = admin("updateGlobalWhiteAddr", "-g", "10.9.9.9", "-p", str(acl))
        assert rc == 0, out
        r = unsigned()
        assert r.code == 1 and "No accessKey is configured" in r.remark
        rc, out = admin("updateGlobalWhiteAddr", "-g", "127.0.0.1", "-p", "/etc/passwd")      # not an ACL file
        assert rc == 1 and "CODE: 211" in out and "has been updated failed" in out, out
        assert unsigned().code == 1
