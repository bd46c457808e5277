"""Every check of user-facing input, in one place (in the manner of scikit-learn's `check_array`).

Each function takes the value and the name it is known by to the user (an argument, a config
field or a file), and either returns the value in canonical form or raises `PacplanError`
naming that thing and the rule it broke. Nothing else in pacplan re-implements these rules.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import itertools
import math
import re
import sys
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pacplan.errors import PacplanError, short

INT64_MAX = 2**63 - 1
"""The largest seed: seeds are stored and hashed as int64."""
MAX_WHOLE = 2**53
"""The largest count accepted where one is given (e.g. N): every whole number up to it is
exact as a float64, so no count is silently rounded."""
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
"""A name that is also a file or folder name: no path separator, no leading dot or dash."""


def did_you_mean(value: Any, choices: Iterable[str]) -> str:
    """" did you mean 'x'?" for the closest choice to a mistyped name (difflib's ratio ≥ 0.6,
    as Gymnasium and argparse suggest), or "" when none is close."""
    close = difflib.get_close_matches(str(value), list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def count(n: int, noun: str, plural: str | None = None) -> str:
    """"1 policy", "2 policies": a number with its noun in the right number."""
    word = noun if n == 1 else plural or (noun[:-1] + "ies" if noun.endswith("y")
                                            and noun[-2:-1] not in "aeiou" else noun + "s")
    return f"{n} {word}"


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """`value` must be one of `choices` (e.g. a bound, solver or executor name)."""
    if value not in choices:
        hint = did_you_mean(value, choices) or ";"
        raise PacplanError(f"unknown {name} {value!r}{hint} choose one of {', '.join(choices)}")
    return str(value)


def check_unit_costs(values: Any, name: str, clip: bool = False,
                     shape: tuple[int, int] | None = None,
                     clip_option: str | None = None) -> tuple[np.ndarray, int]:
    """A non-empty 2-D matrix of costs in [0, 1] as float64, and how many entries were clipped.

    Outside [0, 1] is an error unless `clip` (then the count is returned, to be recorded).
    `shape`, when given, is the exact shape the caller asked for. `clip_option` is how the
    caller's user asks for clipping (`--clip` on the command line, `clip=True` in Python); the
    error advises it only when given, since a world's own costs cannot be clipped.
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "fiub":
        raise PacplanError(f"{name}: costs must be numbers, got dtype {arr.dtype}")
    if shape is not None and arr.shape != shape:
        raise PacplanError(f"{name}: costs have shape {arr.shape}, expected {shape}")
    if arr.ndim != 2:
        raise PacplanError(f"{name}: cost matrix must be 2-D (N environments × m policies), "
                           f"got {arr.ndim}-D shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise PacplanError(f"{name}: cost matrix is empty (shape {arr.shape})")
    nan = np.isnan(arr)
    n_nan = int(nan.sum())
    if n_nan:
        i, j = np.argwhere(nan)[0]
        raise PacplanError(f"{name}: {n_nan} cost entries are NaN (first: row {i}, column {j})")
    outside = (arr < 0) | (arr > 1)  # in the file's own precision: a long double just above
    arr = arr.astype(np.float64)     # 1 rounds to 1.0 in float64, but it is outside [0, 1]
    n_out = int(outside.sum())
    if n_out and not clip:
        i, j = np.argwhere(outside)[0]
        raise PacplanError(
            f"{name}: {n_out} costs lie outside [0, 1] (first: {float(arr[i, j])!r} at row {i}, "
            f"column {j}; min {arr.min():.4g}, max {arr.max():.4g})"
            + (f"; pass {clip_option} to clip them (recorded in the certificate)"
               if clip_option else "")
        )
    if n_out:
        arr = np.clip(arr, 0.0, 1.0)
    if not np.isfinite(arr).all():  # a long double beyond float64's range
        raise PacplanError(f"{name}: cost entries overflow float64")
    return arr, n_out


def check_finite(values: Any, name: str) -> np.ndarray:
    """A numeric array with no NaN or infinity."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "fiub":
        raise PacplanError(f"{name}: expected numbers, got dtype {arr.dtype}")
    if not np.isfinite(arr).all():
        raise PacplanError(f"{name}: contains NaN or infinity")
    return arr


def check_policies(thetas: Any, dim: int, name: str = "policy weights") -> np.ndarray:
    """k policies of `dim` finite weights as a contiguous (k, dim) float32 array (1-D → k = 1).

    Finiteness is checked after the cast, so a float64 weight too large for float32 is refused.
    """
    arr = check_finite(thetas, name)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise PacplanError(f"{name}: expected (k, {dim}) weights, got shape {arr.shape}")
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(arr, dtype=np.float32)
    return check_finite(out, f"{name} (as float32)")


def check_seeds(seeds: Any, name: str = "environment seeds") -> np.ndarray:
    """Environment seeds as a 1-D int64 array of non-negative integers."""
    arr = np.asarray(seeds).reshape(-1)
    if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 0):
        raise PacplanError(f"{name} must be non-negative integers, got {arr.dtype} "
                           f"{arr[:3].tolist()}…")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _float_array(name: str, value: Any) -> np.ndarray:
    try:  # an int beyond float64's range raises OverflowError, not an inf
        arr = np.asarray(value, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        raise PacplanError(f"{name} must be a finite number, got {short(value, 40)}") from None
    if np.isnan(arr).any():
        raise PacplanError(f"{name} is NaN")
    return arr


def check_delta(delta: Any, name: str = "delta") -> np.ndarray:
    """δ must lie in the open interval (0, 1); `name` is the caller's spelling (--delta)."""
    d = _float_array(name, delta)
    if np.any((d <= 0.0) | (d >= 1.0)):
        raise PacplanError(f"{name} must lie in (0, 1), got {delta}")
    return d


def check_n(n: Any) -> np.ndarray:
    """N, the number of certification environments: a whole number from 1 to `MAX_WHOLE`."""
    arr = np.asarray(n)
    ok = arr.dtype.kind in "iuf" and bool(np.all(np.isfinite(arr)))
    if not ok or np.any(arr < 1) or np.any(arr > MAX_WHOLE) or np.any(arr != np.floor(arr)):
        raise PacplanError(f"N (number of environments) must be a whole number from 1 to "
                           f"{MAX_WHOLE}, got {n}")
    return arr.astype(np.float64)


def check_emp_cost(emp: Any) -> np.ndarray:
    """The empirical cost Ĉ must lie in [0, 1]."""
    e = _float_array("empirical cost", emp)
    if np.any((e < 0.0) | (e > 1.0)):
        raise PacplanError(f"empirical cost must lie in [0, 1], got {emp}")
    return e


def check_kl(kl: Any) -> np.ndarray:
    """KL(p‖p0) must be non-negative (tiny negative round-off from a solver is clipped to 0)."""
    k = _float_array("KL", kl)
    if np.any(k < -1e-12) or not np.all(np.isfinite(k)):
        raise PacplanError(f"KL divergence must be a finite number ≥ 0, got {kl}")
    return np.maximum(k, 0.0)


def check_kl_budget(c: Any) -> np.ndarray:
    """The right-hand side c of kl(q‖p) ≤ c must be ≥ 0."""
    arr = _float_array("kl budget", c)
    if np.any(arr < 0):
        raise PacplanError(f"kl budget must be ≥ 0, got {c}")
    return arr


def check_probability_vector(p0: Any, m: int, name: str = "prior p0") -> np.ndarray:
    """A probability vector of length m (non-negative, sums to 1)."""
    arr = np.asarray(p0, dtype=np.float64)
    if arr.shape != (m,) or np.any(arr < 0) or not np.isclose(arr.sum(), 1.0):
        raise PacplanError(f"{name} must be a probability vector of length {m}")
    return arr


def _as_whole(value: Any) -> int | None:
    """`value` as an int when it is exactly a whole number (never a bool), else None."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                return None
    if isinstance(value, float | np.floating) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def check_whole_number(value: Any, name: str, minimum: int = 1, maximum: int = MAX_WHOLE) -> int:
    """A whole number in [minimum, maximum], given as an int, an exact float or a string such as
    "4000" or "4e3". Booleans are refused: YAML's `true` is not the count 1."""
    number = _as_whole(value)
    if number is None or not minimum <= number <= maximum:
        raise PacplanError(f"{name} must be a whole number from {minimum} to {maximum}, "
                           f"got {short(value, 40)}")
    return number


def check_int64_seed_range(value: Any, name: str = "seed range") -> tuple[int, int]:
    """A half-open range [start, stop) of int64 seeds with 0 ≤ start < stop: seeds are stored,
    hashed and drawn as int64, so a larger one cannot name an environment."""
    ok = isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2
    if not ok or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in value):
        raise PacplanError(f"{name} must be two integers [start, stop), got {value!r}")
    start, stop = (int(v) for v in value)
    if start < 0:
        raise PacplanError(f"{name} [{start}, {stop}) must start at a seed >= 0")
    if stop <= start:
        raise PacplanError(f"{name} [{start}, {stop}) is empty (need start < stop)")
    if stop > INT64_MAX:
        raise PacplanError(f"{name} [{start}, {stop}) goes beyond the largest seed {INT64_MAX} "
                           "(seeds are int64)")
    return start, stop


