"""POP's refusals: the Java broker's response codes that 4.9's table lacks, and the error that carries them."""
from __future__ import annotations

INVALID_PARAMETER = 29          # 5.x ResponseCode
POLLING_FULL = 209              # 5.x ResponseCode (4.9 used 209 for an ACL admin failure)
POLLING_TIMEOUT = 210


class PopError(Exception):
    """A request the broker refuses: ``code`` and ``remark`` as the Java broker answers."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark
