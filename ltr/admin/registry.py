"""Names looked up in one explicit, ordered table: the one registry style of the project.

A :class:`Registry` is a read-only mapping from names to entries, in the order the table lists them. An
entry written as a string ``"package.module:attr"`` (or ``"package.module"`` for the module itself) is a
reference imported on its first lookup, so a table can name modules that pull in torchvision or OpenCV
without importing them; any other entry is the value itself. ``name in registry`` and ``registry.names``
never import anything. An unknown name raises :class:`UnknownName`, whose message names the kind of
thing looked up and lists the choices.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    """A name that is not in a :class:`Registry`; both a KeyError (a failed lookup) and a ValueError (a bad
    argument), so callers that catch either keep working. ``str()`` is the message itself (KeyError would
    quote it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def resolve(reference: str) -> Any:
    """``"package.module:attr"`` -> that attribute; ``"package.module"`` -> the module."""
    module_name, _, attr = reference.partition(":")
    module = importlib.import_module(module_name)
    if not attr:
        return module
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ImportError(f"{reference!r}: module {module_name} has no attribute {attr!r}") from None


class Registry(Mapping[str, T], Generic[T]):
    """``kind``: what the names name, for error messages (``"dataset"`` -> ``unknown dataset 'x'; choose
    one of [...]``). ``entries``: name -> value or ``"module[:attr]"`` reference (see the module docstring);
    their order is the order of :attr:`names`."""

    def __init__(self, kind: str, entries: Mapping[str, T | str]) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = dict(entries)
        self._resolved: dict[str, T] = {}

    @property
    def names(self) -> tuple[str, ...]:
        """The names, in table order."""
        return tuple(self._entries)

    def __getitem__(self, name: str) -> T:
        if name not in self._entries:
            raise UnknownName(f"unknown {self.kind} {name!r}; choose one of {list(self._entries)}")
        if name not in self._resolved:
            entry = self._entries[name]
            self._resolved[name] = resolve(entry) if isinstance(entry, str) else entry
        return self._resolved[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"
