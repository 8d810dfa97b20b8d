"""Typed readers for settings that come from the environment.

A bad value fails loudly at start-up instead of turning into a silent default.
"""

import os
from ipaddress import IPv4Network, IPv6Network, ip_network

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


IPNetwork = IPv4Network | IPv6Network


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def env_optional(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None


def env_share(name: str, default: float, *, none: bool = False) -> float:
    """A share of the time, more than 0 and at most 1: work that rests for its time x
    (1 - share) / share would divide by 0 at 0, and rest a negative time past 1. With
    `none`, 0 is allowed too, where it means no share at all (the pacer's floor alone)."""
    value = env_float(name, default)
    if value < 0 or value > 1 or (value == 0 and not none):
        bound = "at least 0" if none else "more than 0"
        raise ImproperlyConfigured(f"{name}={value!r} is not a share: {bound}, at most 1")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str, default: list[str]) -> list[IPNetwork]:
    """A comma-separated list of networks ("127.0.0.0/8,::1/128"; an address is a network
    of one), refused at start-up when one is not a network."""
    try:
        return [ip_network(item, strict=False) for item in env_list(name, default)]
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
