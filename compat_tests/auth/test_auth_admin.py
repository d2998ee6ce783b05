"""Administering access control 2.0 against the Java 5.5.0 broker: 5.5's mqadmin user and ACL sub-commands (the
cluster and broker forms, copyUser and copyAcl between the two brokers) print the same on both; the ACL 1.0 accounts
both migrated at start are the same users and ACLs; bad admin input gets the same code and remark class and
changes nothing."""
from __future__ import annotations

import json
import re

import pytest
from auth_matrix import JAVA_START_TIMEOUT, SUPER, signed_call

pytestmark = pytest.mark.timeout(JAVA_START_TIMEOUT + 300)


def _strip(out: str, side) -> str:
    """mqadmin's output with the broker's address and the timing lines taken out."""
    return re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "<addr>", out).replace(side.broker, "<addr>")


@pytest.fixture(scope="module")
def admin5(auth_pair, tmp_path_factory):
    from java5kit import Mqadmin5
    home = tmp_path_factory.mktemp("auth-admin-home")
    (home / "conf").mkdir()
    (home / "conf" / "tools.yml").write_text(f"accessKey: {SUPER[0]}\nsecretKey: {SUPER[1]}\n")
    with Mqadmin5(home=home) as shell:
        shell.home = home
        yield shell


def _both(shell, auth_pair, *args: str) -> dict:
    out = {}
    for side in auth_pair.sides:
        res = shell.run(*[a.replace("{broker}", side.broker) for a in args], "-n", side.namesrv, timeout=60)
        assert res.returncode == 0, res.stdout[-2000:]
        out[side.name] = _strip(res.stdout, side)
    return out


def _rmqd_admin(side, home, *args: str) -> tuple[int, str]:
    """``rmqd admin <args>`` in this process, signing with ``home``'s tools.yml (as mqadmin)."""
    import contextlib
    import io
    import os

    from rmqd.admin.main import main
    out = io.StringIO()
    old = os.environ.get("ROCKETMQ_HOME")
    os.environ["ROCKETMQ_HOME"] = str(home)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = main([*[a.replace("{broker}", side.broker) for a in args], "-n", side.namesrv])
    finally:
        if old is None:
            os.environ.pop("ROCKETMQ_HOME", None)
        else:
            os.environ["ROCKETMQ_HOME"] = old
    return rc, _strip(out.getvalue(), side)


def test_mqadmin5_user_and_acl_commands_print_the_same(auth_pair, admin5) -> None:
    steps = [
        ("createUser", "-c", "DefaultCluster", "-u", "cliUser01", "-p", "cliPass01"),
        ("createUser", "-b", "{broker}", "-u", "cliUser02", "-p", "cliPass02", "-t", "Super"),
        ("updateUser", "-c", "DefaultCluster", "-u", "cliUser01", "-s", "disable"),
        ("getUser", "-b", "{broker}", "-u", "cliUser01"),
        ("listUser", "-c", "DefaultCluster", "-f", "cliUser"),
        ("createAcl", "-c", "DefaultCluster", "-s", "User:cliUser01", "-r", "Topic:cli-a,Group:cli-g*",
         "-a", "Pub,Sub", "-i", "127.0.0.1,10.0.0.0/8", "-d", "Allow"),
        ("updateAcl", "-b", "{broker}", "-s", "User:cliUser01", "-r", "Topic:cli-a", "-a", "Get", "-d", "Deny"),
        ("listAcl", "-c", "DefaultCluster", "-s", "cliUser", "-r", "Group"),
        ("deleteAcl", "-c", "DefaultCluster", "-s", "User:cliUser01", "-r", "Group:cli-g*"),
        ("getAcl", "-c", "DefaultCluster", "-s", "User:cliUser01"),
        ("deleteUser", "-c", "DefaultCluster", "-u", "cliUser02"),
        ("createUser", "-b", "{broker}", "-u", "cliUser01", "-p", "again"),           # exists: refused
        ("createAcl", "-b", "{broker}", "-s", "User:cliUser01", "-r", "Topic:x", "-a", "Pub", "-d", "Sometimes"),
    ]
    for step in steps:
        out = _both(admin5, auth_pair, *step)
        assert out["rmqd"] == out["java"], step
    assert "cliUser01" in out["rmqd"] or "decision" in out["rmqd"]
    # rmqd admin's twins of the reads print what 5.5's mqadmin prints; its refusals name the broker's answer
    for step in (("getUser", "-b", "{broker}", "-u", "cliUser01"), ("listUser", "-c", "DefaultCluster", "-f", "cli"),
                 ("getAcl", "-b", "{broker}", "-s", "User:cliUser01"),
                 ("listAcl", "-c", "DefaultCluster", "-s", "cliUser")):
        expected = _both(admin5, auth_pair, *step)["rmqd"]
        assert _rmqd_admin(auth_pair.rmqd, admin5.home, *step) == (0, expected), step
    rc, text = _rmqd_admin(auth_pair.rmqd, admin5.home, "createUser", "-b", "{broker}", "-u", "cliUser01", "-p", "x")
    assert rc == 1 and "CODE: 16  DESC: The user is existed" in text


