#!/usr/bin/env bash
# Run the tests as another x86-64 CPU would (docs/reproducibility.md, "Tests on any CPU"):
# OpenBLAS's Sandy Bridge kernels, NumPy without its AVX2/AVX-512 paths, PyTorch's scalar
# kernels, and NumPy's float64 exp/log/sin/power/… one ulp off in about half their results, as
# an AVX-512 CPU's vector kernels are (tests/other_libm.py). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_CORETYPE=Sandybridge
export NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR"
export ATEN_CPU_CAPABILITY=default
export PACPLAN_TEST_OTHER_LIBM=1
export PYTHONPATH="$PWD/tests/other_cpu_site${PYTHONPATH:+:$PYTHONPATH}"  # subprocesses too
exec .venv/bin/pytest "$@"
