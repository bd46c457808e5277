"""Time per decision of an exported planner (`pacplan.runtime`) against pacplan's own policy
code on the same observations, in this one process; one JSON object.

    python benchmarks/planner_latency.py [--decisions 500] [--threads 1]
        [--conv-widths 1,8,16] [--worlds uav,uav-conv,quadruped]

UAV: observations are depth images the Gym env renders along flights of the certified planner
of the paper's net (results/uav-paper-net);
the runtime (onnxruntime net + numpy Depth Filter) is compared with the torch path the batched
simulator runs (FilterCells + conv_features + head + choose, eager, one image, one policy) and
with the numpy reference policy (policy_np). Quadruped: η from the runtime against the numpy
policy (`policy_action`). Times are medians over `--decisions` calls after a warm-up, so the
goal (≤ 1 ms a UAV decision) is judged on a typical call, not on a descheduled one.

UAV conv family (`policy: conv`, issue 52; goal ≤ 2 ms a decision): to time every width, its
planner is assembled from what export writes (the world's fixed parts,
net.onnx of the family, weights drawn at random at the prior's scale) and acts through the
runtime's own decision path (`NetPolicies`, the session `Planner.load` opens), on the same
images; beside it the batched simulator's torch kernel (`conv_policy.conv_scores`, one image,
padded to its fixed batch) and the numpy path (policy_np).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _median_ms(fn: Callable[[Any], Any], inputs: list[Any]) -> float:
    for x in inputs[:20]:
        fn(x)
    times = []
    for x in inputs:
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def _uav_images(planner: Any, n: int) -> list[np.ndarray]:
    import gymnasium as gym

    env = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    rng, images, seed = np.random.default_rng(0), [], 0
    while len(images) < n:
        obs, _ = env.reset(options={"scene_seed": seed})
        planner.start_episode(rng)
        done = False
        while not done and len(images) < n:
            images.append(obs)
            obs, _, done, _, _ = env.step(planner.act(obs).primitive)
        planner.end_episode()
        seed += 1
    env.close()
    return images


def uav(folder: Path, n: int, threads: int) -> tuple[dict[str, float], list[np.ndarray]]:
    import torch

    from pacplan.export import export_planner
    from pacplan.runtime import Planner
    from pacplan.worlds.uav import policy as pol
    from pacplan.worlds.uav.policy_np import NumpyPolicy

    run = ROOT / "results" / "uav-paper-net"  # the paper's net (the conv family: uav_conv)
    planner = Planner.load(export_planner(run, folder / "uav"), threads)
    images = _uav_images(planner, n)
    k = planner.start_episode(np.random.default_rng(1))
    from pacplan.pipeline.rundir import checked_policies

    theta = checked_policies(run)[k : k + 1]
    torch.set_num_threads(threads)
    parts, cells = pol.split_theta(torch.as_tensor(theta)), pol.FilterCells()
    one = torch.zeros(1, dtype=torch.long)
    weights = pol.conv_weights(parts, one)

    def torch_decision(image: np.ndarray) -> int:
        with torch.no_grad():
            x = torch.as_tensor(image)[None]
            scores = cells.scores(x) + 5.0 * pol.head(pol.conv_features(x, *weights)[None],
                                                      parts)[0]
            return int(pol.choose(scores)[0])

    runtime = _median_ms(planner.act, images)
    torch_ms = _median_ms(torch_decision, images)
    numpy_ms = _median_ms(NumpyPolicy(theta[0]).choose, images)
    return {"uav_runtime_ms": runtime, "uav_torch_ms": torch_ms, "uav_numpy_ref_ms": numpy_ms,
            "uav_torch_over_runtime": torch_ms / runtime}, images


def uav_conv(images: list[np.ndarray], widths: list[int], threads: int) -> dict[str, Any]:
    """act() of the conv family's planner per width (see the module docstring)."""
    import torch

    from pacplan.export.fixed import fixed_parts
    from pacplan.export.write import net_onnx, split_weights
    from pacplan.runtime import Planner
    from pacplan.worlds.uav import conv_policy
    from pacplan.worlds.uav.families import policy_family
    from pacplan.worlds.uav.policy import FilterCells, choose
    from pacplan.worlds.uav.policy_np import NumpyPolicy
    from pacplan_runtime.bundle import PLANNER_FORMAT
    from pacplan_runtime.decide import NetPolicies
    from pacplan_runtime.load import _session
    from pacplan_runtime.spec import check_spec, check_weights

    torch.set_num_threads(threads)
    out: dict[str, Any] = {}
    for width in widths:
        family = policy_family("conv", width)
        options = {"policy": "conv", "policy_width": width}
        fixed = fixed_parts("uav", options)
        theta = np.random.default_rng(width).normal(0.0, 0.05, (1, family.dim))
        theta = theta.astype(np.float32)
        spec = {"format": PLANNER_FORMAT, "world": {"name": "uav", "options": options},
                "certified_cost": 1.0, "delta": 0.01,  # no certificate: the monitor's bound
                "posterior": {"policy_index": [0], "probability": [1.0]},
                "net": {"onnx": "net.onnx", "weights": "weights.safetensors",
                        "dtype": "float32"}, "fixed": fixed}
        where = Path(f"uav-conv-{width}")
        check_spec(spec, where)
        weights = split_weights("uav", theta, fixed)
        session = _session(net_onnx("uav", fixed), threads, where)
        check_weights(weights, session, "uav", 1, where, fixed)
        planner = Planner(where, spec, NetPolicies(spec, weights, session))
        planner.start_episode(np.random.default_rng(1))
        parts = conv_policy.split_thetas(torch.as_tensor(theta), family)
        cells, zero = FilterCells(), torch.zeros(1, dtype=torch.long)

        def torch_decision(image: np.ndarray, parts: Any = parts, cells: Any = cells,
                           zero: Any = zero) -> int:
            with torch.no_grad():
                x = torch.as_tensor(image)[None]
                net = conv_policy.conv_scores(x, zero, zero, parts)
                return int(choose(cells.scores(x) + 5.0 * net)[0])

        runtime = _median_ms(planner.act, images)
        torch_ms = _median_ms(torch_decision, images)
        numpy_ms = _median_ms(NumpyPolicy(theta[0], family=family).choose, images)
        key = f"uav_conv{width}"
        out.update({f"{key}_weights": family.dim, f"{key}_runtime_ms": runtime,
                    f"{key}_torch_ms": torch_ms, f"{key}_numpy_ref_ms": numpy_ms,
                    f"{key}_goal_2ms_met": runtime <= 2.0})
    return out


