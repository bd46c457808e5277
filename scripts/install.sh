#!/usr/bin/env bash
# One-step, idempotent set-up: a local .venv with pacplan (editable), every extra and the test
# tools (`.[dev]`), so the README's two commands need nothing else.
# torch 2.13.0: on Linux without an NVIDIA GPU (no `nvidia-smi`), the CPU build from PyTorch's
# CPU wheel index when that answers within a few seconds (the default index's Linux torch pulls
# ~3 GB of CUDA libraries), else the pin from the default index; with a GPU, the default
# index's build (CUDA on Linux), and a line saying how to pick another CUDA build. A torch
# already in .venv is kept, so install the build you want first if this is not it.
# PACPLAN_TORCH_CPU_INDEX names another CPU index (a mirror); empty skips it.
# The presets and shipped priors are package data (src/pacplan/presets/), so
# `.venv/bin/pacplan run uav-quick` works from any folder; a wheel (`python -m build`) carries them.
set -euo pipefail

TORCH_PIN="torch==2.13.0"
TORCH_CPU_INDEX=${PACPLAN_TORCH_CPU_INDEX-https://download.pytorch.org/whl/cpu}

# Exit 0 if the index at $1 answers within 5 seconds (its torch page, via python: no curl needed).
index_reachable() {
  [ -n "$1" ] || return 1
  "$PY" - "$1" <<'EOF' >/dev/null 2>&1
import sys
import urllib.request

urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=5).close()
EOF
}

# Print the `pip install` arguments for torch on this machine, one per line; say why on stderr.
torch_pip_args() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "install.sh: NVIDIA GPU found: $TORCH_PIN from the default index (its CUDA build on" \
         "Linux); for another CUDA version install torch from https://pytorch.org/get-started/locally/" \
         "into .venv first, and this script keeps it" >&2
    printf '%s\n' "$TORCH_PIN"
  elif [ "$(uname -s)" = Linux ] && index_reachable "$TORCH_CPU_INDEX"; then
    echo "install.sh: no GPU: the CPU build of $TORCH_PIN from $TORCH_CPU_INDEX" >&2
    # an extra index, so torch's own dependencies still come from the default one; the +cpu
    # local version is on the CPU index only
    printf '%s\n' --extra-index-url "$TORCH_CPU_INDEX" "$TORCH_PIN+cpu"
  else
    if [ "$(uname -s)" = Linux ]; then
      echo "install.sh: PyTorch's CPU index is not reachable: $TORCH_PIN from the default index" >&2
    fi
    printf '%s\n' "$TORCH_PIN"
  fi
}

main() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
  fi
  local stamp=.venv/.pacplan-installed
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ runtime/pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    if ! .venv/bin/python -c "import torch" 2>/dev/null; then
      local args
      mapfile -t args < <(torch_pip_args)
      .venv/bin/python -m pip install -q "${args[@]}"
    fi
    # pacplan depends on pacplan_runtime, which is not on a package index: it is runtime/ here,
    # installed first (editable, so an edit there is live) so that pip finds it satisfied.
    .venv/bin/python -m pip install -q -e ./runtime
    .venv/bin/python -m pip install -q -e ".[dev]"
    touch "$stamp"
  fi
  .venv/bin/pacplan --version  # the console script starts
}

PY=${PYTHON:-python3}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then  # run, not sourced (tests/test_install_script.py sources it)
  main "$@"
fi
