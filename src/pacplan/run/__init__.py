"""The pipeline behind `pacplan run`: prior, policies, cost matrices, certificates, report.

The package is also the front door's `pacplan.run(config, out)` (`pacplan.api.run`): a module
cannot be both a package and a function, so the package itself is callable
(`pacplan.callable_package`).
"""

from pacplan.callable_package import make_callable

make_callable(__name__, "pacplan.api:run", "`pacplan.api.run(config, out=None, ...)`: run a "
              "config, resumably.")
