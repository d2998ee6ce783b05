"""``rmqd admin``: mqadmin's sub-commands in Python, over the wire (no JVM needed)."""
from rmqd.admin.main import main

__all__ = ["main"]
