"""Packages whose public names are imported on first use, so importing the package (and so
``sam3-agent --help``) pays for none of numpy, OpenCV, torch or the HTTP clients."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: a name of ``exports`` (public name -> the
    module defining it) is imported from there when first asked for; a submodule asked for
    as an attribute (``package.api``) is imported; anything else is an AttributeError."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
