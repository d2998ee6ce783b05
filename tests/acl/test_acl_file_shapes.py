"""A plain_acl.yml whose lists or accounts have the wrong YAML shape is a bad ACL file (AclError at start; on
a reload the previous configuration stays in force), never an AttributeError out of the loader."""
from __future__ import annotations

import pytest

from rmqd.acl.permission import AclError
from rmqd.acl.plain_acl import PlainAclManager

GOOD = """\
accounts:
  - accessKey: appUser01
    secretKey: appSecret01
    defaultTopicPerm: PUB
"""


def _write(home, text):
    (home / "conf").mkdir(exist_ok=True)
    (home / "conf" / "plain_acl.yml").write_text(text)


@pytest.mark.parametrize("text, message", [
    ("accounts: 5\n", "accounts must be a list"),
    ("accounts:\n  - just-a-name\n", "an account must be a mapping"),
    ("globalWhiteRemoteAddresses: 7\n", "globalWhiteRemoteAddresses must be a list"),
    ("accounts:\n  - accessKey: appUser01\n    secretKey: appSecret01\n    topicPerms: 3\n",
     "topicPerms must be a list"),
])
def test_wrong_shapes_are_refused_at_start(tmp_path, text, message):
    _write(tmp_path, text)
    with pytest.raises(AclError, match=message):
        PlainAclManager(str(tmp_path))


def test_a_reload_of_a_wrong_shape_keeps_the_previous_accounts(tmp_path):
    _write(tmp_path, GOOD)
    manager = PlainAclManager(str(tmp_path))
    _write(tmp_path, "accounts:\n  - just-a-name\n")
    assert manager.reload() is False
    assert list(manager.state.accounts) == ["appUser01"]


def test_an_update_into_a_file_with_a_bad_entry_is_refused_and_writes_nothing(tmp_path):
    _write(tmp_path, GOOD)
    manager = PlainAclManager(str(tmp_path))
    _write(tmp_path, GOOD + "  - not-an-account\n")
    before = (tmp_path / "conf" / "plain_acl.yml").read_text()
    with pytest.raises(AclError, match="an account must be a mapping"):
        manager.update_account({"accessKey": "newUser001", "secretKey": "newSecret001"})
    assert (tmp_path / "conf" / "plain_acl.yml").read_text() == before
