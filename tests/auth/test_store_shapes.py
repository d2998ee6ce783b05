"""An auth.json whose entries have the wrong JSON shape is a damaged file (the backup is read instead), and a
stored resource keeps its type: an ACL round-trips through the file unchanged."""
from __future__ import annotations

import orjson
import pytest

from rmqd.auth.model import Acl, Action, Decision, Policy, PolicyEntry, PolicyType, Resource, User
from rmqd.auth.store import AuthStore, copy_acl


def _acl() -> Acl:
    entry = PolicyEntry(Resource.parse("Topic:orders*"), [Action.PUB, Action.SUB], ["10.0.0.0/8"], Decision.ALLOW)
    return Acl(User("a"), [Policy(PolicyType.CUSTOM, [entry])])


def test_an_acl_round_trips_through_the_file(tmp_path) -> None:
    s = AuthStore(str(tmp_path))
    s.load()
    s.commit(put_users=[User("a", "pw")], put_acls=[_acl()])
    again = AuthStore(str(tmp_path))
    again.load()
    assert again.state.acls["User:a"].to_info() == _acl().to_info()
    copied = copy_acl(again.state.acls["User:a"])
    assert copied.to_info() == _acl().to_info()
    assert copied.policies[0].entries[0].source_ips is not again.state.acls["User:a"].policies[0].entries[0].source_ips


@pytest.mark.parametrize("damage", [
    lambda d: d.update(users={"a": "not a list"}),
    lambda d: d.update(users=["not an object"]),
    lambda d: d.update(users=[{"password": "no name"}]),
    lambda d: d["acls"][0]["policies"][0]["entries"][0].update(resource=["Nonsense", "x", "LITERAL"]),
    lambda d: d["acls"][0]["policies"][0]["entries"][0].update(resource="Topic:x"),
    lambda d: d["acls"][0].update(policies=[5]),
])
def test_a_wrongly_shaped_file_falls_back_to_its_backup(tmp_path, damage) -> None:
    s = AuthStore(str(tmp_path))
    s.load()
    s.commit(put_users=[User("a", "pw")], put_acls=[_acl()])
    s.commit(put_users=[User("b", "pw")])
    with open(s.path, "rb") as f:
        data = orjson.loads(f.read())
    damage(data)
    with open(s.path, "wb") as f:
        f.write(orjson.dumps(data))
    again = AuthStore(str(tmp_path))
    again.load()
    assert set(again.state.users) == {"a"}        # the backup: the content before the last change
    assert again.state.acls["User:a"].to_info() == _acl().to_info()
