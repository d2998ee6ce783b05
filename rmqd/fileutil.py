"""Crash-safe file replacement shared by the store's metadata and the name server's KV config."""
from __future__ import annotations

import os


def atomic_write(path: str, data: str | bytes, keep_backup: bool = True) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content.

    ``path.tmp`` is written and fsynced, then renamed over ``path``, then the directory is
    fsynced.  With ``keep_backup`` the previous content stays as ``path.bak`` (hard link: no copy,
    no extra fsync; at every instant a complete file is under ``path``).
    """
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    if keep_backup and os.path.exists(path):
        bak_tmp = path + ".bak.tmp"
        if os.path.lexists(bak_tmp):
            os.unlink(bak_tmp)
        os.link(path, bak_tmp)
        os.replace(bak_tmp, path + ".bak")
    os.replace(tmp, path)
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
