"""`pacplan certify-policy ENV_ID POLICY [POLICY ...]`: a certificate for policies trained
elsewhere (`pacplan.certify_policy`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from pacplan.cli.output import (
    certificate_table,
    console,
    print_json,
    shown,
    sigterm_as_ctrl_c,
    stdout_to_stderr,
)
from pacplan.errors import PacplanError
from pacplan.policy_certification.seeds import DEFAULT_FIRST_SEED, DEFAULT_N
from pacplan.validation import check_real


def _seed_range(text: str | None, option: str) -> list[int] | None:
    """'A:B' as the half-open range [A, B)."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if match is None:
        raise PacplanError(f"{option} must be A:B, the seeds A … B−1 (e.g. 0:1000), got "
                           f"{text!r}")
    return [int(match[1]), int(match[2])]


def _pair(text: str | None, option: str) -> list[float] | None:
    """'LO,HI' as two numbers."""
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 2:
        raise PacplanError(f"{option} must be LO,HI (two numbers), got {text!r}")
    try:
        return [check_real(float(p), option) for p in parts]
    except ValueError:
        raise PacplanError(f"{option} must be LO,HI (two numbers), got {text!r}") from None


def _refuse_stray_kwargs(policies: list[str]) -> None:
    """`--env-kwargs size=6 slip=0.2` leaves `slip=0.2` among the policies: say so, not "no
    such policy"."""
    for text in policies:
        if re.fullmatch(r"[A-Za-z_]\w*=.*", text) and not Path(text).exists():
            raise PacplanError(f"POLICY {text!r} looks like an environment keyword argument: "
                               "--env-kwargs takes one KEY=VALUE (or one JSON object), so "
                               f"repeat it: --env-kwargs {text}")


_PYTHON_WORDS = {"True": True, "False": False, "None": None}
"""Python's spellings of JSON's true, false and null, read as those in KEY=VALUE."""


