#!/usr/bin/env bash
# One-step, idempotent set-up: a local .venv with pacplan and its test tools.
# torch is pinned to the CPU build 2.13.0 (an unpinned torch pulls a multi-GB CUDA build);
# on a CUDA machine, install the torch you want into .venv first and this keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.pacplan-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    .venv/bin/python -m pip install -q "torch==2.13.0"
  fi
  .venv/bin/python -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
