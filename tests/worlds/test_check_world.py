"""`check_world` / `pacplan check-world`: passes every shipped world, and catches each broken
promise of a fake world (a cost of 1.2, a NaN, randomness, seeds that change nothing, …)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from helpers import cli
from pacplan.errors import PacplanError
from pacplan.worlds import CheckReport, check_world
from pacplan.worlds import base as world_base
from pacplan.worlds.check import CHECKS
from pacplan.worlds.check_report import default_policies, parse_world_options


class GoodWorld:
    """Seed s moves the goal to default_rng(s); cost 1 − exp(−‖θ − goal‖² / d) per pair."""

    name = "good"

    def __init__(self, dim: int = 3) -> None:
        self.dim = dim

    def policy_dim(self) -> int:
        return self.dim

    def goal(self, seed: int) -> np.ndarray:
        return np.random.default_rng(seed).uniform(-1.0, 1.0, self.dim)

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        th = np.asarray(thetas, dtype=np.float64)
        rows = [np.sum((th - self.goal(int(s))) ** 2, axis=1) for s in seeds]
        return -np.expm1(-np.array(rows).reshape(len(seeds), len(th)) / self.dim)


class OutOfRangeWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        out = super().costs(thetas, seeds)
        out[np.asarray(seeds) == 3] = 1.2
        return out


class NaNWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        out = super().costs(thetas, seeds)
        out[np.asarray(seeds) == 5] = np.nan
        return out


class RandomWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return np.random.default_rng().uniform(size=(len(seeds), len(thetas)))


class OneEnvironmentWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return super().costs(thetas, np.zeros_like(np.asarray(seeds)))


class BatchDependentWorld(GoodWorld):
    """The cost leaks the pair's position in the call: chunking would change results."""

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        out = super().costs(thetas, seeds)
        return out * (1.0 - 0.01 * np.arange(len(seeds)))[:, None]


class LastBitsWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        out = super().costs(thetas, seeds)
        return out * (1.0 - 1e-15 * (len(seeds) > 1))


class LambdaWorld(GoodWorld):
    def __init__(self, dim: int = 3) -> None:
        super().__init__(dim)
        self.scale = lambda x: x


class OpenFileWorld(GoodWorld):
    def __init__(self, dim: int = 3) -> None:
        super().__init__(dim)
        self.log = io.TextIOWrapper(io.BytesIO())


class TransposedWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return super().costs(thetas, seeds).T


class IntegerWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return (super().costs(thetas, seeds) > 0.5).astype(np.int64)


class IgnoresPoliciesWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return super().costs(np.zeros_like(thetas), seeds)


class RaisingWorld(GoodWorld):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        raise RuntimeError("simulator crashed\nwith a traceback")


class ZeroDimWorld(GoodWorld):
    def policy_dim(self) -> int:
        return 0


def status(report: CheckReport) -> dict[str, str]:
    return {r.name: r.status for r in report.results}


def detail(report: CheckReport, name: str) -> str:
    return next(r.detail for r in report.results if r.name == name)


@pytest.fixture
def register() -> Iterator[Callable[[str, type], None]]:
    """Register fake worlds by import path for one test, then forget them."""
    names: list[str] = []

    def add(name: str, cls: type) -> None:
        world_base.register_world(name, f"{__name__}:{cls.__name__}")
        names.append(name)

    yield add
    for name in names:
        world_base._REGISTRY.pop(name, None)


def test_good_world_passes_every_check_and_reports_timing() -> None:
    report = check_world(GoodWorld())
    assert report.ok and report.policy_dim == 3 and report.n_policies == 4
    assert [r.name for r in report.results] == [name for name, _, _ in CHECKS]
    assert set(status(report).values()) == {"passed", "skipped"}  # rebuild: not given by name
    assert status(report)["rebuild_from_spec"] == "skipped"
    assert report.seconds_per_rollout is not None and report.seconds_per_rollout > 0
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_toy_passes() -> None:
    report = check_world("toy", {"dim": 4})
    assert report.ok, report.summary()
    assert set(status(report).values()) == {"passed"}


