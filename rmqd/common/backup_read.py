"""Reading a file that :func:`rmqd.common.fileutil.atomic_write` keeps a backup of (``path.bak``, the previous
content): the file, or its backup when the file is missing or damaged."""
from __future__ import annotations

import logging
import os
from typing import Callable, Optional, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def read_with_backup(path: str, parse: Callable[[bytes], T], errors: tuple[type[Exception], ...],
                     what: str) -> Optional[tuple[str, T]]:
    """(the path read, ``parse`` of its content): ``path``, else ``path.bak``; None when neither is there and
    readable. Reading or parsing that raises one of ``errors`` is logged (``what`` names the file's owner) and the
    backup is tried; a backup used is logged as a warning."""
    for p in (path, path + ".bak"):
        if not os.path.exists(p):
            continue
        try:
            with open(p, "rb") as f:
                value = parse(f.read())
        except errors as exc:
            log.error("%s: cannot read %s: %r", what, p, exc)
            continue
        if p != path:
            log.warning("%s: %s could not be read; loaded its backup %s", what, path, p)
        return p, value
    return None
