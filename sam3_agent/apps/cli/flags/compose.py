"""How a flag group joins a command (:class:`Flag`, :class:`FlagGroup`, :func:`with_flags`),
and the flags every command shares (``--verbose``, ``--mode``)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, TypeVar

import typer

from sam3_agent.apps.cli.console import one_line_errors, setup_logging

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Flag:
    """One command-line option: its parameter name, typer annotation and default."""

    name: str
    annotation: Any
    default: Any


def flag(name: str, kind: Any, default: Any, *names: str, help: str, panel: str | None = None,
         metavar: str | None = None, **kwargs: Any) -> Flag:  # fmt: skip
    """The option ``names`` of type ``kind``, passed as ``name``; ``metavar``: the value's
    placeholder in ``--help`` (a ``bool`` flag shows none)."""
    option = typer.Option(*names, help=help, rich_help_panel=panel,
                          metavar="" if kind is bool else metavar, **kwargs)  # fmt: skip
    return Flag(name, Annotated[kind, option], default)


@dataclass(frozen=True)
class FlagGroup:
    """Options that together build one value for the command parameter ``target``;
    ``build(values, built_before)`` raises a UserError naming the flag."""

    target: str
    flags: tuple[Flag, ...]
    build: Callable[[dict[str, Any], dict[str, Any]], Any]
    first: bool = False


def with_flags(*groups: FlagGroup) -> Callable[[F], F]:
    """Add ``groups``' options to a typer command, which declares keyword-only the value each
    group builds (``first`` ones built before, inside one_line_errors)."""

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        targets = {g.target for g in groups}
        own = [p for p in signature.parameters.values() if p.name not in targets]
        added = [
            inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                              annotation=f.annotation)
            for g in groups for f in g.flags
        ]  # fmt: skip
        names = [p.name for p in [*own, *added]]
        if len(names) != len(set(names)):
            raise TypeError(f"{command.__name__}: a flag is declared twice in {names}")

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            built: dict[str, Any] = {}
            with one_line_errors():
                for group in sorted(groups, key=lambda g: not g.first):
                    values = {f.name: kwargs.pop(f.name) for f in group.flags}
                    built[group.target] = group.build(values, built)
            wanted = {k: v for k, v in built.items() if k in signature.parameters}
            return command(*args, **kwargs, **wanted)

        parameters = sorted([*own, *added], key=lambda p: p.kind)  # positional ones first
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def _logging(values: dict[str, Any], built: dict[str, Any]) -> bool:
    setup_logging(values["verbose"])
    return bool(values["verbose"])


VERBOSE = FlagGroup(
    "verbose", (flag("verbose", bool, False, "--verbose", "-v", help="Debug logging."),),
    _logging, first=True,
)  # fmt: skip
"""``--verbose/-v``: logging set up before anything else."""


class Mode(str, Enum):
    """``--mode`` of ``run`` and ``eval``."""

    agent = "agent"
    sam3_only = "sam3-only"
