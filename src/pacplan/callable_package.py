"""A package that is also a function of the front door (`pacplan.run`, `pacplan.certify_policy`).

Python sets `pacplan.<name>` to the package `pacplan.<name>` as soon as any of its modules is
imported, so a front-door function of the same name would be overwritten: the package itself is
made callable instead, forwarding to the function. `inspect.signature` and `help()` show the
function's own signature and docstring (read when first asked for, so importing stays quick).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import Any


def make_callable(package: str, target: str, doc: str) -> None:
    """Make module `package` callable as `target` ("module:function", imported on first call)."""
    module_name, function = target.split(":")
    package_doc = sys.modules[package].__doc__ or ""

    def _function() -> Any:
        return getattr(importlib.import_module(module_name), function)

    class _CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return _function()(*args, **kwargs)

        @property
        def __signature__(self) -> inspect.Signature:
            return inspect.signature(_function())

        @property  # type: ignore[override]
        def __doc__(self) -> str:  # help(): the function first, then the package
            fn = _function()
            return (f"{function}{inspect.signature(fn)}\n\n{inspect.getdoc(fn) or ''}\n\n"
                    f"{package_doc}")

    _CallablePackage.__call__.__doc__ = doc
    sys.modules[package].__class__ = _CallablePackage
