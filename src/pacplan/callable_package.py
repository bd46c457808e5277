"""A package that is also a function of the front door (`pacplan.run`, `pacplan.certify_policy`).

Python sets `pacplan.<name>` to the package `pacplan.<name>` as soon as any of its modules is
imported, so a front-door function of the same name would be overwritten: the package itself is
made callable instead, forwarding to the function.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


def make_callable(package: str, target: str, doc: str) -> None:
    """Make module `package` callable as `target` ("module:function", imported on first call)."""
    module_name, function = target.split(":")

    class _CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(module_name), function)(*args, **kwargs)

    _CallablePackage.__call__.__doc__ = doc
    sys.modules[package].__class__ = _CallablePackage
