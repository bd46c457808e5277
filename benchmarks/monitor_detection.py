"""How fast `CertificateMonitor` flags a 12 % → 20 % shift, against baselines; one JSON object.

    python benchmarks/monitor_detection.py [--quick] [--streams S] [--alpha A]

Certified cost c = 0.12; deployed costs have mean 0.20 (shifted) or exactly 0.12 (the worst case
for false alarms). Two cost families: Bernoulli (0/1: the largest variance for a mean) and
UAV-like (0 with probability 1 − 2μ, else uniform on [0, 1]; the shipped UAV planner's costs
are 0 in 82 % of episodes and spread over (0, 1) otherwise). All on the same streams, in this
one run:

- monitor: the alarm episode of `CertificateMonitor` (via its vectorised statistic
  `log_evidence`; a test checks they agree), median over streams;
- plain grid mixture: the same betting e-process with equal weights on bet fractions
  u ∈ (0, 1) (the untuned mixture), median alarm episode;
- oracle SPRT: the likelihood ratio that *knows* the shifted distribution (not available in
  practice; the floor for scale);
- Hoeffding fixed-sample test (Farid et al., CoRL 2021): flag when the mean of n episodes
  exceeds c + sqrt(ln(1/α) / 2n), valid for one look at a fixed n: the n at which it flags
  with probability 0.5 (comparable to a median) and 0.95; and its false-alarm rate when it is,
  wrongly, checked after every episode;
- false alarms of the monitor at mean exactly c over `null_episodes` episodes.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from pacplan.runtime.monitor import log_evidence

CERTIFIED, SHIFTED = 0.12, 0.20


def costs(family: str, mean: float, shape: tuple[int, int], rng: np.random.Generator
          ) -> np.ndarray:
    """Independent costs with the given mean: Bernoulli, or UAV-like (0 or uniform)."""
    if family == "bernoulli":
        return (rng.random(shape) < mean).astype(np.float64)
    hit = rng.random(shape) < 2 * mean
    return np.where(hit, rng.random(shape), 0.0)


def first_crossing(log_stat: np.ndarray, level: float) -> np.ndarray:
    """Episode (1-based) each stream first reaches `level`; inf if never."""
    hit = log_stat >= level
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.inf)


def plain_mixture(x: np.ndarray, c: float) -> np.ndarray:
    """log wealth of the equal-weight mixture over 79 bet fractions u ∈ (0, 1)."""
    u = np.arange(1, 80) / 80
    out = None
    for uk in u:
        w = np.cumsum(np.log((1 - uk) + uk * x / c), axis=1) - np.log(u.size)
        out = w if out is None else np.logaddexp(out, w)
    return out


def oracle(x: np.ndarray, family: str, c: float, mu: float) -> np.ndarray:
    """log likelihood ratio of the true shifted distribution against the one at mean c."""
    if family == "bernoulli":
        step = np.where(x > 0, np.log(mu / c), np.log((1 - mu) / (1 - c)))
    else:
        step = np.where(x > 0, np.log(mu / c), np.log((1 - 2 * mu) / (1 - 2 * c)))
    return np.cumsum(step, axis=1)


def hoeffding(x: np.ndarray, c: float, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(n, P(the one-look test at n flags)) for every n, and each stream's flags."""
    n = np.arange(1, x.shape[1] + 1)
    flag = np.cumsum(x, axis=1) / n > c + np.sqrt(np.log(1 / alpha) / (2 * n))
    return flag.mean(axis=0), flag


def median(t: np.ndarray) -> float | None:
    m = float(np.median(t))
    return m if np.isfinite(m) else None


def run(family: str, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, Any]:
    level = np.log(1 / args.alpha)
    x = costs(family, SHIFTED, (args.streams, args.episodes), rng)
    t0 = time.perf_counter()
    monitor = first_crossing(log_evidence(x, CERTIFIED), level)
    monitor_s = time.perf_counter() - t0
    plain = first_crossing(plain_mixture(x, CERTIFIED), level)
    sprt = first_crossing(oracle(x, family, CERTIFIED, SHIFTED), level)
    power, _ = hoeffding(x, CERTIFIED, args.alpha)
    n50 = int(np.argmax(power >= 0.5)) + 1 if (power >= 0.5).any() else None
    n95 = int(np.argmax(power >= 0.95)) + 1 if (power >= 0.95).any() else None
    null = costs(family, CERTIFIED, (args.null_streams, args.null_episodes), rng)
    false_monitor = np.isfinite(first_crossing(log_evidence(null, CERTIFIED), level))
    _, flags = hoeffding(null, CERTIFIED, args.alpha)
    m, p = median(monitor), median(plain)
    return {
        "monitor_median_episodes": m,
        "monitor_quartiles": [float(v) for v in np.percentile(monitor, [25, 75])],
        "monitor_detected_within": float(np.isfinite(monitor).mean()),
        "plain_mixture_median_episodes": p,
        "oracle_sprt_median_episodes": median(sprt),
        "hoeffding_fixed_n_power50": n50,
        "hoeffding_fixed_n_power95": n95,
        "ratio_monitor_to_plain_mixture": None if m is None or p is None else m / p,
        "ratio_monitor_to_oracle": None if m is None or not median(sprt) else m / median(sprt),
        "ratio_monitor_to_hoeffding_n50": None if m is None or n50 is None else m / n50,
        "monitor_false_alarm_rate": float(false_monitor.mean()),
        "monitor_false_alarm_se": float(np.sqrt(args.alpha * (1 - args.alpha)
                                                / args.null_streams)),
        "hoeffding_every_episode_false_alarm_rate": float(flags.any(axis=1).mean()),
        "monitor_seconds": round(monitor_s, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer streams and episodes")
    ap.add_argument("--streams", type=int, default=2000)
    ap.add_argument("--episodes", type=int, default=1500, help="horizon of the shifted streams")
    ap.add_argument("--null-streams", type=int, default=1000)
    ap.add_argument("--null-episodes", type=int, default=5000)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.quick:
        args.streams, args.episodes, args.null_streams, args.null_episodes = 500, 800, 300, 1000
    rng = np.random.default_rng(args.seed)
    out = {"certified": CERTIFIED, "shifted": SHIFTED, "alpha": args.alpha,
           "streams": args.streams, "episodes": args.episodes,
           "null_streams": args.null_streams, "null_episodes": args.null_episodes,
           "goals": {"bernoulli": 200, "uav_like": 130}}
    for family in ("bernoulli", "uav_like"):
        out[family] = run(family, args, rng)
        out[family]["goal_met"] = (out[family]["monitor_median_episodes"] is not None and
                                   out[family]["monitor_median_episodes"]
                                   <= out["goals"][family])
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
