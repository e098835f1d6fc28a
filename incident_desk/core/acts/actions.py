"""What restarting a service means, per service: run a command (an argv list, never a shell) or simulate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from incident_desk.core.neighbours.runner import check_pass_env


class CommandAction(BaseModel):
    """Restart by running a command: an argv list, never a shell."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["command"] = "command"
    argv: Annotated[list[str], Field(min_length=1)]
    timeout_seconds: Annotated[float, Field(gt=0)] = 120.0
    cwd: Path | None = None
    pass_env: list[str] = Field(
        default_factory=list, description="Variables of the desk's environment the command also gets, by name"
    )

    _pass_env_names = field_validator("pass_env")(check_pass_env)

    @field_validator("argv")
    @classmethod
    def _no_empty_program(cls, argv: list[str]) -> list[str]:
        if not argv[0].strip():
            raise ValueError("the first argv entry (the program) is empty")
        return argv


class SimulateAction(BaseModel):
    """Restart nothing and say so: the sample desk's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["simulate"] = "simulate"


def _action_kind(value: Any) -> str:
    """``kind`` when given; otherwise a table with an ``argv`` is a command, anything else a simulation."""
    if isinstance(value, dict):
        return str(value.get("kind") or ("command" if "argv" in value else "simulate"))
    return str(getattr(value, "kind", "simulate"))


RestartAction = Annotated[
    Annotated[CommandAction, Tag("command")] | Annotated[SimulateAction, Tag("simulate")],
    Discriminator(_action_kind),
]
