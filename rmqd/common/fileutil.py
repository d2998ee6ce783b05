"""Crash-safe file writing shared by the store, its compaction and tier layers, the pipeline and the name
server's KV config."""
from __future__ import annotations

import os
import shutil


def fsync_path(path: str) -> None:
    """fsync a file or a directory (its entries: a rename or a new file in it) by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    fsync_path(d)


def disk_partition_space_used_percent(path: str) -> float:
    """Java's ``UtilAll.getDiskPartitionSpaceUsedPercent``: the used share of the disk holding ``path``
    as a fraction rounded *up* to a whole percent (0.3 for 29.2 %), or -1 when it cannot be read.

    used = total - free (free counts the blocks reserved for root), and the share is of used + usable
    (usable = what an unprivileged writer can still use), so reserved blocks count neither as used nor
    as available: the figure ``df`` prints."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    percent = used * 100 // entire + (1 if used * 100 % entire else 0)
    return percent / 100.0


def disk_capacity(path: str) -> tuple[int, int] | None:
    """``(total, usable)`` bytes of the disk holding ``path`` as the Java broker reports them in
    ``commitLogDirCapacity`` ("Total : ..., Free : ..."): 4.9.8's ``AdminBrokerProcessor.prepareRuntimeInfo``
    prints ``File.getTotalSpace()`` (f_blocks) and ``File.getUsableSpace()`` (f_bavail, what an unprivileged
    writer can still use; not ``getFreeSpace()``, f_bfree, which counts the reserved blocks). None when the
    path cannot be read (Java then leaves the key out)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def copy_sparse(src: str, dst: str) -> str:
    """Copy ``src`` to ``dst`` (data, mode and times) keeping its holes.

    ``shutil.copyfile`` fills holes with zeros, so a copied store (a 420 MB index file of which a few
    MB hold data, preallocated commit log segments) would cost its full size on disk.  Only the data
    extents (``SEEK_DATA``/``SEEK_HOLE``) are copied, in the kernel (``os.copy_file_range``); ``dst``
    gets ``src``'s size.  Returns ``dst``, so it serves as ``shutil.copytree``'s ``copy_function``."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fin.fileno(), pos, os.SEEK_DATA)
            except OSError:                          # ENXIO: only a hole is left
                break
            end = os.lseek(fin.fileno(), start, os.SEEK_HOLE)
            while start < end:
                n = os.copy_file_range(fin.fileno(), fout.fileno(), end - start, start, start)
                if n <= 0:
                    raise OSError(f"copy of {src}: copy_file_range returned {n} at {start}")
                start += n
            pos = end
        os.ftruncate(fout.fileno(), size)
    shutil.copystat(src, dst)
    return dst


def makedirs_below(root: str, path: str) -> None:
    """Create ``path`` (a directory at or below ``root``) without ever re-creating ``root``: one ``mkdir``
    per component, so a ``root`` that was removed (a dropped job's staging directory, with an orphan task
    still running) fails with ``FileNotFoundError`` instead of coming back."""
    rel = os.path.relpath(path, root)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise ValueError(f"{path} is not below {root}")
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{root} is gone")
    cur = root
    for part in [p for p in rel.split(os.sep) if p and p != os.curdir]:
        cur = os.path.join(cur, part)
        try:
            os.mkdir(cur)
        except FileExistsError:
            pass


def drop_tree(path: str, trash_suffix: str = "") -> bool:
    """Remove a directory that orphan writers may still be adding to (tasks of a failed Spark job finish
    the function they are in). It is first renamed to a hidden sibling (atomic), so every later
    ``mkdir``/``open``/``rename`` under ``path`` fails and nothing new appears in what is being deleted;
    then deleted. A crash in between leaves ``.<name>.dropped-<id><trash_suffix>`` beside it (a suffix
    that makes readers skip it and the next cleanup remove it). False when ``path`` was not there."""
    parent, name = os.path.split(os.path.normpath(path))
    trash = os.path.join(parent, f".{name.lstrip('.')}.dropped-{os.urandom(4).hex()}{trash_suffix}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return False
    shutil.rmtree(trash)
    return True
