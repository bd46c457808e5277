"""The pipeline behind `pacplan run`: prior, policies, cost matrices, certificates, report.

The package is also the front door's `pacplan.run(config, out)` (`pacplan.api.run`): a module
cannot be both a package and a function, and Python sets `pacplan.run` to this package as soon
as any of its modules is imported, so the package itself is made callable.
"""

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    """This package, callable as `pacplan.api.run`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """`pacplan.api.run(config, out=None, ...)`: run a config, resumably."""
        from pacplan.api import run

        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
