"""White-list address patterns of plain_acl.yml (Java ``RemoteAddressStrategyFactory``).

A blank pattern matches nothing; ``*`` (or ``*.*.*.*``, ``*:*:*:*:*:*:*:*``) matches everything;
``192.168.0.{1,2}`` and ``a,b,c`` are lists; ``192.168.*`` / ``192.168.1-10.*`` are ranges (the first
``*`` or ``a-b`` part decides, the parts after it are not compared); anything else is one address.
IPv6 addresses are compared in their expanded form (eight 4-digit groups, upper case).
"""
from __future__ import annotations

import ipaddress
from typing import Callable, Optional

from rmqd.acl.permission import AclError

Matcher = Callable[[str], bool]


def _parses_as(address_type: Callable[[str], object], text: str) -> bool:
    try:
        address_type(text)
        return True
    except ValueError:
        return False


def is_ipv4(text: str) -> bool:
    return _parses_as(ipaddress.IPv4Address, text)


def is_ipv6(text: str) -> bool:
    return _parses_as(ipaddress.IPv6Address, text)


def expand_ipv6(address: str, groups: int = 8) -> str:
    """``::1`` -> ``0000:0000:0000:0000:0000:0000:0000:0001`` (upper case, zero-padded groups)."""
    address = address.upper()
    pad = groups - address.count(":")
    if pad > 0:
        address = address.replace("::", ":" * (pad + 1), 1)
    return ":".join(part.rjust(4, "0") for part in address.split(":"))


def _never(_addr: str) -> bool:
    return False


def _always(_addr: str) -> bool:
    return True


def _checked(address: str) -> str:
    if is_ipv4(address):
        return address
    if is_ipv6(address):
        return expand_ipv6(address)
    raise AclError(f"Netaddress examine Exception netaddress is {address}")


def _one_of(addresses: list[str]) -> Matcher:
    allowed = {_checked(a) for a in addresses}

    def match(addr: str) -> bool:
        return (expand_ipv6(addr) if is_ipv6(addr) else addr) in allowed
    return match


def _braces(pattern: str) -> Matcher:
    sep = ":" if ":" in pattern else "."
    parts = [p for p in pattern.split(sep) if p]
    last = parts[-1]
    if not last.startswith("{") or (sep == "." and len(parts) < 4):
        raise AclError(f"MultipleRemoteAddressStrategy has got a wrong format address {pattern}")
    prefix = pattern[:pattern.index("{")]
    return _one_of([prefix + item for item in last[1:-1].split(",") if item])


def _range_bounds(part: str, base: int, top: int, pattern: str) -> Optional[tuple[int, int]]:
    part = part.strip()
    if part == "*":
        return 0, top
    if "-" in part:
        if part.startswith("-"):
            raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {part} ")
        lo, hi = (int(v, base) for v in part.split("-") if v)
        if not (0 <= lo <= hi <= top):
            raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {lo} , "
                           f"end is {hi}")
        return lo, hi
    return None


def _ipv4_range(pattern: str) -> Matcher:
    parts = [p for p in pattern.split(".") if p]
    for index in (1, 2, 3):
        if index >= len(parts):
            break
        bounds = _range_bounds(parts[index], 10, 255, pattern)
        if bounds is not None and bounds[1] > 0:
            if len(parts) != 4 or not all(p.strip().isdigit() and 0 <= int(p) <= 255 for p in parts[:index]):
                raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
            head = ".".join(p.strip() for p in parts[:index]) + "."
            lo, hi = bounds

            def match(addr: str, head: str = head, index: int = index) -> bool:
                if not is_ipv4(addr) or not addr.startswith(head):
                    return False
                value = addr.split(".")[index]
                return lo <= int(value) <= hi
            return match
    raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")


def _ipv6_range(pattern: str) -> Matcher:
    star, minus = pattern.find("*"), pattern.find("-")
    if star > -1 and star != len(pattern) - 1:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    parts = [p for p in pattern.split(":") if p]
    last_colon = pattern.rfind(":")
    if star > -1 and minus > -1:
        prefix, groups = pattern[:pattern[:last_colon].rfind(":")], 6
    else:
        prefix, groups = pattern[:last_colon], 7
    head = expand_ipv6(prefix, groups)
    index = len(head.split(":"))
    bounds = _range_bounds(parts[-1] if star == -1 or minus == -1 else parts[-2], 16, 0xFFFF, pattern)
    if bounds is None:
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    lo, hi = bounds

    def match(addr: str) -> bool:
        if not is_ipv6(addr):
            return False
        full = expand_ipv6(addr)
        return full.startswith(head) and lo <= int(full.split(":")[index], 16) <= hi
    return match


def address_matcher(pattern: Optional[str]) -> Matcher:
    """The matcher of one white-list pattern; AclError for a malformed one."""
    if pattern is None or not str(pattern).strip():
        return _never
    pattern = str(pattern)
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _always
    if pattern.endswith("}"):
        return _braces(pattern)
    if "," in pattern:
        return _one_of([p for p in pattern.split(",") if p])
    if "*" in pattern or "-" in pattern:
        return _ipv6_range(pattern) if ":" in pattern else _ipv4_range(pattern)
    checked = _checked(pattern)
    return lambda addr: (expand_ipv6(addr) if ":" in addr else addr).upper() == checked.upper()
