"""One request for a certify-policy command: the command line and Python build the same
`CertifyRequest` for the same inputs, it refuses bad input in one line in the caller's
spelling before any environment, folder or rollout, and the `gym` world's option errors are
written in that spelling the first time (no rewording)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from helpers import cli
from pacplan.errors import PacplanError
from pacplan.policy_certification import certify as certify_module
from pacplan.policy_certification import certify_policy
from pacplan.policy_certification.names import CLI, PYTHON
from pacplan.policy_certification.request import CertifyRequest, CostOptions
from pacplan.worlds.from_gym.wording import CONFIG
from pacplan.worlds.from_gym.world import GymWorld


def _captured(monkeypatch: pytest.MonkeyPatch) -> list[CertifyRequest]:
    """Requests handed to `certify`, which then stops (nothing is rolled out)."""
    seen: list[CertifyRequest] = []

    def stop(request: CertifyRequest) -> Any:
        seen.append(request)
        raise PacplanError("stopped")

    monkeypatch.setattr(certify_module, "certify", stop)
    return seen


def test_the_command_and_python_build_equal_requests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    seen = _captured(monkeypatch)
    out = tmp_path / "out"
    code, _, err = cli(["certify-policy", "CartPole-v1", "user_policies:balance",
                        "user_policies:lean", "--n", "40", "--test-n", "7", "--first-seed", "900",
                        "--train-seeds", "0:100", "--cost", "return", "--return-bounds", "0,500",
                        "--horizon", "200", "--delta", "0.05", "--clip-actions", "--env-kwargs",
                        "sutton_barto_reward=true", "--workers", "2", "--quiet", "--out",
                        str(out)], capsys)
    assert code != 0 and "stopped" in err, err
    with pytest.raises(PacplanError, match="stopped"):
        certify_policy("CartPole-v1", ["user_policies:balance", "user_policies:lean"], n=40,
                       test_n=7, first_seed=900, train_seeds=(0, 100), return_bounds=(0, 500),
                       horizon=200, delta=0.05, clip_actions=True, workers=2, out=str(out),
                       env_kwargs={"sutton_barto_reward": True})
    command, python = seen
    assert command.names is CLI and python.names is PYTHON
    assert command == python  # the spelling is how messages read, not what is certified
    assert command.seeds == {"cert": [900, 940], "test": [940, 947], "train": [0, 100]}
    assert command.costs == CostOptions(return_bounds=[0.0, 500.0], horizon=200,
                                        clip_actions=True)


@pytest.mark.parametrize(("changes", "python", "command"), [
    ({"n": 0}, "n must be a whole number", "--n must be a whole number"),
    ({"workers": 0}, "workers must be an integer >= 1, got 0",
     "--workers must be an integer >= 1, got 0"),
    ({"executor": "gpu"}, "unknown executor 'gpu'", "unknown --executor 'gpu'"),
    ({"costs": CostOptions(horizon=0)}, "horizon must be an integer >= 1, got 0",
     "--horizon must be an integer >= 1, got 0"),
    ({"costs": CostOptions(return_bounds=[5, 1])}, "return_bounds must have R_min < R_max",
     "--return-bounds must have R_min < R_max"),
    ({"costs": CostOptions(return_bounds=5)}, "return_bounds must be [R_min, R_max], got 5",
     "--return-bounds must be LO,HI, got 5"),
    ({"train_seeds": [0, 2_000_000]}, "declared with train_seeds", "declared with --train-seeds"),
], ids=["n", "workers", "executor", "horizon", "bounds-order", "bounds-shape", "train-seeds"])
def test_a_bad_request_is_one_line_in_the_callers_spelling(
        tmp_path: Path, changes: dict[str, Any], python: str, command: str) -> None:
    """Refused as the request is built: no environment made, no folder, no rollout."""
    args: dict[str, Any] = {"env_id": "NoSuchEnv-v0", "policies": ["no-such-policy"],
                            "out": tmp_path / "out", **changes}
    for names, words in ((PYTHON, python), (CLI, command)):
        with pytest.raises(PacplanError) as info:
            CertifyRequest(**args, names=names)
        assert "\n" not in str(info.value) and words in str(info.value), str(info.value)
    assert not (tmp_path / "out").exists()


def test_the_gym_worlds_option_errors_are_written_in_the_callers_spelling() -> None:
    """A config's world options keep their names; certify-policy's read as its flags."""
    with pytest.raises(PacplanError) as config:
        GymWorld("Pendulum-v1")
    with pytest.raises(PacplanError) as command:
        GymWorld.spelled(CLI.wording(), "Pendulum-v1")
    assert str(config.value).startswith("gym world: option return_bounds [R_min, R_max] is "
                                        "needed for cost 'return'")
    assert str(command.value).startswith("--return-bounds LO,HI is needed for --cost 'return'")
    assert "or --reward-bounds LO,HI per step" in str(command.value)
    assert CONFIG("horizon") == "gym world: option horizon"
    assert PYTHON.wording()("horizon") == "horizon"


def test_internal_steps_carry_the_request_not_its_arguments() -> None:
    """The goal of issue 66: no internal signature of certify-policy carries the arguments
    one by one (the front door keeps its keywords for its users)."""
    from pacplan.policy_certification import certify as module
    from pacplan.policy_certification import inputs

    internal = [module.certify, module._parallel, module._matrix, inputs.make_world_for]
    assert max(len(inspect.signature(f).parameters) for f in internal) <= 6