def test_uav_passes() -> None:
    report = check_world("uav", {"compile": False}, seeds=range(6), n_policies=3)
    assert report.ok, report.summary()
    assert status(report)["rebuild_from_spec"] == "passed"


@pytest.mark.slow
def test_quadruped_passes() -> None:  # ~5 s: 2 seeds × 2 policies, ~0.3 s a rollout
    report = check_world("quadruped", seeds=[0, 1], n_policies=2)
    assert report.ok, report.summary()


def test_catches_a_cost_above_one() -> None:
    report = check_world(OutOfRangeWorld())
    assert not report.ok and status(report)["in_unit_interval"] == "failed"
    assert "seed 3, policy 0: cost 1.2 outside [0, 1]" in detail(report, "in_unit_interval")


def test_catches_a_nan() -> None:
    report = check_world(NaNWorld())
    assert [r.name for r in report.failures] == ["finite"]
    assert "seed 5, policy 0: cost nan" in detail(report, "finite")


def test_catches_a_nondeterministic_world() -> None:
    report = check_world(RandomWorld())
    assert status(report)["deterministic"] == "failed"
    assert "second call with the same inputs differs" in detail(report, "deterministic")


def test_catches_seeds_that_all_give_the_same_environment() -> None:
    report = check_world(OneEnvironmentWorld())
    assert [r.name for r in report.failures] == ["seeds_differ"]
    assert "all 8 seeds give the same costs" in detail(report, "seeds_differ")


def test_catches_costs_that_depend_on_the_batch() -> None:
    report = check_world(BatchDependentWorld())
    assert [r.name for r in report.failures] == ["batch_independent"]


def test_last_bits_of_a_batching_world_are_a_warning() -> None:
    report = check_world(LastBitsWorld())
    assert report.ok and status(report)["batch_independent"] == "warning"


@pytest.mark.parametrize("cls", [LambdaWorld, OpenFileWorld])
def test_catches_an_unpicklable_world(cls: type) -> None:
    report = check_world(cls())
    assert [r.name for r in report.failures] == ["picklable"]
    assert "pickle round trip raised" in detail(report, "picklable")


@pytest.mark.parametrize(("cls", "fragment"), [
    (TransposedWorld, "have shape (4, 8), expected (n, k) = (8, 4)"),
    (IntegerWorld, "dtype int64, expected a float dtype"),
])
def test_catches_a_wrong_shape_or_dtype_and_skips_what_needs_it(cls: type, fragment: str) -> None:
    report = check_world(cls())
    assert [r.name for r in report.failures] == ["shape_dtype"]
    assert fragment in detail(report, "shape_dtype")
    assert status(report)["deterministic"] == "skipped" and report.seconds_per_rollout is None


def test_a_world_that_raises_fails_in_one_line() -> None:
    report = check_world(RaisingWorld())
    line = "raised RuntimeError: simulator crashed with a traceback"
    assert detail(report, "shape_dtype") == line


def test_bad_policy_dim_stops_the_checks() -> None:
    report = check_world(ZeroDimWorld())
    assert [r.name for r in report.failures] == ["policy_dim"]
    assert "positive int, got 0" in detail(report, "policy_dim")


def test_a_world_ignoring_its_policies_is_a_warning() -> None:
    report = check_world(IgnoresPoliciesWorld())
    assert report.ok and status(report)["policies_differ"] == "warning"


def test_a_world_lacking_the_interface_fails() -> None:
    report = check_world(object())
    assert [r.name for r in report.failures] == ["interface"]
    assert "lacks name, policy_dim, costs" in detail(report, "interface")


def test_registered_world_is_rebuilt_from_its_spec(register) -> None:
    register("check-good", GoodWorld)
    report = check_world("check-good", {"dim": 5}, seeds=[10, 11, 12])
    assert report.ok and status(report)["rebuild_from_spec"] == "passed"
    assert report.policy_dim == 5 and report.seeds == [10, 11, 12]


