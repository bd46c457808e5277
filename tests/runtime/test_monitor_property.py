"""Property: the monitor's line parser (`pacplan.cli.monitor.read_costs`), fed any bytes as a
CSV or a JSON-lines log, either returns exactly the costs a reference parse finds, every one in
[0, 1], or raises one PacplanError of one line; never another exception, never a hang
(hypothesis's deadline).

The reference is written from the rules in docs/monitor.md, independently of the streaming
reader: the whole text at once, numbers read exactly (`Decimal`) and rounded to float64 once,
CSV numbers matched by a grammar rather than by `float()`'s wider syntax.
"""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pacplan.cli.monitor import read_costs
from pacplan.errors import PacplanError

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LINE_END = re.compile(r"\r\n|\r|\n")


def _cost(value: float) -> float | None:
    return value if 0.0 <= value <= 1.0 else None  # NaN fails too


def _lines(text: str) -> list[str]:
    pieces = _LINE_END.split(text)
    return pieces[:-1] if pieces and pieces[-1] == "" else pieces


def _exact(text: str) -> Decimal:
    """A JSON number's exact value; one whose exponent is beyond Decimal's range is 0 or
    infinite for float64 (the reader's float rounds it so too)."""
    try:
        return Decimal(text)
    except InvalidOperation:
        exponent = re.search(r"[eE]([+-]?[0-9]+)$", text)
        assert exponent is not None, text
        return Decimal(0) if int(exponent.group(1)) < 0 else Decimal("Infinity")


def reference_json(text: str) -> list[float] | None:
    """None where the log must be refused."""
    costs = []
    for line in _lines(text):
        if not line.strip():
            continue
        try:
            pairs = json.loads(line, object_pairs_hook=lambda p: p, parse_float=_exact,
                               parse_int=_exact, parse_constant=lambda _: None)
        except (ValueError, RecursionError):
            return None
        if isinstance(pairs, list) and all(isinstance(p, tuple) for p in pairs):  # an object
            values = [v for k, v in pairs if k == "cost"]
            if len(values) != 1:
                return None
            pairs = values[0]
        if not isinstance(pairs, Decimal):
            return None
        cost = _cost(float(pairs))
        if cost is None:
            return None
        costs.append(cost)
    return costs or None


def reference_csv(text: str) -> list[float] | None:
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error:
        return None
    rows = [row for row in rows if any(field.strip() for field in row)]
    column, width = 0, 1
    if rows:
        names = [field.strip().lower() for field in rows[0]]
        if names.count("cost") > 1:
            return None
        if "cost" in names:
            column, width = names.index("cost"), len(names)
            rows = rows[1:]
    costs = []
    for row in rows:
        field = row[column].strip() if len(row) == width else ""
        cost = _cost(float(field)) if _DECIMAL.fullmatch(field) else None
        if cost is None:
            return None
        costs.append(cost)
    return costs or None


TOKENS = ["0", "1", "0.5", ".25", "1.", "7", "-0", "+0.1", "1e-3", "2E0", "1e999", "1e-999",
          "nan", "NaN", "inf", "-Infinity", "0_1", "\u0663", "0x1", "true", "null", '"0.1"',
          "cost", "Cost", " cost ", "episode", ",", ";", " ", "\t", "\n", "\n", "\n", "\r",
          "\r\n", '"', "'", "{", "}", "[", "]", ":", '"cost"', '{"cost": ', "\x00", "\x85",
          "\u2028", "\ufeff", "é", "9" * 400, "0." + "0" * 330 + "1", "[" * 1500,
          "{\"a\":" * 1200]


NUMBERISH = st.text(st.sampled_from("0123456789._eE+-nafity \t\u0663\uff11"), min_size=1,
                    max_size=8)
"""Text near a number: float() takes some (1_0, \uff11, infinity) that the grammar does not."""


def _insert(text: str, token: str, where: float) -> str:
    at = int(where * len(text))
    return text[:at] + token + text[at:]


FORMATS = [("", "{}"), ("cost\n", "{}"), ("episode,cost\n", "3,{}"), ("cost,cost\n", "{},{}"),
           ("\n", '{{"cost": {}}}'), ("", '{{"episode": 1, "cost": {}}}'), ("", "{} ")]