def _json(text: str, what: str) -> Any:
    """`text` as JSON; JSONDecodeError when it is not; a nesting too deep for the parser is
    one PacplanError line (it was a RecursionError traceback)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise PacplanError(f"{what} nests too deeply: refused (an environment's keyword "
                           "arguments are small)") from None


def _env_kwargs(texts: list[str] | None) -> dict[str, Any] | None:
    """Each --env-kwargs a JSON object or KEY=VALUE, merged in order. One rule for VALUE: a
    JSON literal (0.5, true, null, "text", [1, 2], {"a": 1}) or Python's True, False, None is
    that value; anything else is the string as written (size=6 → 6, slip=0.2 → 0.2,
    hard=False → false, map=4x4 → "4x4")."""
    if not texts:
        return None
    merged: dict[str, Any] = {}
    for text in texts:
        if text.lstrip().startswith("{"):
            try:
                value = _json(text, "--env-kwargs")
            except json.JSONDecodeError as exc:
                raise PacplanError(f"--env-kwargs {text[:80]!r} is not a JSON object "
                                   f"({exc})") from None
            if not isinstance(value, dict):
                raise PacplanError(f"--env-kwargs {text[:80]!r} is not a JSON object")
            merged.update(value)
            continue
        key, sep, raw = text.partition("=")
        if not sep or not key.strip().isidentifier():
            raise PacplanError(f"--env-kwargs must be a JSON object or KEY=VALUE, got "
                               f"{text[:80]!r}")
        if raw.strip() in _PYTHON_WORDS:
            merged[key.strip()] = _PYTHON_WORDS[raw.strip()]
            continue
        try:
            merged[key.strip()] = _json(raw, f"--env-kwargs {key.strip()}")
        except json.JSONDecodeError:  # not JSON: the string as written
            merged[key.strip()] = raw
    return merged


def certify_policy_cmd(
    env_id: str = typer.Argument(..., metavar="ENV_ID", help="A registered Gymnasium id, e.g. "
                                 "CartPole-v1, or module:EnvId (the module registers it and "
                                 "is imported first)."),
    policies: list[str] = typer.Argument(..., metavar="POLICY", help="A Stable-Baselines3 "
                                         ".zip, an .onnx file or module:callable; several give "
                                         "a posterior over them."),
    n: int = typer.Option(DEFAULT_N, "--n", help="Certification seeds N."),
    env_kwargs: list[str] | None = typer.Option(None, "--env-kwargs", metavar="KWARGS",
                                                help="Keyword arguments for the environment: "
                                                "a JSON object or KEY=VALUE; repeatable."),
    first_seed: int = typer.Option(DEFAULT_FIRST_SEED, "--first-seed", metavar="S",
                                   help="Certify on seeds S … S+N−1."),
    test_n: int = typer.Option(0, "--test-n", metavar="T", help="Also roll out on the T "
                               "seeds after them (a test estimate)."),
    cost: str = typer.Option("return", "--cost", metavar="SPEC", help="return, terminated, "
                             "success or module:function (of the episode record)."),
    success_key: str | None = typer.Option(None, "--success-key", metavar="KEY",
                                           help="With --cost success: the info key that says "
                                           "success (default is_success)."),
    success_needs_terminated: bool = typer.Option(
        False, "--success-needs-terminated", help="With --cost success: success also needs "
        "the episode to terminate (not time out)."),
    return_bounds: str | None = typer.Option(None, "--return-bounds", metavar="LO,HI",
                                             help="With --cost return: the declared return "
                                             "range."),
    reward_bounds: str | None = typer.Option(None, "--reward-bounds", metavar="LO,HI",
                                             help="With --cost return: per-step reward "
                                             "bounds instead."),
    horizon: int | None = typer.Option(None, "--horizon", help="Most steps per episode "
                                       "(default: the env's limit)."),
    delta: float = typer.Option(0.01, "--delta", help="Confidence parameter δ in (0, 1)."),
    clip_actions: bool = typer.Option(False, "--clip-actions", help="Clip actions outside a "
                                      "Box action space into it (recorded; the certificate is "
                                      "then for the clipped policy) instead of refusing them."),
    train_seeds: str | None = typer.Option(None, "--train-seeds", metavar="A:B",
                                           help="Seeds the policies were trained on; "
                                           "overlapping ones are refused."),
    out: Path | None = typer.Option(None, "--out", metavar="DIR", help="Folder to write "
                                    "(default runs/certify-ENV_ID); an existing one resumes."),
    obs_normalization: Path | None = typer.Option(
        None, "--obs-normalization", metavar="NPZ", help="VecNormalize statistics as an .npz "
        "(mean, var, clip_obs, epsilon), applied to every observation."),
    workers: int = typer.Option(1, "--workers", metavar="K", help="Roll out in K processes "
                                "(the costs are one process's, bit for bit)."),
    executor: str = typer.Option("serial", "--executor", metavar="KIND", help="serial, "
                                 "processes (the default with --workers K > 1) or ray."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print the certificate as one JSON "
                                 "object."),
) -> None:
    """Roll policies trained elsewhere out on fresh seeds and certify their expected cost
    (one policy: a test-set bound; several: a PAC-Bayes posterior over them); resumable."""
    from pacplan.policy_certification.certify import certify
    from pacplan.policy_certification.names import CLI
    from pacplan.policy_certification.request import CertifyRequest, CostOptions

    _refuse_stray_kwargs(policies)
    request = CertifyRequest(
        env_id, policies, n=n, test_n=test_n, first_seed=first_seed,
        train_seeds=_seed_range(train_seeds, CLI.train_seeds), out=out,
        env_kwargs=_env_kwargs(env_kwargs), delta=delta, workers=workers, executor=executor,
        progress=not (quiet or as_json),
        log=None if as_json else lambda msg: console.print(f"[dim]{escape(msg)}[/]"),
        names=CLI,
        costs=CostOptions(cost=cost, success_key=success_key,
                          success_needs_terminated=success_needs_terminated,
                          return_bounds=_pair(return_bounds, CLI.return_bounds),
                          reward_bounds=_pair(reward_bounds, CLI.reward_bounds),
                          horizon=horizon, clip_actions=clip_actions,
                          obs_normalization=obs_normalization))
    # under --json, what the user's code prints goes to stderr, not into the JSON
    with sigterm_as_ctrl_c(), stdout_to_stderr(as_json) as stdout:
        result = certify(request)
        if as_json:
            print_json(result.certificate.to_dict(), stdout)
    if as_json:
        return
    console.print(certificate_table(result.certificate))
    for line in result.policy_lines():
        console.print(f"  {escape(line)}", soft_wrap=True)
    console.print(f"certificate written to {shown(result.certificate_path)}; check it with "
                  f"pacplan verify {escape(str(result.certificate_path))}", soft_wrap=True)
