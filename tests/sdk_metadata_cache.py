"""Test-speed aid: the SDK's per-tool metadata, made once per tool signature for each pytest process.

Nearly every in-process test builds a desk, and each build registers about 21 tools. For each, the SDK's
``func_metadata`` makes a pydantic model of the arguments and the JSON schemas of arguments and result. That is the
same work for the same signature every time: in a profile of 682 in-process tests it was the largest share of their
CPU. Here the first build of a signature makes it and later builds get a deep copy.

The key is the function's code object with its signature as text (annotations, defaults and return type), so a
tool whose arguments depend on settings gets its own entry; a deep copy keeps one build's changes out of the next.
Tests marked ``timing`` bypass the cache, so a bound on how fast a desk starts still measures the SDK's real work;
desks started as processes never load this module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.mcpserver.tools import base
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

_Key = tuple[Any, ...]


class MetadataCache:
    def __init__(self, make: Callable[..., FuncMetadata]) -> None:
        self.make = make
        self.enabled = True
        self.made: dict[_Key, FuncMetadata] = {}
        self.hits = 0

    def __call__(
        self, func: Callable[..., Any], skip_names: Sequence[str] = (), structured_output: bool | None = None
    ) -> FuncMetadata:
        if not self.enabled:
            return self.make(func, skip_names=skip_names, structured_output=structured_output)
        key = (func.__code__, str(inspect.signature(func)), tuple(skip_names), structured_output)
        made = self.made.get(key)
        if made is None:
            made = self.made[key] = self.make(func, skip_names=skip_names, structured_output=structured_output)
        else:
            self.hits += 1
        return made.model_copy(deep=True)


def install() -> MetadataCache:
    """Put the cache where ``Tool.from_function`` looks the SDK's function up (once per process, whoever asks);
    fails loudly if it moved."""
    namespace = vars(base)
    make = namespace.get("func_metadata")
    if isinstance(make, MetadataCache):
        return make
    if not callable(make):
        raise RuntimeError("mcp.server.mcpserver.tools.base.func_metadata is gone: update tests/sdk_metadata_cache.py")
    cache = MetadataCache(make)
    namespace["func_metadata"] = cache
    return cache


SDK_METADATA = install()
