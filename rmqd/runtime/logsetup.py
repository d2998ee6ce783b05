"""Where the servers' logs go: stderr by default, or files in a log directory as the Java broker's
``~/logs/rocketmqlogs`` (``--log-dir DIR`` / ``RMQD_LOG_DIR``).

In a log directory each process writes one file named for what it runs (``rmqd.log`` for ``rmqd serve``,
``namesrv.log``, ``<brokerName>.log`` for ``rmqd broker``, ``console.log``), rolled at 128 MiB with 10 old
files kept (Java's logback ``SizeBasedTriggeringPolicy`` / ``FixedWindowRollingPolicy``); warnings and errors
also go to stderr.  File writes happen on a logging thread (``QueueListener``), never on the event loop.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_BYTES = 128 * 1024 * 1024
BACKUP_COUNT = 10


def setup(level: str, log_dir: Optional[str] = None, file_name: str = "rmqd.log") -> Optional[str]:
    """Configure the root logger; returns the log file's path when logging to a directory."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r} (DEBUG, INFO, WARNING, ERROR)")
    root = logging.getLogger()
    formatter = logging.Formatter(FORMAT)
    if not log_dir:
        if root.handlers:
            return None             # as logging.basicConfig: a host process that set up logging keeps it
        root.setLevel(numeric)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter)
        root.addHandler(handler)
        return None
    import atexit
    import queue
    from logging.handlers import QueueHandler, QueueListener, RotatingFileHandler

    root.setLevel(numeric)
    directory = os.path.abspath(os.path.expanduser(log_dir))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, file_name)
    to_file = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT,
                                                   encoding="utf-8")
    to_file.setFormatter(formatter)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setFormatter(formatter)
    to_stderr.setLevel(logging.WARNING)
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = QueueListener(records, to_file, to_stderr, respect_handler_level=True)
    listener.start()
    atexit.register(listener.stop)              # flushes what is queued at exit
    root.addHandler(QueueHandler(records))
    return path
