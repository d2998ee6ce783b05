"""The console's access control page (/access): users and policies seen and edited through the admin codes, signed
as the broker's inner user; passwords never shown; a broker's refusal shown as such; read-only refuses edits."""
from __future__ import annotations

from tests.console.kit import ConsoleKit

AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "initAuthenticationUser": '{"username":"rocketmq","password":"rootSecret1"}',
        "innerClientAuthenticationCredentials": '{"accessKey":"consoleInner","secretKey":"innerSecret1"}'}


def test_users_and_policies_are_seen_and_edited(tmp_path):
    kit = ConsoleKit(str(tmp_path / "store"), AUTH).start()
    try:
        web = kit.http()
        raw = web.get("/api/auth/users")[2].decode()
        assert "rootSecret1" not in raw and "innerSecret1" not in raw
        users = {u["username"]: u for u in web.get_json("/api/auth/users")["users"]}
        assert users["rocketmq"]["userType"] == "Super" and users["rocketmq"]["hasPassword"] is True
        assert web.post_json("/api/auth/users", {"create": True, "username": "webUser1", "password": "webPass1"})[
            "brokers"] == [kit.broker_addr]
        code, _, body = web.post("/api/auth/users", {"create": True, "username": "webUser1", "password": "x"})
        assert code == 502 and b"The user is existed" in body                        # the broker's refusal
        web.post_json("/api/auth/users", {"username": "webUser1", "userStatus": "disable"})
        users = {u["username"]: u for u in web.get_json("/api/auth/users")["users"]}
        assert users["webUser1"]["userStatus"] == "disable"
        web.post_json("/api/auth/acls", {"subject": "User:webUser1", "resources": "Topic:web-*,Group:web-g",
                                         "actions": ["Pub", "Sub"], "sourceIps": "10.0.0.0/8", "decision": "Allow"})
        entries = web.get_json("/api/auth/acls?subject=webUser1")["entries"]
        assert [(e["resource"], e["actions"], e["sourceIps"], e["decision"]) for e in entries] == [
            ("Topic:web-*", ["Pub", "Sub"], ["10.0.0.0/8"], "Allow"),
            ("Group:web-g", ["Pub", "Sub"], ["10.0.0.0/8"], "Allow")]
        web.post_json("/api/auth/acls/delete", {"subject": "User:webUser1", "resource": "Group:web-g"})
        assert [e["resource"] for e in web.get_json("/api/auth/acls?subject=webUser1")["entries"]] == ["Topic:web-*"]
        state = kit.server.broker.auth.store.state
        assert state.acls["User:webUser1"].policies[0].entries[0].resource.key == "Topic:web-*"
        code, _, _ = kit.http("ro").post("/api/auth/users", {"create": True, "username": "x", "password": "y"})
        assert code == 403
        web.post_json("/api/auth/users/webUser1/delete")
        assert "webUser1" not in kit.server.broker.auth.store.state.users
        assert "User:webUser1" not in kit.server.broker.auth.store.state.acls
        page = web.get("/access")
        assert page[0] == 200 and b"rmqd-csrf-cookie" in page[2]
        assert b"pageAccess" in web.get("/static/app.js")[2]
    finally:
        kit.stop()
