"""Makes every Python process of a test session compute as another CPU would (tests/other_libm.py).

`scripts/test-as-another-cpu.sh` puts this folder on PYTHONPATH, so the subprocesses the tests
start (killed and resumed runs, the CLI) round like the test process itself, as they would on
one machine of that other kind.
"""

import os
import sys


def _install() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:  # a fresh venv without NumPy (tests/test_wheel.py): nothing to replace
        return
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import other_libm

    other_libm.install()


if os.environ.get("PACPLAN_TEST_OTHER_LIBM") == "1":
    _install()
