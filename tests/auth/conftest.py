"""The replication tests' fixtures (a master and a slave in this process) for the auth replication tests."""
from tests.replication.conftest import group_factory  # noqa: F401
