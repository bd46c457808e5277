#!/usr/bin/env bash
# One-step, idempotent set-up: a local .venv with pacplan (editable) and its test tools.
# torch is pinned to the CPU build 2.13.0 (an unpinned torch pulls a multi-GB CUDA build);
# on a CUDA machine, install the torch you want into .venv first and this keeps it.
# The presets and shipped priors are package data (src/pacplan/presets/), so
# `.venv/bin/pacplan run uav-quick` works from any folder; a wheel (`python -m build`) carries them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.pacplan-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ runtime/pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install -q "torch==2.13.0"
  fi
  # pacplan depends on pacplan_runtime, which is not on a package index: it is runtime/ here,
  # installed first (editable, so an edit there is live) so that pip finds it satisfied.
  .venv/bin/python -m pip install -q -e ./runtime
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
.venv/bin/pacplan --version  # the console script starts