def test_given_policies_are_used_and_bad_arguments_refused() -> None:
    thetas = np.ones((2, 3), dtype=np.float32)
    assert check_world(GoodWorld(), thetas=thetas).n_policies == 2
    for kwargs in ({"seeds": []}, {"seeds": [1, 1]}, {"seeds": [-1]}, {"options": {"dim": 2}}):
        with pytest.raises(PacplanError):
            check_world(GoodWorld(), **kwargs)
    with pytest.raises(PacplanError, match="unknown world"):
        check_world("no-such-world")


def test_default_policies_are_zeros_and_small_fixed_draws() -> None:
    p = default_policies(5, 4)
    assert p.shape == (4, 5) and p.dtype == np.float32 and not p[0].any()
    assert np.array_equal(p, default_policies(5, 4)) and 0.02 < p[1:].std() < 0.3


def test_parse_world_options() -> None:
    assert parse_world_options(["dim=4", "shift=0.5", "target=[1, 2]", "name=cpu", "x="]) == {
        "dim": 4, "shift": 0.5, "target": [1, 2], "name": "cpu", "x": ""}
    for bad in (["dim"], ["=4"], ["dim=1", "dim=2"]):
        with pytest.raises(PacplanError):
            parse_world_options(bad)




def test_cli_passes_toy(capsys) -> None:
    code, out, err = cli(["check-world", "toy", "--option", "dim=4"], capsys)
    assert code == 0 and err == ""
    assert "check-world toy (d = 4, 8 seeds × 4 policies)" in out and "seeds_differ" in out
    code, out, _ = cli(["check-world", "toy", "-o", "dim=2", "--seeds", "3", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["ok"] and d["seeds"] == [0, 1, 2] and d["options"] == {"dim": 2}


def test_cli_bad_world_exits_2_with_one_line(register, capsys) -> None:
    register("check-bad", OutOfRangeWorld)
    code, out, err = cli(["check-world", "check-bad"], capsys)
    assert code == 2 and "in_unit_interval" in out
    assert len(err.strip().splitlines()) == 1
    assert "world 'check-bad': 1 check(s) failed (in_unit_interval)" in err
    code, out, err = cli(["check-world", "check-bad", "--json"], capsys)
    assert code == 2 and json.loads(out)["ok"] is False and len(err.strip().splitlines()) == 1


def test_cli_bad_option_is_one_line(capsys) -> None:
    code, _, err = cli(["check-world", "toy", "--option", "dimm=3"], capsys)
    assert code == 2 and "unknown option 'dimm'" in err and len(err.strip().splitlines()) == 1


def test_a_world_names_its_teachers_the_default_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world_base, "_REGISTRY", dict(world_base._REGISTRY))
    world_base.register_world("two", "pacplan.worlds.toy:ToyWorld",
                              teacher=("quadruped-opening", "uav-lattice"))
    assert world_base.world_teacher("two") == "quadruped-opening"
    assert world_base.world_teacher("two", "uav-lattice") == "uav-lattice"
    with pytest.raises(PacplanError, match=r"distill\.teacher 'quadruped-look-ahead' does not "
                       r"teach in world 'two'; its teachers: quadruped-opening, uav-lattice"):
        world_base.world_teacher("two", "quadruped-look-ahead")
    world_base.register_world("one", "pacplan.worlds.toy:ToyWorld", teacher="uav-lattice")
    assert world_base.world_entry("one").teachers == ("uav-lattice",)
    with pytest.raises(PacplanError, match=r"teacher 'oracle' of world 'three' is not one"):
        world_base.register_world("three", "pacplan.worlds.toy:ToyWorld",
                                  teacher=("uav-lattice", "oracle"))
    with pytest.raises(PacplanError, match=r"plans only in the .* worlds, not 'toy'"):
        world_base.world_teacher("toy")
