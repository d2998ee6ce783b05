"""Fixtures of the controller tests (helpers in ctlkit.py)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
