"""Is the quadruped student's 944-weight net too small? Offline regret and walking of four policy
classes distilled from the same look-ahead labels; ONE JSON object.

    nice -n 10 python benchmarks/quadruped_student_capacity.py
        [--labels runs/quadruped-taught-prior/distill] [--val-from SEED] [--walk 200]
        [--max-epochs 40] [--train-terrains K] [--save]

What it measures: the distillation folder's labels (`labels-*/*.npz`: every decision state of
the teacher's and the students' episodes with the look-ahead scores of the teacher's 12
candidate gaits, metres) are split by terrain seed (validation: seeds ≥ `--val-from`, default
the last 25 % of the terrain seeds). Four classes are fitted on the training terrains:

- the best constant gait (candidate 7, `teacher.BEST_CONSTANT_GAIT`; nothing fitted);
- the paper's 944-weight net fitted with the project's `pacplan.worlds.quadruped.distill.fit`
  as the stage runs it (from the best constant gait, kernel 0.02, 100 epochs, lr 0.01, batch
  64, seed 0); offline its η is scored at the nearest candidate;
- a 12-way classifier over the candidates, MLP 64×2 on the 22 proprioceptive values only;
- a 12-way classifier, MLP 256×2 on learned conv(1→4, k5, s5)+tanh depth features (the 944
  net's kind) + proprio.

The classifiers maximise the expected look-ahead score under their softmax (Adam 1e-3, weight
decay 1e-4, batch 128, torch seed 0); each picks its epoch count (≤ `--max-epochs`) on an inner
split of the training terrains (the last sixth of them) and is then refit on all training
terrains. Per class: weights, validation regret (best candidate's score − the picked one's,
metres; mean over states ± standard error clustered by terrain), fit seconds. Then `--walk N`
held-out prior_eval terrains from seed 300100 (0 skips): every class walks the same terrains in
the world `quadruped-paper` certifies (the Derpy in MuJoCo at 23.3°) through pacplan's own
rollout, asserted on 2 terrains to give `world.costs`'s costs exactly for the 944 net; mean
cost ± SE, finishes, falls, CPU seconds, and the paired per-terrain difference against the
constant gait walked in the same run.

Found (benchmarks/data/quadruped-student-capacity.json, the full stage's labels): bigger classes
do no better than the 6.4k-weight proprio-only MLP; no class gets far below the constant gait's
regret, and none walks more than 1.6 standard errors better than it. One torch thread, fixed
seeds: deterministic. Bad input (a missing folder, no label files, a file missing a key, a
split with no terrains on a side) is one line on stderr and exit 2. `--save` writes the JSON to
benchmarks/data/quadruped-student-capacity.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

OPTIONS = {"max_slope_deg": 23.3, "physics": "mujoco", "robot": "derpy"}
ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "runs" / "quadruped-taught-prior" / "distill"
SAVE = ROOT / "benchmarks" / "data" / "quadruped-student-capacity.json"
KEYS = ("seed", "primitive", "depth", "proprio", "scores", "cost")
WALK_FIRST_SEED = 300_100  # the quadruped presets' prior_eval seeds
CHECK_TERRAINS = 2
FIT944 = {"epochs": 100, "lr": 0.01, "batch": 64, "seed": 0}
N_CANDIDATES, N_PROPRIO, IMAGE = 12, 22, 50


class _BenchError(Exception):
    """Bad input to the benchmark: printed as one line, exit 2."""


# ---------------------------------------------------------------- labels


def load_labels(folder: Path) -> dict[str, np.ndarray]:
    """Every state of `folder`/labels-*/*.npz, with its round (the N of labels-N)."""
    if not folder.is_dir():
        raise _BenchError(f"no labels folder {folder}")
    files = sorted(folder.glob("labels-*/*.npz"), key=_file_order)
    if not files:
        raise _BenchError(f"no label files (labels-*/*.npz) in {folder}")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in (*KEYS[:-1], "round")}
    for path in files:
        try:
            with np.load(path, allow_pickle=False) as z:
                missing = [k for k in KEYS if k not in z.files]
                if missing:
                    raise _BenchError(f"{path}: no {missing[0]!r} array (a label file has "
                                      f"{', '.join(KEYS)})")
                arrays = {k: np.asarray(z[k]) for k in KEYS[:-1]}
        except _BenchError:
            raise
        except Exception as exc:  # a torn or foreign file
            raise _BenchError(f"{path}: not a label file ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
        k = len(arrays["seed"])
        shapes = {"seed": (k,), "primitive": (k,), "depth": (k, IMAGE, IMAGE),
                  "proprio": (k, N_PROPRIO), "scores": (k, N_CANDIDATES)}
        for key, shape in shapes.items():
            if arrays[key].shape != shape:
                raise _BenchError(f"{path}: {key} has shape {arrays[key].shape}, not {shape}")
        for key in shapes:
            parts[key].append(arrays[key])
        parts["round"].append(np.full(k, _round_of(path), dtype=np.int64))
    out = {key: np.concatenate(v) for key, v in parts.items()}
    out["seed"] = out["seed"].astype(np.int64)
    out["depth"] = out["depth"].astype(np.float32)
    out["proprio"] = out["proprio"].astype(np.float32)
    out["scores"] = out["scores"].astype(np.float64)
    if not np.isfinite(out["scores"]).all():
        raise _BenchError(f"{folder}: a label file has non-finite scores")
    return out


def _round_of(path: Path) -> int:
    m = re.fullmatch(r"labels-(\d+)", path.parent.name)
    return int(m.group(1)) if m else -1


def _file_order(path: Path) -> tuple[int, int, str]:
    stem = path.stem
    return (_round_of(path), int(stem) if stem.isdigit() else -1, stem)


def subset(d: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in d.items()}


def split_seed(seeds: np.ndarray, fraction: float) -> int:
    """The first seed of the last `1 − fraction` of the distinct terrain seeds."""
    uniq = np.unique(seeds)
    return int(uniq[min(len(uniq) - 1, int(np.floor(fraction * len(uniq))))])


# ---------------------------------------------------------------- regret


def regret_stats(picks: np.ndarray, d: dict[str, np.ndarray]) -> dict[str, Any]:
    """Mean regret (m) of the picked candidates, its SE clustered by terrain, and how often the
    pick's look-ahead falls (score < −5 m)."""
    s = d["scores"]
    rows = np.arange(len(s))
    r = s.max(1) - s[rows, picks]
    per = np.array([r[d["seed"] == u].mean() for u in np.unique(d["seed"])])
    se = float(per.std(ddof=1) / np.sqrt(len(per))) if len(per) > 1 else float("nan")
    return {"regret": round(float(r.mean()), 4), "regret_se": round(se, 4),
            "p_pick_falls": round(float((s[rows, picks] < -5).mean()), 4),
            "p_pick_best": round(float((r <= 1e-3).mean()), 4)}


# ---------------------------------------------------------------- the 12-way classifiers
# (a proprio-only MLP and a conv-features + proprio MLP, each scoring the 12 candidates)


def make_net(kind: str, hidden: int, ch: int = 2) -> Any:
    """'proprio': MLP hidden×2 on proprio; 'mlp': conv(1→ch, k5, s5)+tanh features + proprio →
    MLP hidden×2; 12 logits."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.use_img = kind != "proprio"
            n_img = 0
            if self.use_img:
                self.conv = nn.Sequential(nn.Conv2d(1, ch, 5, 5), nn.Tanh(), nn.Flatten())
                n_img = ch * (IMAGE // 5) ** 2
            self.head = nn.Sequential(nn.Linear(n_img + N_PROPRIO, hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU(),
                                      nn.Linear(hidden, N_CANDIDATES))

        def forward(self, img: torch.Tensor, prop: torch.Tensor) -> torch.Tensor:
            xs = [self.conv(img), prop] if self.use_img else [prop]
            return self.head(torch.cat(xs, 1))

    return Net()


CLASSIFIERS = {
    "proprio_mlp64": {"kind": "proprio", "hidden": 64},
    "conv_proprio_mlp256": {"kind": "mlp", "hidden": 256, "ch": 4},
}


def std_stats(d: dict[str, np.ndarray]) -> tuple[float, float, np.ndarray, np.ndarray]:
    """The inputs' scales as the project's fit takes them (`distill.input_scales`)."""
    from pacplan.worlds.quadruped.distill import input_scales

    return input_scales(d["depth"], d["proprio"])


def _tensors(depth: np.ndarray, proprio: np.ndarray,
             st: tuple[float, float, np.ndarray, np.ndarray]) -> tuple[Any, Any]:
    import torch

    dm, dsd, pm, psd = st
    img = torch.tensor((depth - dm) / dsd, dtype=torch.float32).unsqueeze(1)
    prop = torch.tensor((proprio - pm) / psd, dtype=torch.float32)
    return img, prop


def predict(model: Any, d: dict[str, np.ndarray],
            st: tuple[float, float, np.ndarray, np.ndarray]) -> np.ndarray:
    import torch

    img, prop = _tensors(d["depth"], d["proprio"], st)
    model.eval()
    with torch.no_grad():
        return torch.cat([model(img[i:i + 1024], prop[i:i + 1024])
                          for i in range(0, len(img), 1024)]).argmax(1).numpy()


def train(spec: dict[str, Any], dtr: dict[str, np.ndarray], epochs: int,
          st: tuple[float, float, np.ndarray, np.ndarray],
          dva: dict[str, np.ndarray] | None = None, seed: int = 0) -> tuple[Any, list[float]]:
    """Maximise the expected look-ahead score under the softmax; with `dva`, the regret on it
    after every epoch."""
    import torch

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = make_net(**spec)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    img, prop = _tensors(dtr["depth"], dtr["proprio"], st)
    y = torch.tensor(dtr["scores"], dtype=torch.float32)
    curve = []
    for _ in range(epochs):
        model.train()
        order = torch.randperm(len(y), generator=gen)
        for s0 in range(0, len(y), 128):
            idx = order[s0:s0 + 128]
            loss = -(torch.softmax(model(img[idx], prop[idx]), 1) * y[idx]).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        if dva is not None:
            s = dva["scores"]
            p = predict(model, dva, st)
            curve.append(float((s.max(1) - s[np.arange(len(s)), p]).mean()))
    return model, curve


# ---------------------------------------------------------------- the classes


def fit_classes(tr: dict[str, np.ndarray], va: dict[str, np.ndarray], max_epochs: int
                ) -> tuple[dict[str, Any], dict[str, Callable[..., Any]], dict[str, Any]]:
    """Every class's record and its controller factory (for the walk)."""
    from pacplan.pipeline.prior.distill_quadruped import KERNEL, start_theta
    from pacplan.worlds.quadruped.distill import Labelled, candidate_etas, fit
    from pacplan.worlds.quadruped.policy import policy_output
    from pacplan.worlds.quadruped.rollout import fixed_gait_controller, policy_controller
    from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT, TeacherConfig

    cands = TeacherConfig().candidates
    etas = candidate_etas(TeacherConfig())
    const = cands.index(BEST_CONSTANT_GAIT)
    records: dict[str, Any] = {}
    controllers: dict[str, Callable[..., Any]] = {}
    extra: dict[str, Any] = {}

    records["best_constant_gait"] = {"candidate": const, "weights": 0, "fit_seconds": 0.0,
                                     "val": regret_stats(np.full(len(va["seed"]), const), va)}
    controllers["best_constant_gait"] = lambda: fixed_gait_controller(BEST_CONSTANT_GAIT)

    w0, c0 = time.perf_counter(), time.process_time()
    lab = Labelled(tr["seed"], tr["primitive"], tr["depth"], tr["proprio"], tr["scores"])
    theta, losses = fit(start_theta(), lab, lab.scores, etas, kernel=KERNEL, **FIT944)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    eta = np.stack([policy_output(theta, va["depth"][i], va["proprio"][i])
                    for i in range(len(va["seed"]))])
    d2 = ((eta[:, None, :] - etas[None]) ** 2).sum(-1)
    picks = np.argmin(d2, 1)
    near = np.exp(-(d2 - d2.min(1, keepdims=True)) / KERNEL)
    near /= near.sum(1, keepdims=True)
    kernel_regret = float((va["scores"].max(1) - (near * va["scores"]).sum(1)).mean())
    theta32 = np.asarray(theta, dtype=np.float32)
    records["net944_fit"] = {
        "weights": int(theta.size), "fit": {**FIT944, "kernel": KERNEL},
        "fit_seconds": round(wall, 1), "fit_cpu_s": round(cpu, 1),
        "final_loss": round(float(losses[-1]), 4),
        "val": {**regret_stats(picks, va),
                "kernel_expected_regret": round(kernel_regret, 4),
                "eta_median_distance_to_nearest_candidate":
                    round(float(np.median(np.sqrt(d2.min(1)))), 4)}}
    controllers["net944_fit"] = lambda: policy_controller(theta32)
    extra["theta944"] = theta32

    inner_from = split_seed(tr["seed"], 5 / 6)
    itr = subset(tr, tr["seed"] < inner_from)
    iva = subset(tr, tr["seed"] >= inner_from)
    st_inner, st_full = std_stats(itr), std_stats(tr)
    extra["inner_split"] = {"train_seeds": [int(itr["seed"].min()), int(itr["seed"].max())],
                            "val_seeds": [int(iva["seed"].min()), int(iva["seed"].max())]}
    for name, spec in CLASSIFIERS.items():
        w0, c0 = time.perf_counter(), time.process_time()
        _, curve = train(spec, itr, max_epochs, st_inner, dva=iva)
        epochs = int(np.argmin(curve)) + 1
        w1, c1 = time.perf_counter(), time.process_time()
        model, _ = train(spec, tr, epochs, st_full)
        w2, c2 = time.perf_counter(), time.process_time()
        records[name] = {
            "weights": sum(p.numel() for p in model.parameters()), "spec": spec,
            "epochs": epochs, "max_epochs": max_epochs,
            "fit_seconds": round(w2 - w1, 1), "fit_cpu_s": round(c2 - c1, 1),
            "select_seconds": round(w1 - w0, 1), "select_cpu_s": round(c1 - c0, 1),
            "val": regret_stats(predict(model, va, st_full), va)}
        controllers[name] = _classifier_controller(model, st_full, cands)

    base = records["best_constant_gait"]["val"]["regret"]
    for rec in records.values():
        rec["val"]["regret_vs_const"] = round(rec["val"]["regret"] - base, 4)
    return records, controllers, extra


def _classifier_controller(model: Any, st: tuple[float, float, np.ndarray, np.ndarray],
                           cands: list[Any]) -> Callable[[], Callable[..., Any]]:
    import torch

    dm, dsd, pm, psd = st

    def make() -> Callable[..., Any]:
        model.eval()

        def control(depth: np.ndarray, proprio: np.ndarray) -> Any:
            img = torch.tensor((np.asarray(depth, np.float32) - dm) / dsd,
                               dtype=torch.float32)[None, None]
            prop = torch.tensor((np.asarray(proprio, np.float32) - pm) / psd,
                                dtype=torch.float32)[None]
            with torch.no_grad():
                return cands[int(model(img, prop).argmax(1))]
        return control
    return make


# ---------------------------------------------------------------- walking


def walk(controllers: dict[str, Callable[..., Any]], theta944: np.ndarray, n: int
         ) -> dict[str, Any]:
    """Every class on the same n held-out terrains through `world.run` (what world.costs runs
    for a θ); the 944 net's route checked against world.costs."""
    from pacplan.worlds.base import make_world

    world = make_world("quadruped", **OPTIONS)
    seeds = np.arange(WALK_FIRST_SEED, WALK_FIRST_SEED + n)
    check = seeds[:CHECK_TERRAINS]
    reference = world.costs(theta944[None], check).ravel()
    ctrl = controllers["net944_fit"]()
    own = np.array([world.run(ctrl, int(s)).cost for s in check])
    assert np.array_equal(own, reference), (own, reference)
    out: dict[str, Any] = {"terrains": [int(seeds[0]), int(seeds[-1]) + 1], "n": n,
                           "check_944_vs_world_costs": {"terrains": len(check),
                                                        "max_abs_diff": 0.0},
                           "classes": {}}
    costs: dict[str, np.ndarray] = {}
    for name, make in controllers.items():
        w0, c0 = time.perf_counter(), time.process_time()
        control = make()
        results = [world.run(control, int(s)) for s in seeds]
        c = np.array([r.cost for r in results], dtype=np.float64)
        costs[name] = c
        out["classes"][name] = {
            "mean_cost": round(float(c.mean()), 4), "se": round(_se(c), 4),
            "finishes": int(sum(r.finished for r in results)),
            "falls": int(sum(r.fell for r in results)),
            "seconds": round(time.perf_counter() - w0, 1),
            "cpu_s": round(time.process_time() - c0, 1)}
    world.close()
    base = costs["best_constant_gait"]
    for name, c in costs.items():
        d = c - base
        out["classes"][name]["minus_const"] = round(float(d.mean()), 4)
        out["classes"][name]["minus_const_se"] = round(_se(d), 4)
    return out


def _se(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


# ---------------------------------------------------------------- main


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.walk < 0:
        raise _BenchError("--walk must be ≥ 0 (0 skips the walk)")
    if args.max_epochs < 1:
        raise _BenchError("--max-epochs must be ≥ 1")
    data = load_labels(args.labels)
    val_from = split_seed(data["seed"], 0.75) if args.val_from is None else args.val_from
    tr = subset(data, data["seed"] < val_from)
    va = subset(data, data["seed"] >= val_from)
    if args.train_terrains is not None:  # a learning curve: the first K training terrains
        if args.train_terrains < 2:
            raise _BenchError("--train-terrains must be ≥ 2")
        keep = np.unique(tr["seed"])[: args.train_terrains]
        tr = subset(tr, np.isin(tr["seed"], keep))
    n_tr, n_va = len(np.unique(tr["seed"])), len(np.unique(va["seed"]))
    if n_tr < 2 or n_va < 2:
        raise _BenchError(f"--val-from {val_from} leaves {n_tr} training and {n_va} "
                          f"validation terrains; each side needs at least 2")

    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    records, controllers, extra = fit_classes(tr, va, args.max_epochs)
    out: dict[str, Any] = {
        "benchmark": "quadruped_student_capacity", "labels": _shown(args.labels),
        "split": {"val_from": val_from, "train_terrains": n_tr, "val_terrains": n_va,
                  "train_states": len(tr["seed"]), "val_states": len(va["seed"]),
                  "val_states_by_round": {str(r): int((va["round"] == r).sum())
                                          for r in np.unique(va["round"])},
                  "inner": extra["inner_split"]},
        "regret": "best candidate's look-ahead score minus the picked one's (m), validation "
                  "states, SE clustered by terrain",
        "classes": records}
    if args.walk:
        out["world"] = OPTIONS
        out["walk"] = walk(controllers, extra["theta944"], args.walk)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    out["torch_threads"] = torch.get_num_threads()
    return out


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path, default=LABELS,
                    help="a distillation folder (labels-*/*.npz)")
    ap.add_argument("--val-from", type=int, default=None,
                    help="first validation terrain seed (default: the last 25 %% of seeds)")
    ap.add_argument("--walk", type=int, default=200,
                    help="held-out terrains to walk from seed 300100 (0: skip)")
    ap.add_argument("--max-epochs", type=int, default=40,
                    help="the classifiers' epoch limit for the inner-split selection")
    ap.add_argument("--train-terrains", type=int, default=None,
                    help="fit on only the first K training terrains (a learning curve)")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args(argv)
    try:
        out = run(args)
    except _BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    text = json.dumps(out)
    print(text)
    if args.save:
        SAVE.write_text(text + "\n")


if __name__ == "__main__":
    main()
