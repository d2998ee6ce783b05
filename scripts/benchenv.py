"""The one-line description of the machine every benchmark prints with its numbers."""
from __future__ import annotations

import os
import platform
import sys


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_line() -> str:
    """E.g. 'Python 3.11.7 (CPython), Linux x86_64, AMD EPYC x2'."""
    return (f"Python {sys.version.split()[0]} ({platform.python_implementation()}), "
            f"{platform.system()} {platform.machine()}, {cpu_model()} x{os.cpu_count()}")