def test_copy_user_and_acl_between_the_brokers(auth_pair, admin5) -> None:
    """copyUser / copyAcl from the Java broker to rmqd: rmqd then lists what Java lists."""
    java, rmqd = auth_pair.java, auth_pair.rmqd
    assert signed_call(java.broker, 3001, {"username": "copied01"}, {"username": "copied01", "password": "cp1"})[0] == 0
    assert signed_call(java.broker, 3006, {"subject": "User:copied01"}, {"subject": "User:copied01", "policies": [
        {"entries": [{"resource": "Topic:cp*", "actions": ["Pub"], "decision": "Allow"}]}]})[0] == 0
    for cmd in (("copyUser", "-f", java.broker, "-t", rmqd.broker, "-u", "copied01"),
                ("copyAcl", "-f", java.broker, "-t", rmqd.broker, "-s", "User:copied01")):
        res = admin5.run(*cmd, "-n", java.namesrv, timeout=60)
        assert "success" in res.stdout, res.stdout[-2000:]
    for code, ext in ((3004, {"username": "copied01"}), (3009, {"subject": "User:copied01"})):
        assert signed_call(rmqd.broker, code, ext)[2] == signed_call(java.broker, code, ext)[2]


def test_migrated_plain_acl_accounts_are_the_same_users_and_acls(auth_pair) -> None:
    """migrateAuthFromV1Enabled: plain_acl.yml's accounts became the same users and ACLs on both (the account
    named like the initial user was left alone)."""
    def state(side) -> tuple:
        users = json.loads(signed_call(side.broker, 3005, {"filter": "v1"})[2])
        acls = json.loads(signed_call(side.broker, 3010, {"subjectFilter": "v1"})[2])
        root = json.loads(signed_call(side.broker, 3004, {"username": "rocketmq"})[2])
        return users, acls, root
    ours, theirs = state(auth_pair.rmqd), state(auth_pair.java)
    assert ours == theirs
    users, acls, root = ours
    assert {u["username"]: u["userType"] for u in users} == {"v1Admin01": "Super", "v1User001": "Normal"}
    assert root["password"] == SUPER[1]
    (acl,) = acls
    assert {p["policyType"] for p in acl["policies"]} == {"Custom", "Default"}


# (code, ext, raw body): bad admin input
BAD_INPUT = [
    (3001, {"username": "bad01"}, None), (3001, {"username": "bad01"}, b"{not json"),
    (3001, {"username": "bad01"}, b"[1,2]"), (3001, {}, b'{"password":"x"}'),
    (3001, {"username": "bad01"}, b'{"username":"bad01"}'),
    (3002, {"username": "bad01"}, None), (3002, {"username": "nobody"}, b'{"password":"x"}'),
    (3003, {}, None), (3004, {}, None),
    (3006, {"subject": "User:uPub"}, None), (3006, {"subject": "User:uPub"}, b"{xx"),
    (3006, {"subject": "User:uPub"}, b'{"policies": 5}'),
    (3006, {"subject": "User:uPub"}, b'{"policies":[{"entries":[{"resource":"Topic:a","decision":"Allow"}]}]}'),
    (3006, {}, b'{"policies":[{"entries":[{"resource":"Topic:a","actions":["Pub"],"decision":"Allow"}]}]}'),
    (3006, {"subject": "User:uPub"}, b'{"policies":[{"entries":[]}]}'),
    (3006, {"subject": "User:uPub"}, b'{"policies":[{"entries":[{"resource":"Nope:a","actions":["Pub"],'
                                     b'"decision":"Allow"}]}]}'),
    (3006, {"subject": "User:uPub"}, b'{"policies":[{"entries":[{"resource":"Topic:a","actions":["Any"],'
                                     b'"decision":"Allow"}]}]}'),
    (3006, {"subject": "User:uPub"}, b'{"policies":[{"entries":[{"resource":"Topic:a","actions":["Pub"],'
                                     b'"sourceIps":["1.2.3.4/99"],"decision":"Allow"}]}]}'),
    (3007, {"subject": "User:uPub"}, None),
    (3008, {}, None), (3008, {"subject": "User:nobody"}, None), (3009, {}, None),
]


