"""migrateAuthFromV1Enabled: plain_acl.yml's accounts become users and ACLs at start, as 5.x's AuthMigrator makes
them; a restart migrates nothing twice; ACL 1.0 goes on working beside it."""
from __future__ import annotations

from rmqd.auth.config import AuthConfig
from rmqd.auth.setup import build_auth

PLAIN = """\
globalWhiteRemoteAddresses: [10.0.0.*]
accounts:
  - {accessKey: v1Admin01, secretKey: v1AdminSecret, admin: true}
  - accessKey: v1User001
    secretKey: v1UserSecret
    whiteRemoteAddress: 192.168.0.*
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [t1=PUB, t2=PUB|SUB, t3=DENY, broken, t4=ANY]
    groupPerms: [g1=SUB, "%RETRY%g2=DENY"]
  - {accessKey: v1NoPerms, secretKey: v1NoPermsSk}
  - {accessKey: v1User001, secretKey: second-definition-ignored}
  - {accessKey: v1NoSecret}
"""


def _auth(tmp_path, **extra):
    (tmp_path / "conf").mkdir(exist_ok=True)
    path = tmp_path / "conf" / "plain_acl.yml"
    path.write_text(PLAIN)
    auth = build_auth({"migrateAuthFromV1Enabled": "true", **extra}, "C1", str(tmp_path / "store"))
    auth.load(str(path))
    return auth


def test_accounts_become_users_and_acls(tmp_path) -> None:
    auth = _auth(tmp_path)
    users = auth.store.state.users
    assert {n: (u.user_type.value, u.password) for n, u in users.items()} == {
        "v1Admin01": ("Super", "v1AdminSecret"), "v1User001": ("Normal", "v1UserSecret"),
        "v1NoPerms": ("Normal", "v1NoPermsSk")}                 # no secret: refused, logged, the others go on
    acl = auth.store.state.acls["User:v1User001"].to_info()
    assert acl == {"policies": [
        {"entries": [
            {"actions": ["Pub"], "decision": "Allow", "resource": "Topic:t1"},
            {"actions": ["Pub", "Sub"], "decision": "Allow", "resource": "Topic:t2"},
            {"actions": ["All"], "decision": "Deny", "resource": "Topic:t3"},
            {"actions": ["All"], "decision": "Allow", "resource": "Topic:t4"},
            {"actions": ["Sub"], "decision": "Allow", "resource": "Group:g1"},
            {"actions": ["All"], "decision": "Deny", "resource": "Group:g2"}], "policyType": "Custom"},
        {"entries": [
            {"actions": ["All"], "decision": "Deny", "resource": "Topic:*"},
            {"actions": ["Sub"], "decision": "Allow", "resource": "Group:*"}], "policyType": "Default"}],
        "subject": "User:v1User001"}
    assert "User:v1NoPerms" not in auth.store.state.acls and "User:v1Admin01" not in auth.store.state.acls


def test_a_restart_migrates_nothing_twice_and_keeps_changes(tmp_path) -> None:
    auth = _auth(tmp_path)
    auth.manager.delete_user("v1NoPerms")
    from rmqd.auth.model import User
    auth.manager.update_user(User("v1User001", "changedPass"))
    version = auth.store.state.version
    again = _auth(tmp_path)
    assert again.store.state.users["v1User001"].password == "changedPass"
    assert "v1NoPerms" in again.store.state.users                  # it was gone, so it is migrated again (5.x too)
    assert again.store.state.version != version


def test_an_existing_user_is_left_alone(tmp_path) -> None:
    auth = _auth(tmp_path, initAuthenticationUser='{"username":"v1User001","password":"fromInit"}')
    assert auth.store.state.users["v1User001"].password == "fromInit"
    assert auth.store.state.users["v1User001"].user_type.value == "Super"
    assert "User:v1User001" not in auth.store.state.acls


def test_settings_default_off() -> None:
    cfg = AuthConfig.from_properties({})
    assert not cfg.enabled and not cfg.migrateAuthFromV1Enabled