def check_safe_name(value: Any, name: str = "name") -> str:
    """A name that becomes a file or folder name (runs/<name>, costs/baseline-<name>.npy):
    letters, digits, '_', '.', '-', starting with a letter or digit, never '..', so it can
    never point outside the folder it is put in."""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or ".." in value:
        raise PacplanError(f"{name} {value!r} is not a safe name: use letters, digits, '_', '.' "
                           "and '-', starting with a letter or digit, without '..'")
    return value


def check_unique(names: Iterable[str], what: str) -> None:
    """Names that identify things (baselines, report rows) must not repeat."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise PacplanError(f"duplicate {what} {n!r}; each {what} must be unique")
        seen.add(n)


def check_int(value: Any, name: str, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """An integer (never a bool, a float or a string) within the given bounds."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise PacplanError(f"{name} must be an integer, got {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise PacplanError(f"{name} must be an integer {_bounds_text(minimum, maximum)}, "
                           f"got {short(value, 40)}")
    return int(value)


def check_real(value: Any, name: str, minimum: float | None = None,
               above: float | None = None) -> float:
    """A finite number (an int or a float, never a bool or a string), ≥ `minimum` or
    > `above` when given."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise PacplanError(f"{name} must be a number, got {value!r}")
    big = isinstance(value, int) and abs(value) > sys.float_info.max  # float() would overflow
    number = math.inf if big else float(value)
    if not math.isfinite(number):
        raise PacplanError(f"{name} must be a finite number, got {short(value, 40)}")
    if minimum is not None and number < minimum:
        raise PacplanError(f"{name} must be >= {minimum}, got {short(value, 40)}")
    if above is not None and number <= above:
        raise PacplanError(f"{name} must be > {above}, got {short(value, 40)}")
    return number


def _bounds_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"from {minimum} to {maximum}"
    return f">= {minimum}" if minimum is not None else f"<= {maximum}"


def check_keyword_options(what: str, func: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Options a user gives for `func(**options)` (e.g. a world's factory): every name must be
    one of its parameters and every value of the type the parameter is annotated with (strictly:
    `true` is not 1, "8" is not 8), so a typo or a wrong type is named before anything runs."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    params = [n for n, p in signature.parameters.items() if p.kind in kinds]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD
                    for p in signature.parameters.values())
    for key in options:
        if key not in params and not takes_any:
            raise PacplanError(f"{what}: unknown option {key!r}; its options are "
                               f"{', '.join(params) or 'none'}")
    hints = _type_hints(func)
    for key, value in options.items():
        if key in hints:
            _check_annotated(what, key, value, hints[key])


def _type_hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of a function or of a class's __init__ ({} if unresolvable)."""
    target = func.__init__ if isinstance(func, type) else func  # type: ignore[misc]
    try:
        return typing.get_type_hints(target)
    except Exception:  # a name only imported for type checkers: do without
        return {}


def _check_annotated(what: str, key: str, value: Any, annotation: Any) -> None:
    from pydantic import ValidationError

    try:
        adapter = _strict_adapter(annotation)
    except TypeError:  # an unhashable annotation: build it uncached
        adapter = _strict_adapter.__wrapped__(annotation)
    if adapter is None:
        return
    try:
        adapter.validate_python(value)
    except ValidationError:
        raise PacplanError(f"{what}: option {key!r} must be {_type_text(annotation)}, "
                           f"got {value!r}") from None


@functools.lru_cache(maxsize=256)
def _strict_adapter(annotation: Any) -> Any:
    """A strict pydantic validator for `annotation` (built once: worlds are rebuilt per worker),
    or None for an annotation pydantic cannot check (an arbitrary class)."""
    from pydantic import ConfigDict, TypeAdapter

    try:
        return TypeAdapter(annotation, config=ConfigDict(strict=True))
    except Exception:
        return None


def _type_text(annotation: Any) -> str:
    """`float | collections.abc.Sequence[float] | None` -> `float | Sequence[float] | None`."""
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return re.sub(r"\b(?:typing|collections\.abc)\.", "", text)


def is_int(value: Any) -> bool:
    """Whether `value` is an integer as JSON gives one (an int, not a bool): a count."""
    return isinstance(value, int) and not isinstance(value, bool)


def overlapping_ranges(ranges: dict[str, Sequence[int]]) -> list[tuple[str, str]]:
    """The pairs of named half-open ranges [start, stop) that share a seed, in order.

    The one rule behind "prior, certification and test environments must be disjoint": the
    config, a given prior's recorded seeds and `verify` all ask it; each phrases its message.
    """
    return [(a, b) for (a, (a0, a1)), (b, (b0, b1)) in itertools.combinations(ranges.items(), 2)
            if a0 < b1 and b0 < a1]


def check_teacher_seeds(seeds: Sequence[int], forbidden: Mapping[str, Sequence[int] | None],
                        may_see: str) -> None:
    """Refuse teacher seeds [start, stop) that overlap a forbidden role's range (certification
    and test: a teacher's labels there would void the bound and the test estimate), naming the
    first clash; `may_see` says which environments a teacher may see instead."""
    lo, hi = int(seeds[0]), int(seeds[1])
    ranges = {"teacher": (lo, hi), **{role: (int(r[0]), int(r[1]))
                                      for role, r in forbidden.items() if r is not None}}
    clashes = [b if a == "teacher" else a for a, b in overlapping_ranges(ranges)
               if "teacher" in (a, b)]
    if clashes:
        b0, b1 = ranges[clashes[0]]
        raise PacplanError(f"teacher seeds [{lo}, {hi}) overlap {clashes[0]} seeds [{b0}, {b1}):"
                           f" the teacher may only see {may_see} environments")


def check_flag(value: object, name: str) -> None:
    """True or False only: "no" is a string, not False."""
    if not isinstance(value, bool | np.bool_):
        raise PacplanError(f"{name} must be True or False, got {value!r}")
