"""Where a Spark task runs, for errors that depend on it: on a cluster the store directory (and the pipeline's
outputs) must be on a file system every executor sees at the same path as the driver; a task that cannot
see one fails naming the path and the host it ran on, instead of reading nothing or blaming the data."""
from __future__ import annotations

import os
import re
import socket

SHARED_FS_HINT = ("every Spark executor must see it at the same path as the driver (a shared file system "
                  "mounted there; docs/spark-cluster.md)")


def location() -> str:
    """``host <name>`` plus the Spark executor id when the task runs in one (standalone and YARN set it in
    the log URLs they hand the executor)."""
    host = socket.gethostname()
    ip = os.environ.get("SPARK_LOCAL_IP")
    where = f"host {host}" + (f" ({ip})" if ip and ip != host else "")
    m = re.search(r"executorId=([^&]+)", os.environ.get("SPARK_LOG_URL_STDERR", ""))
    return where + (f", executor {m.group(1)}" if m else "")


def not_visible(what: str, path: str) -> str:
    """The message for a task that cannot see ``path`` (``what`` names the option, e.g. ``--store``)."""
    return f"{what} {path} is not visible on {location()}: no such directory there; {SHARED_FS_HINT}"