def _log(form: tuple[str, str], costs: list[float], odd: str, where: float,
         ending: str) -> str:
    """A log in one format (header, line), with the line `odd` among its lines at `where`."""
    header, line = form
    lines = [line.format(repr(c), repr(c)) for c in costs]
    at = int(where * len(lines))
    return header + (ending or "\n").join([*lines[:at], odd, *lines[at:]]) + ending


def _texts() -> st.SearchStrategy[str]:
    """Garbage, and logs of one format with one odd line (a token, or a good line with a token
    put into it), and such logs with a token put anywhere."""
    token = st.one_of(st.sampled_from(TOKENS),
                      st.text(st.characters(blacklist_categories=("Cs",)), max_size=4))
    garbage = st.lists(token, max_size=40).map("".join)
    costs = st.lists(st.floats(0.0, 1.0), max_size=12)
    inserted = st.tuples(st.floats(0.0, 1.0).map(repr), token, st.floats(0, 1)).map(
        lambda t: _insert(*t))
    odd = st.one_of(NUMBERISH, token, inserted)
    ending = st.sampled_from(["\n", "\r\n", "\r", ""])
    log = st.tuples(st.sampled_from(FORMATS), costs, odd, st.floats(0, 1), ending).map(
        lambda t: _log(*t))
    mutated = st.tuples(log, token, st.floats(0, 1)).map(lambda t: _insert(*t))
    return st.one_of(garbage, log, mutated)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


def _both(path: Path, data: bytes) -> tuple[list[float] | None, list[float] | None]:
    """`data` written to `path`, then (read_costs's costs, the reference parse's costs), None
    for an error; read_costs's error must be one line naming the file."""
    path.write_bytes(data)
    try:
        decoded = data.decode("utf-8-sig")  # a leading byte-order mark is not the log's
    except UnicodeDecodeError:
        expected = None
    else:
        expected = (reference_json if path.suffix == ".jsonl" else reference_csv)(decoded)
    try:
        got: list[float] | None = read_costs(path).tolist()
    except PacplanError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        got = None
    return got, expected


@settings(max_examples=400, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts(), raw=st.one_of(st.none(), st.none(), st.none(), st.binary(max_size=30)))
@example(text="\ufeff0", raw=None)  # a byte-order mark opens the log (Excel's CSV UTF-8)
@example(text="\ufeffcost\n0.5\n", raw=None)
@example(text="0\n\ufeff0", raw=None)  # but not a line of it
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_the_parser_returns_the_reference_costs_or_one_line_error(
        folder: Path, suffix: str, text: str, raw: bytes | None) -> None:
    got, expected = _both(folder / f"costs{suffix}", text.encode("utf-8") if raw is None else raw)
    assert got == expected
    assert got is None or all(0.0 <= c <= 1.0 for c in got)


@settings(max_examples=300, deadline=5000)
@given(field=st.one_of(NUMBERISH, st.sampled_from(TOKENS)))
@pytest.mark.parametrize(("suffix", "form"), [(".csv", "{}\n"), (".csv", "cost\n{}\n"),
                                              (".jsonl", "{}\n"), (".jsonl", '{{"cost": {}}}\n')])
def test_one_field_is_the_reference_cost_or_one_line_error(folder: Path, suffix: str, form: str,
                                                           field: str) -> None:
    """The same property for a log of one field, where the number's syntax is all there is."""
    got, expected = _both(folder / f"one{suffix}", form.format(field).encode("utf-8"))
    assert got == expected


@pytest.mark.parametrize("token", TOKENS)
def test_every_token_alone_and_among_good_lines(folder: Path, token: str) -> None:
    """Each token of the fuzzer's alphabet, as the one odd line of a good log in every format
    (hypothesis may not draw a given one)."""
    for form in FORMATS:
        for suffix in (".csv", ".jsonl"):
            text = _log(form, [0.25, 1.0], token, 0.5, "\n")
            got, expected = _both(folder / f"token{suffix}", text.encode("utf-8"))
            assert got == expected, (form, suffix)
