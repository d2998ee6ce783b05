"""Test support shipped with rmqd: an embedded server and a pytest plugin."""
from rmqd.testing.embedded import AsyncEmbeddedServer, EmbeddedServer

__all__ = ["EmbeddedServer", "AsyncEmbeddedServer"]
