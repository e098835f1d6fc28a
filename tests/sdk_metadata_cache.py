"""Test-speed aid: the SDK's per-function metadata, made once per signature for each pytest process.

Nearly every in-process test builds a desk, and each build registers about 21 tools, 4 resource templates and a
prompt. For each, the SDK's ``func_metadata`` makes a pydantic model of the arguments and the JSON schemas of
arguments and result, and the registration asks the argument model for its JSON schema again. That is the same
work for the same signature every time: in a profile of 682 in-process tests it was the largest share of their
CPU. Here the first build of a signature makes it; later builds get the same models with their own copy of every
schema (a plain JSON copy: the desk rewrites the schemas it publishes, and one build's must not reach the next).

The key is the function's code object with its signature as text (annotations, defaults and return type), so a
function whose arguments depend on settings gets its own entry. Tests marked ``timing`` bypass the cache, so a
bound on how fast a desk starts still measures the SDK's real work; desks started as processes never load this
module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.mcpserver.prompts import base as prompts
from mcp.server.mcpserver.resources import templates
from mcp.server.mcpserver.tools import base as tools
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

_Key = tuple[Any, ...]
# Every SDK module that looks ``func_metadata`` up in its own namespace when it registers a function.
_USERS = (tools, templates, prompts)


def json_copy(value: Any) -> Any:
    """A copy of a JSON value's dicts and lists (its strings, numbers and None are immutable): several times
    faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    return value


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
            _remember_json_schemas(made.arg_model)
        else:
            self.hits += 1
        return made.model_copy(update={"output_schema": json_copy(made.output_schema)})


def _remember_json_schemas(model: Any) -> None:
    """Make ``model.model_json_schema`` (asked of every argument model at registration) once per set of
    arguments, and hand each caller its own copy."""
    made: dict[str, Any] = {}
    make = model.model_json_schema

    def model_json_schema(*args: Any, **kwargs: Any) -> Any:
        key = repr((args, sorted(kwargs.items())))
        if key not in made:
            made[key] = make(*args, **kwargs)
        return json_copy(made[key])

    model.model_json_schema = staticmethod(model_json_schema)


def install() -> MetadataCache:
    """Put the cache where the SDK's tools, resource templates and prompts look the function up (once per
    process, whoever asks); fails loudly if it moved."""
    found = [vars(module).get("func_metadata") for module in _USERS]
    cache = next((make for make in found if isinstance(make, MetadataCache)), None)
    if cache is None:
        make = found[0]
        if not callable(make):
            raise RuntimeError("mcp's tools module has no func_metadata: update tests/sdk_metadata_cache.py")
        cache = MetadataCache(make)
    for module, make in zip(_USERS, found, strict=True):
        if make is not cache and make is not cache.make:
            raise RuntimeError(f"{module.__name__}.func_metadata is not the SDK's: update tests/sdk_metadata_cache.py")
        vars(module)["func_metadata"] = cache
    return cache


SDK_METADATA = install()
