"""`pacplan monitor`'s throughput: the per-episode path against the streamed, blocked one, one
JSON object.

    python benchmarks/monitor_throughput.py [--episodes 200000] [--old-episodes 3000] [--quick]

Three cost families (certified c = 0.12, alpha = 0.01): UAV-like at mean 12 % (0 in 76 % of
episodes, else uniform on [0, 1]), Bernoulli at 12 %, and dense costs (normal(0.12, 0.1)
clipped to [0, 1]: nearly every cost nonzero, mean 12.7 %, so it alarms). For each, a log of
`--episodes` lines is written and:

- old: the whole file read and parsed at once, then `CertificateMonitor.update` one episode
  at a time (what `pacplan monitor` did), on the first `--old-episodes` lines only (at its
  rate the whole log takes many minutes; its cost per episode does not depend on the episode);
- new: `pacplan monitor`'s reader (`pacplan.cli.monitor.iter_costs`, line by line) feeding
  `update_many`, on the same first lines and on the whole log;
- same: whether both give the same alarm episode and lower bound on the shared lines.

Both are timed in this one process under the same machine load, so the ratio is the figure to
trust. `projected_1gb_hours` scales each rate to a 1 GB log of this family's lines.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from pacplan.cli.monitor import iter_costs
from pacplan.runtime import CertificateMonitor

CERTIFIED, ALPHA = 0.12, 0.01


def costs(family: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if family == "uav_like":
        return np.where(rng.random(n) < 2 * CERTIFIED, rng.random(n), 0.0)
    if family == "bernoulli":
        return (rng.random(n) < CERTIFIED).astype(np.float64)
    return np.clip(rng.normal(CERTIFIED, 0.1, n), 0.0, 1.0)


def old_path(path: Path, episodes: int) -> tuple[float, CertificateMonitor]:
    """Seconds for the first `episodes` lines the old way: read whole, parse, update each."""
    t0 = time.perf_counter()
    lines = path.read_text(encoding="utf-8").splitlines()[:episodes]
    values = np.asarray([float(line) for line in lines if line.strip()])
    monitor = CertificateMonitor(CERTIFIED, ALPHA)
    for x in values:
        monitor.update(float(x))
    return time.perf_counter() - t0, monitor


def new_path(path: Path) -> tuple[float, CertificateMonitor]:
    """Seconds for the whole file `pacplan monitor`'s way: streamed, fed in blocks."""
    t0 = time.perf_counter()
    monitor = CertificateMonitor(CERTIFIED, ALPHA)
    for block in iter_costs(path):
        monitor.update_many(block)
    return time.perf_counter() - t0, monitor


def family_figures(family: str, episodes: int, old_episodes: int, folder: Path) -> dict:
    x = costs(family, episodes, np.random.default_rng(0))
    full, head = folder / f"{family}.csv", folder / f"{family}-head.csv"
    full.write_text("".join(f"{v:.6g}\n" for v in x))
    head.write_text("".join(f"{v:.6g}\n" for v in x[:old_episodes]))
    t_old, old = old_path(head, old_episodes)
    t_head, new_head = new_path(head)
    t_new, new = new_path(full)
    bytes_per_line = full.stat().st_size / episodes
    old_rate, head_rate, new_rate = old_episodes / t_old, old_episodes / t_head, episodes / t_new
    return {
        "old_episodes_per_s": round(old_rate, 1),
        "new_episodes_per_s_same_lines": round(head_rate, 1),
        "new_episodes_per_s_whole_log": round(new_rate, 1),
        "ratio_same_lines": round(head_rate / old_rate, 1),
        "ratio_whole_log": round(new_rate / old_rate, 1),
        "same_alarm_and_bound": (old.alarm_episode == new_head.alarm_episode
                                 and old.lower == new_head.lower),
        "whole_log": {"episodes": new.episodes, "alarm_episode": new.alarm_episode,
                      "lower": new.lower},
        "projected_1gb_hours": {
            "old": round(2**30 / bytes_per_line / old_rate / 3600, 2),
            "new": round(2**30 / bytes_per_line / new_rate / 3600, 2)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=200_000, help="lines of each log")
    ap.add_argument("--old-episodes", type=int, default=3000,
                    help="lines timed on the old per-episode path")
    ap.add_argument("--quick", action="store_true", help="20,000 and 1,000 lines: a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.episodes, args.old_episodes = 20_000, 1000
    out: dict = {"certified": CERTIFIED, "alpha": ALPHA, "episodes": args.episodes,
                 "old_episodes": args.old_episodes,
                 "machine": {"cpus": os.cpu_count(), "load_avg_1min": os.getloadavg()[0]}}
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("uav_like", "bernoulli", "dense"):
            out[family] = family_figures(family, args.episodes, args.old_episodes, Path(tmp))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
