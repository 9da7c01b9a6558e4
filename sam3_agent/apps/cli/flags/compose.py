"""How a flag group joins a command: :class:`Flag`, :class:`FlagGroup`, :func:`with_flags`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from sam3_agent.apps.cli.console import one_line_errors

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Flag:
    """One command-line option: its parameter name, typer annotation and default."""

    name: str
    annotation: Any
    default: Any


def flag(name: str, kind: Any, default: Any, *names: str, help: str, panel: str | None = None,
         metavar: str | None = None, **kwargs: Any) -> Flag:  # fmt: skip
    """The option ``names`` (e.g. ``"--llm-url"``) of type ``kind``, passed as ``name``.

    ``metavar``: the value's placeholder in ``--help`` (``URL``, ``N``); without one, typer
    shows the Python type (``<str>``). A ``bool`` flag takes no value and shows none. A
    choice leaves it out: its choices are shown.
    """
    if kind is bool:
        metavar = ""
    option = typer.Option(*names, help=help, rich_help_panel=panel, metavar=metavar, **kwargs)
    return Flag(name, Annotated[kind, option], default)


@dataclass(frozen=True)
class FlagGroup:
    """Options that together build one value for the command parameter ``target`` (which
    a command may leave out, as with ``--verbose``). ``build(values, built_before)`` raises
    a UserError naming the flag; a ``first`` group is built before the others (logging)."""

    target: str
    flags: tuple[Flag, ...]
    build: Callable[[dict[str, Any], dict[str, Any]], Any]
    first: bool = False


def with_flags(*groups: FlagGroup) -> Callable[[F], F]:
    """Add ``groups``' options to a typer command and hand it what they build.

    Typer reads a command's options from ``inspect.signature(..., eval_str=True)`` and
    ``typing.get_type_hints``, so the wrapper sets both ``__signature__`` and
    ``__annotations__``. Groups are built in the order given (``first`` ones before),
    inside :func:`~sam3_agent.apps.cli.console.one_line_errors`.
    """

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        targets = {g.target for g in groups}
        own = [p for p in signature.parameters.values() if p.name not in targets]
        added = [
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.annotation
            )
            for g in groups
            for f in g.flags
        ]
        names = [p.name for p in [*own, *added]]
        if len(names) != len(set(names)):
            raise TypeError(f"{command.__name__}: a flag is declared twice in {names}")
        parameters = sorted([*own, *added], key=lambda p: p.kind)  # positional ones first

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            built: dict[str, Any] = {}
            with one_line_errors():
                for group in sorted(groups, key=lambda g: not g.first):
                    values = {f.name: kwargs.pop(f.name) for f in group.flags}
                    built[group.target] = group.build(values, built)
            wanted = {k: v for k, v in built.items() if k in signature.parameters}
            return command(*args, **kwargs, **wanted)

        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        wrapper.__annotations__["return"] = signature.return_annotation
        return wrapper  # type: ignore[return-value]

    return decorate
