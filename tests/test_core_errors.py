"""One error root in the core: every exception class it defines is an IncidentDeskError of one of four kinds, so
the features map failures to answers in one place (tool_results.failed, tool_results.resource_failure)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

import incident_desk.core
from incident_desk.core import errors
from incident_desk.core.acts.links import LinkRefused
from incident_desk.core.incidents import DataError, LogUnavailable, RunbookMissing, UnknownIncident
from incident_desk.core.search.pattern import PatternError
from incident_desk.protocol import tool_results as results

KINDS = (errors.NotFound, errors.Unavailable, errors.Refused, errors.Invalid)
# Families whose members each have their own kind (an unknown incident is not found, an unreadable log unavailable).
FAMILIES = {DataError}


def core_exception_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for module_info in pkgutil.walk_packages(incident_desk.core.__path__, "incident_desk.core."):
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found.append(value)
    return found


def test_every_core_exception_has_the_root_and_a_kind() -> None:
    classes = core_exception_classes()
    assert len(classes) > 30  # the walk found the core's modules
    outside = [c.__qualname__ for c in classes if not issubclass(c, errors.IncidentDeskError)]
    assert outside == []
    without_kind = [
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if c.__module__ != errors.__name__ and c not in FAMILIES and not issubclass(c, KINDS)
    ]
    assert without_kind == []


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (UnknownIncident("INC-9"), errors.NotFound),
        (RunbookMissing("db"), errors.NotFound),
        (LogUnavailable("INC-9", "gone"), errors.Unavailable),
        (LinkRefused("this link was used"), errors.Refused),
        (PatternError("bad"), errors.Invalid),
    ],
)
def test_each_error_is_of_its_kind_and_answers_with_its_message(exc: errors.IncidentDeskError, kind: type) -> None:
    assert isinstance(exc, kind)
    answer = results.failed(exc)
    assert answer.is_error and [block.text for block in answer.content] == [str(exc)]  # type: ignore[union-attr]


def test_a_resource_failure_is_not_found_only_for_what_does_not_exist() -> None:
    missing = results.resource_failure(UnknownIncident("INC-9"))
    assert isinstance(missing, ResourceNotFoundError) and str(missing) == str(UnknownIncident("INC-9"))
    down = results.resource_failure(LogUnavailable("INC-9", "gone"))
    assert isinstance(down, ResourceError) and not isinstance(down, ResourceNotFoundError)
