"""What the benchmarks sample from /proc: the machine's CPU tick counters, a process's CPU seconds, resident memory
and open file descriptors (Linux only)."""
from __future__ import annotations

import os


def cpu_ticks() -> list[int]:
    """The machine's CPU tick counters (the ``cpu`` line of /proc/stat: user, nice, system, idle, iowait, irq,
    softirq, steal, ...)."""
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:]]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of /proc/<pid>/status in MB (0 when absent). VmRSS counts the touched pages of mapped store
    files (page cache, RssFile) too; RssAnon is the process's own memory."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