def _remark_class(code: int, remark) -> str:
    """A SYSTEM_ERROR names the exception class first; a refusal's remark is compared whole."""
    if code == 1 and remark and (":" in remark.split(" ")[0] or "Exception" in remark.split(" ")[0]):
        return remark.split(":")[0]
    return remark


def test_bad_admin_input_same_code_and_remark_class_nothing_changed(auth_pair) -> None:
    def snapshot(side) -> tuple:
        return tuple(signed_call(side.broker, code, {})[2] for code in (3005, 3010))
    before = {side.name: snapshot(side) for side in auth_pair.sides}
    answers = {}
    for code, ext, body in BAD_INPUT:
        got = {}
        for side in auth_pair.sides:
            c, remark, _ = signed_call(side.broker, code, ext, body)
            got[side.name] = (c, _remark_class(c, remark))
        answers[(code, json.dumps(ext), body)] = got
    diff = {k: v for k, v in answers.items() if v["rmqd"] != v["java"]}
    assert diff == {}
    assert {side.name: snapshot(side) for side in auth_pair.sides} == before
    for side in auth_pair.sides:                                     # both still serve
        assert signed_call(side.broker, 3004, {"username": "uPub"})[0] == 0


def test_forged_and_malformed_signatures_are_refused_alike(auth_pair) -> None:
    """A forged signature, a signature of another body, a non-Base64 one, none at all, an empty AccessKey."""
    from rmqd.acl.signer import sign_request
    from rmqd.remoting.client import BlockingClient
    from rmqd.remoting.command import new_request

    def variants() -> list:
        base = {"username": "uPub"}
        good = sign_request(dict(base), None, "uPub", "uPubPass01")
        forged = dict(good, Signature="A" + good["Signature"][1:])
        other_body = sign_request(dict(base), b"other", "uPub", "uPubPass01")
        return [dict(forged), dict(good, Signature="%%%not-base64%%%"), {**base, "AccessKey": "uPub"},
                {**base, "AccessKey": "", "Signature": "x"}, other_body, dict(good, username="uSub")]
    for ext in variants():
        got = {}
        for side in auth_pair.sides:
            with BlockingClient(side.broker, 10) as c:
                r = c.invoke(new_request(3004, dict(ext)), 15)
            got[side.name] = (r.code, r.remark)
        assert got["rmqd"] == got["java"], ext
        assert got["rmqd"][0] == 16


def test_a_policy_list_over_the_frame_limit_is_dropped_alike(auth_pair) -> None:
    """5.5 takes a policy list of any length that fits a frame; one over the 16 MiB frame limit is not read: both
    brokers drop the connection without an answer, store nothing and go on serving."""
    from rmqd.acl.signer import sign_request
    from rmqd.remoting.client import BlockingClient
    from rmqd.remoting.command import encode_frame_bytes, new_request

    entries = [{"resource": f"Topic:big{i:07d}", "actions": ["Pub"], "decision": "Allow"} for i in range(260000)]
    body = json.dumps({"subject": "User:uNoAcl", "policies": [{"entries": entries}]}).encode()
    assert len(body) > 16 * 1024 * 1024
    frame = encode_frame_bytes(new_request(3006, sign_request({"subject": "User:uNoAcl"}, body, *SUPER), body))
    for side in auth_pair.sides:
        with BlockingClient(side.broker, 15) as c:
            with pytest.raises((OSError, TimeoutError, ConnectionError)):
                c.send_raw(frame)
                c.wait_response(1, 15)
        assert signed_call(side.broker, 3009, {"subject": "User:uNoAcl"})[:2] == (0, "not set any response code")
        assert signed_call(side.broker, 3009, {"subject": "User:uNoAcl"})[2] is None     # nothing stored
