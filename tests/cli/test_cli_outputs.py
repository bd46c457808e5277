"""Data loss and wrong output on the command line (issue 25): an output path that is an input,
non-finite numbers in --json and tables, overflowing inputs, long-double matrices just above 1,
and a refused run's half-made directory."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN, cli

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


def _strict_json(text: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def matrices(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "cert.npy", rng.random((40, 4)))
    np.save(tmp_path / "test.npy", rng.random((30, 4)))
    return tmp_path / "cert.npy", tmp_path / "test.npy"


@pytest.mark.parametrize("target", ["cert", "test", "cert-link", "cert-dotted"])
def test_certify_matrix_never_writes_over_an_input(matrices, target: str, capsys) -> None:  # type: ignore[no-untyped-def]
    cert, test = matrices
    before = {p: p.read_bytes() for p in (cert, test)}
    out = {"cert": cert, "test": test, "cert-dotted": cert.parent / "." / cert.name}.get(target)
    if target == "cert-link":
        out = cert.parent / "link.npy"
        os.link(cert, out)
    code, _, err = cli(["certify-matrix", str(cert), "--test", str(test), "--out", str(out)],
                       capsys)
    assert code == 2 and "--out" in err and "destroy" in err
    assert {p: p.read_bytes() for p in (cert, test)} == before


def test_bound_refuses_an_overflowing_kl(capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli(["bound", "--emp", "0.5", "--kl", "1e999", "-n", "10"], capsys)
    assert code == 2 and "KL" in err and "finite" in err


def test_an_infinite_bound_is_strict_json_and_no_inf_in_tables(capsys) -> None:  # type: ignore[no-untyped-def]
    args = ["bound", "--emp", "0.5", "--kl", "1e308", "-n", "1"]
    code, out, _ = cli([*args, "--json"], capsys)
    assert code == 0 and _strict_json(out)["quadratic"] == "inf"
    code, out, _ = cli(args, capsys)
    assert code == 0 and "inf" not in out and "∞" in out
    assert re.search(r"\d{20}", out) is None  # no 150-digit number


def test_a_tiny_delta_gives_finite_bounds(capsys) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli(["bound", "--emp", "0.5", "--kl", "1", "-n", "10", "--delta", "1e-320",
                          "--json"], capsys)
    values = _strict_json(out)
    assert code == 0 and np.isfinite(values["mcallester"]) and "Warning" not in err


def test_a_long_double_matrix_just_above_one_needs_clip(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    m = np.full((20, 3), 0.5, dtype=np.longdouble)
    m[3, 1] = np.longdouble(1) + np.finfo(np.longdouble).eps * 4
    if float(m[3, 1]) != 1.0:
        pytest.skip("long double is float64 on this platform")
    np.save(tmp_path / "ld.npy", m)
    code, _, err = cli(["certify-matrix", str(tmp_path / "ld.npy")], capsys)
    assert code == 2 and "outside [0, 1]" in err
    code, out, _ = cli(["certify-matrix", str(tmp_path / "ld.npy"), "--clip", "--json"], capsys)
    c = _strict_json(out)
    assert code == 0 and c["clip"] is True and c["cert_matrix"]["clipped"] == 1


def test_a_refused_run_leaves_no_half_made_directory(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import yaml

    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(SMALL_TOY_RUN))
    (tmp_path / "bad.safetensors").write_text("garbage")
    args = ["run", str(tmp_path / "toy.yaml"), "--quiet", "--prior",
            str(tmp_path / "bad.safetensors")]
    code, _, err = cli([*args, "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "bad.safetensors" in err
    assert not (tmp_path / "r").exists()
    (tmp_path / "mine").mkdir()  # a folder that existed before is never removed
    code, _, _ = cli([*args, "--out", str(tmp_path / "mine")], capsys)
    assert code == 2 and (tmp_path / "mine").is_dir()


def test_control_characters_in_file_names_are_escaped(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    name = tmp_path / "bad\x1b[31mred\x07\nname.npy"
    name.write_bytes(b"not an npy")
    for command in (["certify-matrix", str(name)], ["verify", str(name)],
                    ["report", str(name)]):
        code, _, err = cli(command, capsys)
        assert code == 2 and "\x1b" not in err and "\x07" not in err
        assert err.strip().count("\n") == 0 and "\\x1b" in err


@pytest.mark.parametrize("argv, words", [
    (["pacplan", "run", "toy"], "run directory"),
    (["pacplan", "data", "paper"], "no partial file"),
    (["pacplan", "verify", "x.json"], "interrupted"),
])
def test_the_interrupted_line_says_what_is_kept(argv: list[str], words: str) -> None:
    from pacplan.cli.output import interrupted_line

    line = interrupted_line(argv)
    assert words in line
    if argv[1] != "run":
        assert "run directory" not in line and "resume" not in line


def test_the_interrupted_line_gives_the_command_that_resumes() -> None:
    """The command after 'resume with:' splits back (as a shell would) into the same argv."""
    import shlex

    from pacplan.cli.output import interrupted_line

    argv = ["/x/bin/pacplan", "run", "my config.yaml", "--out", "runs/[a] b", "--workers", "2"]
    line = interrupted_line(argv)
    assert shlex.split(line.split("resume with: ", 1)[1]) == ["pacplan", *argv[1:]]


@pytest.mark.parametrize("section, key", [("es", "pairs_per_env"), ("es", "envs_per_iter"),
                                          ("policies", "m"), ("es", "iterations")])
def test_overflowing_counts_in_a_config_are_refused(tmp_path: Path, section: str, key: str,
                                                    capsys) -> None:  # type: ignore[no-untyped-def]
    import yaml

    config = json.loads(json.dumps(SMALL_TOY_RUN))
    config[section][key] = 10**23
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    code, _, err = cli(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and key in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_file_names_are_shown_not_interpreted(matrices, capsys) -> None:  # type: ignore[no-untyped-def]
    cert, _ = matrices
    name = cert.parent / "[/bold]x\x1b[31m.json"
    code, out, err = cli(["certify-matrix", str(cert), "--out", str(name)], capsys)
    assert code == 0 and "[/bold]x\\x1b[31m.json" in out.replace("\n", ""), err
    code, out, err = cli(["verify", str(name)], capsys)
    assert code == 0 and "\x1b" not in out and "[/bold]x" in out.replace("\n", ""), err


def test_render_never_writes_over_its_weights(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    theta = tmp_path / "theta.npy"
    np.save(theta, np.zeros(3, np.float32))
    before = theta.read_bytes()
    code, _, err = cli(["render", "toy", "--seed", "1", "--theta", str(theta), "--out",
                        str(theta)], capsys)
    assert code == 2 and "--theta" in err and theta.read_bytes() == before


def test_a_mistyped_preset_gets_the_closest_name(capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli(["run", "uav-quik"], capsys)
    assert code == 2 and "did you mean 'uav-quick'?" in err and err.count("\n") == 1
    code, _, err = cli(["presets", "gym-cartpol"], capsys)
    assert code == 2 and "did you mean 'gym-cartpole'?" in err
    code, _, err = cli(["run", "qqqqqqqq"], capsys)  # nothing close: no guess, the list only
    assert code == 2 and "did you mean" not in err and "uav-quick" in err


def test_counts_take_the_right_number() -> None:
    from pacplan.validation import count

    assert [count(n, "policy") for n in (0, 1, 2)] == ["0 policies", "1 policy", "2 policies"]
    assert [count(n, "seed") for n in (1, 8)] == ["1 seed", "8 seeds"]
    assert count(2, "day") == "2 days" and count(3, "matrix", "matrices") == "3 matrices"


def test_every_usage_line_names_its_values_one_way(capsys) -> None:  # type: ignore[no-untyped-def]
    """Arguments and option values in capitals (argparse's and click's way), never typer's
    `<path>` / `<int>` or a lower-case name; typer's own {required} / [optional] marks, and
    click's `...` after an argument given one or more times (certify-policy's POLICY)."""
    import re

    from pacplan.cli import app

    commands = [c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands]
    assert "run" in commands and "report" in commands
    for group in app.registered_groups:
        commands += [f"{group.name} {c.name}" for c in group.typer_instance.registered_commands]
    for command in commands:
        code, out, _ = cli([*command.split(), "--help"], capsys)
        assert code == 0, command
        usage = next(line for line in out.splitlines() if "Usage:" in line).split("[OPTIONS]")[1]
        assert re.fullmatch(r"(\s+(\{[A-Z_]+\}|\[[A-Z_]+\])(\.\.\.)?)*\s*", usage), (command,
                                                                                usage)
        options = [line for line in out.splitlines() if re.match(r"\W*--", line)]
        assert options and not any(re.search(r"<(path|int|str|float)>", line)
                                   for line in options), (command, options)


def test_a_bound_of_100_percent_or_more_is_shown_vacuous() -> None:
    """A bound ≥ 1 says nothing of a cost in [0, 1]: it is never printed as 109.17 %, and the
    table says why (FrozenLake's certificates printed 109.17 % and 120.09 %)."""
    from types import SimpleNamespace

    from pacplan.cli.output import bound_percent, vacuous_note
    from pacplan.report.tables import bound_pct

    assert bound_percent(1.0917) == bound_pct(1.0917) == "≥ 100 % (vacuous)"
    assert bound_percent(1.0) == "≥ 100 % (vacuous)"
    assert bound_percent(0.9974) == "99.74 %" and bound_pct(0.9974) == "99.74 %"
    assert bound_percent(float("inf")) == "∞"
    note = vacuous_note(SimpleNamespace(certified=1.2009, n=100, emp_cost=0.93))  # type: ignore[arg-type]
    assert note is not None and "N = 100" in note and "93.00 %" in note
    assert vacuous_note(SimpleNamespace(certified=0.5, n=100, emp_cost=0.3)) is None  # type: ignore[arg-type]