def quadruped(folder: Path, n: int, threads: int) -> dict[str, float]:
    from pacplan.export import export_planner
    from pacplan.runtime import Planner
    from pacplan.worlds.quadruped.policy import policy_action

    planner = Planner.load(export_planner(ROOT / "results" / "quadruped", folder / "q"), threads)
    k = planner.start_episode(np.random.default_rng(1))
    from pacplan.pipeline.rundir import checked_policies

    theta = checked_policies(ROOT / "results" / "quadruped")[k]
    rng = np.random.default_rng(2)
    obs = [{"depth": rng.uniform(0.3, 10.0, (50, 50)).astype(np.float32),
            "proprio": rng.normal(0.0, 1.0, 22).astype(np.float32)} for _ in range(n)]
    runtime = _median_ms(planner.act, obs)
    ref = _median_ms(lambda o: policy_action(theta, o["depth"], o["proprio"]), obs)
    return {"quadruped_runtime_ms": runtime, "quadruped_numpy_ms": ref,
            "quadruped_numpy_over_runtime": ref / runtime}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime and torch threads")
    ap.add_argument("--conv-widths", default="1,8,16",
                    help="the conv family's policy_width values timed (comma-separated)")
    ap.add_argument("--worlds", default="uav,uav-conv,quadruped",
                    help="what to time, comma-separated (uav-conv uses uav's images)")
    args = ap.parse_args()
    worlds = set(args.worlds.split(","))
    widths = [int(w) for w in args.conv_widths.split(",") if w]
    with tempfile.TemporaryDirectory() as tmp:
        out: dict[str, Any] = {"decisions": args.decisions, "threads": args.threads}
        paper, images = uav(Path(tmp), args.decisions, args.threads)
        if "uav" in worlds:
            out.update(paper)
            out["uav_goal_1ms_met"] = out["uav_runtime_ms"] <= 1.0
        if "uav-conv" in worlds:
            out.update(uav_conv(images, widths, args.threads))
        if "quadruped" in worlds:
            out.update(quadruped(Path(tmp), args.decisions, args.threads))
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
