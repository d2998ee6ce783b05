"""The source-IP rules of a policy entry (5.x ``IPAddressUtils``).

A policy entry's ``sourceIps`` holds addresses (``10.0.0.7``) and CIDR ranges (``10.0.0.0/24``, ``fd00::/8``).
An address matches only the same text (5.x compares the strings); a range matches every address in it.
Validation accepts what 5.x accepts for IP literals: dotted IPv4 without leading zeros, IPv6, and either with a
``/prefix`` in range. (5.x also resolves a host name before a ``/``; rmqd takes IP literals only.)
"""
from __future__ import annotations

import functools
import ipaddress
from typing import Optional

from rmqd.acl.address import is_ipv6


def _ipv4(text: str) -> bool:
    parts = text.split(".")
    if len(parts) != 4:
        return False
    for p in parts:
        if not p.isdigit() or not p.isascii() or len(p) > 3 or (len(p) > 1 and p[0] == "0") or int(p) > 255:
            return False
    return True


def is_valid_ip(text: str) -> bool:
    """commons-validator's ``InetAddressValidator.isValid``: an IPv4 or IPv6 literal."""
    return _ipv4(text) or is_ipv6(text)


def _java_split_slash(text: str) -> list[str]:
    """``String.split("/")``: trailing empty parts are dropped."""
    parts = text.split("/")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _prefix(text: str) -> Optional[int]:
    """``Integer.parseInt``: an optional sign and ASCII digits."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    return int(text)


def is_valid_cidr(text: str) -> bool:
    parts = _java_split_slash(text)
    if len(parts) != 2:
        return False
    prefix = _prefix(parts[1])
    if prefix is None:
        return False
    if _ipv4(parts[0]):
        return 0 <= prefix <= 32
    if is_ipv6(parts[0]):
        return 0 <= prefix <= 128
    return False


def is_valid_ip_or_cidr(text: str) -> bool:
    return is_valid_ip(text) or is_valid_cidr(text)


@functools.lru_cache(maxsize=4096)
def _network(cidr: str) -> Optional[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    addr, _, prefix = cidr.partition("/")
    try:
        return ipaddress.ip_network(f"{addr}/{int(prefix)}", strict=False)
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _address(ip: str) -> Optional[ipaddress._BaseAddress]:
    try:
        return ipaddress.ip_address(ip.strip("[]"))
    except ValueError:
        return None


def ip_in_range(ip: str, rule: str) -> bool:
    """5.x ``IPAddressUtils.isIPInRange(ip, rule)``: equal text without a ``/``, else inside the range."""
    parts = _java_split_slash(rule)
    if len(parts) == 1:
        return ip == rule
    if len(parts) != 2:
        return False
    net, addr = _network(rule), _address(ip)
    if net is None or addr is None or net.version != addr.version:
        return False
    return addr in net
