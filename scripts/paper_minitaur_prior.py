"""Write the paper's published Minitaur prior as a pacplan prior file (for `--prior`).

    pacplan data paper            # fetches and hash-checks the paper's files (once)
    python scripts/paper_minitaur_prior.py paper-minitaur.safetensors
    pacplan run quadruped-paper-code --prior paper-minitaur.safetensors

Why a script: the paper's weights are not shipped with pacplan (`pacplan data paper` fetches
them, pinned by sha256), so a preset cannot name them; this writes μ and log σ² in pacplan's
layout (`paper_prior.from_paper_layout`: the last layer's outputs relabelled, an exact map) as
`save_prior` writes a trained prior. A run then draws its m policies from it as `pacplan run`
draws any prior's (seed `policies.seed`), not as the paper's code drew its own
(`paper_prior.paper_draws`, which benchmarks/quadruped_paper_code.py uses). The file records
the world its prior was trained in as the world pacplan rebuilds that code's experiment in
(`quadruped`, `variant: paper-code`, PyBullet), so a certificate anywhere else says "transfer".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pacplan.es.checkpoint import save_prior
from pacplan.io.paperdata import paper_data_dir
from pacplan.worlds.quadruped.paper_prior import load_paper_prior

TRAINED_IN = {"name": "quadruped", "options": {"variant": "paper-code", "physics": "bullet"}}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the .safetensors file to write")
    args = ap.parse_args(argv)
    folder = paper_data_dir()
    if folder is None:
        raise SystemExit("error: the paper's Minitaur prior is not here: run `pacplan data paper`")
    mu, logvar = load_paper_prior(folder)
    save_prior(args.out, mu, logvar, iteration=0, world=TRAINED_IN)
    print(args.out)


if __name__ == "__main__":
    main()
