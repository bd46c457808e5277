"""certify-policy in several processes and on Ray (issue 51): the `policy-rollouts` world runs
the same rollouts on any executor, so the matrices are those of one process, bit for bit;
Python objects, which cannot travel, are refused in one line; a policy file that changes
under a worker is refused."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import user_policies
from pacplan.errors import PacplanError
from pacplan.policy_certification import certify_policy

ARGS = {"n": 24, "test_n": 8, "cost": "terminated", "horizon": 80}


def _policies(tmp_path: Path) -> list[str]:
    from test_user_code_boundary import _linear_onnx

    return [str(_linear_onnx(tmp_path / "m.onnx", 4, 2)), "user_policies:balance",
            "user_policies:lean"]


def _same(a: Path, b: Path) -> None:
    for name in ("cert.npy", "test.npy"):
        assert (a / "costs" / name).read_bytes() == (b / "costs" / name).read_bytes()


def test_two_processes_give_one_process_costs_bit_for_bit(tmp_path: Path) -> None:
    policies = _policies(tmp_path)
    one = certify_policy("CartPole-v1", policies, out=tmp_path / "one", **ARGS)
    two = certify_policy("CartPole-v1", policies, out=tmp_path / "two", workers=2, **ARGS)
    _same(tmp_path / "one", tmp_path / "two")
    assert one.certificate.certified == two.certificate.certified
    assert one.inputs == two.inputs  # the folders resume each other


def test_ray_gives_one_process_costs_bit_for_bit(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    policies = _policies(tmp_path)[:1]  # a file: what a Ray worker anywhere can read
    certify_policy("CartPole-v1", policies, out=tmp_path / "one", **ARGS)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        certify_policy("CartPole-v1", policies, out=tmp_path / "ray", workers=2,
                       executor="ray", **ARGS)
    finally:
        ray.shutdown()
    _same(tmp_path / "one", tmp_path / "ray")


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"policies": [user_policies.lean], "workers": 2}, "Python objects cannot go"),
    ({"policies": ["user_policies:lean"], "cost": user_policies.short_episode,
      "executor": "processes"}, "Python objects cannot go"),
    ({"policies": ["user_policies:lean"], "workers": 0}, "workers must be an integer >= 1"),
    ({"policies": ["user_policies:lean"], "executor": "threads"}, "executor"),
])
def test_what_cannot_run_elsewhere_is_one_line(tmp_path: Path, kwargs: dict,
                                               words: str) -> None:
    call = {"cost": "terminated", **kwargs}
    with pytest.raises(PacplanError, match=words):
        certify_policy("CartPole-v1", call.pop("policies"), n=3, out=tmp_path / "o", **call)
    assert not (tmp_path / "o").exists()


def test_a_policy_file_changed_under_a_worker_is_refused(tmp_path: Path) -> None:
    from pacplan.policy_certification.world import PolicyRollouts

    path = _policies(tmp_path)[0]
    with pytest.raises(PacplanError, match="changed while it was being certified"):
        PolicyRollouts("CartPole-v1", [path], ["0" * 64], costs={"cost": "terminated"})
    world = PolicyRollouts("CartPole-v1", ["user_policies:lean"], [_sha("user_policies:lean")],
                           costs={"cost": "terminated", "horizon": 50})
    costs = world.costs(np.zeros((1, 1), np.float32), np.array([1, 2, 3]))
    assert costs.shape == (3, 1) and set(costs[:, 0]) <= {0.0, 1.0}
    with pytest.raises(PacplanError, match="policy indices must be 0 … 0"):
        world.costs(np.ones((1, 1), np.float32), np.array([1]))


def _sha(spec: str) -> str:
    from pacplan.io.user_code import user_code_sha256

    return user_code_sha256(spec.partition(":")[0], spec)
