"""Runbook actions (``[services.<name>.actions.<action>]``): what each does, its typed parameters, its argv filled.

A parameter only ever fills a whole argv item, and is checked against its type before anyone is asked, so no value
a model sends can become a flag, a second argument or a shell word. No MCP imports.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from incident_desk.core.names import ALNUM, NameShape
from incident_desk.core.neighbours.runner import check_pass_env

if TYPE_CHECKING:
    from incident_desk.core.linear import LinearPattern

ACTION_NAME = NameShape(ALNUM, ALNUM + "_-", 64)
PARAMETER_NAME = NameShape(ALNUM, ALNUM + "_", 64)
MAX_VALUE_CHARS = 200  # a parameter's value: a release tag, a cache name, a count
BUILT_IN = "restart"  # every service's own action, through restart_service


class Parameter(BaseModel):
    """One typed parameter: exactly one of ``pattern``, ``choices``, or an integer ``min``/``max``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    description: str = ""
    pattern: str | None = None
    choices: list[str] | None = None
    min: int | None = None
    max: int | None = None

    @model_validator(mode="after")
    def _one_type(self) -> Self:
        kinds = [self.pattern is not None, self.choices is not None, self.min is not None or self.max is not None]
        if sum(kinds) != 1:
            raise ValueError("a parameter has exactly one of pattern, choices, or min/max")
        if (self.min is None) != (self.max is None):
            raise ValueError("an integer parameter needs both min and max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        if self.choices is not None and not self.choices:
            raise ValueError("choices is empty")
        if self.pattern is not None:
            try:
                _whole(self.pattern)
            except Exception as exc:
                raise ValueError(f"pattern {self.pattern!r} is not a valid regular expression: {exc}") from exc
        return self

    def refusal(self, name: str, value: object) -> str | None:
        """Why ``value`` is refused for this parameter (never echoing it), or None."""
        if self.pattern is not None:
            ok = isinstance(value, str) and len(value) <= MAX_VALUE_CHARS
            ok = ok and _whole(self.pattern).match(str(value).encode()) is not None
            return None if ok else f"parameter {name} must match {self.pattern}"
        if self.choices is not None:
            return None if value in self.choices else f"parameter {name} must be one of {', '.join(self.choices)}"
        ok = isinstance(value, int) and not isinstance(value, bool) and self.min <= value <= self.max  # type: ignore[operator]
        return None if ok else f"parameter {name} must be between {self.min} and {self.max}"

    def described(self) -> str:
        """The parameter's type in words, for listings."""
        if self.pattern is not None:
            return f"matching {self.pattern}"
        if self.choices is not None:
            return f"one of {', '.join(self.choices)}"
        return f"an integer between {self.min} and {self.max}"


def _whole(pattern: str) -> LinearPattern:
    """``pattern`` anchored at both ends: a value matches whole or not at all. RE2 is imported here, when a
    parameter is checked, so a desk serving stdio does not load it before its first answer."""
    from incident_desk.core.linear import compile_linear

    return compile_linear(f"\\A(?:{pattern})\\z")


def _placeholders(item: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(item) if name is not None]


def _check_argv(argv: list[str], parameters: Mapping[str, Parameter], key: str) -> None:
    """Each placeholder is a whole item, ``{service}`` or a parameter's name."""
    for item in argv:
        try:
            names = _placeholders(item)
        except ValueError as exc:
            raise ValueError(f"{key} item {item!r} is not a valid template: {exc}") from exc
        if not names:
            continue
        name = names[0]
        if len(names) > 1 or item != "{" + name + "}":
            raise ValueError(f"{key} item {item!r}: a placeholder must be a whole item, like {{service}}")
        if name != "service" and name not in parameters:
            known = ", ".join(["service", *sorted(parameters)])
            raise ValueError(f"{key} item {item!r} names no parameter (it may name: {known})")


class ServiceAction(BaseModel):
    """``[services.<name>.actions.<action>]``: a command (argv, never a shell) a human approves per run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: Annotated[str, Field(min_length=1, max_length=300)]
    argv: Annotated[list[str], Field(min_length=1)]
    preview_argv: list[str] | None = None
    parameters: dict[str, Parameter] = Field(default_factory=dict)
    approval: Literal["in-band", "out-of-band", "second-person"] | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 120.0
    pass_env: list[str] = Field(default_factory=list)

    _pass_env_names = field_validator("pass_env")(check_pass_env)

    @field_validator("parameters")
    @classmethod
    def _parameter_names(cls, value: dict[str, Parameter]) -> dict[str, Parameter]:
        bad = sorted(name for name in value if not PARAMETER_NAME.fullmatch(name) or name == "service")
        if bad:
            raise ValueError(f"invalid parameter name(s) {', '.join(map(repr, bad))}: use letters, digits and _")
        return value

    @model_validator(mode="after")
    def _placeholders_fill_whole_items(self) -> Self:
        if not self.argv[0].strip() or _placeholders(self.argv[0]):
            raise ValueError("argv's first item (the program) must be a fixed, non-empty path")
        _check_argv(self.argv, self.parameters, "argv")
        if self.preview_argv is not None:
            if not self.preview_argv or _placeholders(self.preview_argv[0]):
                raise ValueError("preview_argv's first item (the program) must be a fixed, non-empty path")
            _check_argv(self.preview_argv, self.parameters, "preview_argv")
        return self


def check_action_names(value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    for service, actions in value.items():
        bad = sorted(name for name in actions if not ACTION_NAME.fullmatch(name) or name == BUILT_IN)
        if bad:
            raise ValueError(
                f"services.{service}.actions: invalid action name(s) {', '.join(map(repr, bad))} "
                f"(letters, digits, _ -; {BUILT_IN!r} is built in)"
            )
    return value


def refusal(action: ServiceAction, given: Mapping[str, object]) -> str | None:
    """Why the parameters are refused (an unknown or missing one, or one of the wrong type), or None."""
    unknown = sorted(set(given) - set(action.parameters))
    if unknown:
        accepted = ", ".join(sorted(action.parameters)) or "none"
        return f"no parameter {', '.join(unknown)} (it takes: {accepted})"
    for name, parameter in sorted(action.parameters.items()):
        if name not in given:
            return f"parameter {name} is required ({parameter.described()})"
        if (why := parameter.refusal(name, given[name])) is not None:
            return why
    return None


def fill(argv: list[str], service: str, given: Mapping[str, object]) -> list[str]:
    """``argv`` with each whole-item placeholder replaced by the service or its (checked) parameter."""
    values = {"service": service, **{name: str(value) for name, value in given.items()}}
    filled: list[str] = []
    for item in argv:
        names = _placeholders(item)
        filled.append(values[names[0]] if names else item.replace("{{", "{").replace("}}", "}"))
    return filled


RUNBOOK_HEADING = "## Actions on this desk"


def runbook_section(actions: Mapping[str, ServiceAction]) -> str:
    """What a runbook ends with when its service has actions: the step and the action read together."""
    lines = ["", "", RUNBOOK_HEADING, "", "Run one with run_service_action; each asks a human first.", ""]
    for name, action in sorted(actions.items()):
        lines.append(f"- `{name}`: {action.description}")
        lines.extend(
            f"  - `{p}`: {spec.described()}" + (f" -- {spec.description}" if spec.description else "")
            for p, spec in sorted(action.parameters.items())
        )
    return "\n".join(lines) + "\n"
