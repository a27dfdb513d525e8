"""Dataclass configs: ``key=value`` overrides with type conversion, unknown keys rejected, JSON round trip."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A bad config key or value; the message names the key."""


def _convert(text: str, annotation: Any, key: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        non_none = [a for a in args if a is not type(None)]
        if text.lower() in ("none", "null") and len(non_none) < len(args):
            return None
        errors = []
        for a in non_none:
            try:
                return _convert(text, a, key)
            except (ConfigError, ValueError) as err:
                errors.append(str(err))
        raise ConfigError(f"{key}={text!r}: cannot convert ({'; '.join(errors)})")
    if origin is typing.Literal:
        for a in args:
            if str(a) == text:
                return a
        raise ConfigError(f"{key}={text!r}: must be one of {list(args)}")
    if annotation is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key}={text!r}: expected true/false")
    if annotation in (int, float, str):
        try:
            return annotation(text)
        except ValueError as err:
            raise ConfigError(f"{key}={text!r}: expected {annotation.__name__}") from err
    if origin in (tuple, list) or annotation in (tuple, list):
        parts = [p for p in text.replace("(", "").replace(")", "").split(",") if p.strip()]
        inner = args[0] if args else float
        if inner is Ellipsis:
            inner = float
        return tuple(_convert(p.strip(), inner, key) for p in parts)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{key}={text!r}: cannot parse value for type {annotation}") from err


def apply_overrides(config: T, overrides: Iterable[str]) -> T:
    """A copy of dataclass ``config`` with ``key=value`` strings applied; nested keys use dots (``a.b=1``)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        key, text = item.split("=", 1)
        config = _set(config, key.strip().split("."), text.strip(), key.strip())
    return config


def _set(config: Any, path: list[str], text: str, full_key: str) -> Any:
    if not dataclasses.is_dataclass(config):
        raise ConfigError(f"{full_key}: {type(config).__name__} has no sub-keys")
    hints = typing.get_type_hints(type(config))
    fields = {f.name for f in dataclasses.fields(config)}
    head = path[0]
    if head not in fields:
        raise ConfigError(f"unknown config key {full_key!r}; known keys: {sorted(fields)}")
    if len(path) > 1:
        return dataclasses.replace(config, **{head: _set(getattr(config, head), path[1:], text, full_key)})
    return dataclasses.replace(config, **{head: _convert(text, hints[head], full_key)})


def to_dict(config: Any) -> dict[str, Any]:
    """Plain JSON-able data of a dataclass config (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a dataclass config from :func:`to_dict` output; unknown keys are an error."""
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - fields
    if unknown:
        raise ConfigError(f"unknown config key(s) for {cls.__name__}: {sorted(unknown)}")
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            value = from_dict(hint, value)
        elif isinstance(value, list):
            value = _to_tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def _to_tuple(value: Any) -> Any:
    return tuple(_to_tuple(v) for v in value) if isinstance(value, list) else value


def save_json(data: Any, path: str | Path) -> None:
    """Write JSON atomically (temp file in the same directory, then rename)."""
    from ltr.admin.io import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
