"""The pinned artifacts of the toy and uav-quick presets and the check against them (the
history of each re-pin is in tests/pipeline/test_reproducible.py), shared by that file and the
wheel test that runs uav-quick from a fresh install."""

from __future__ import annotations

import json
from pathlib import Path

from pacplan.io.files import sha256_file
from pacplan.pipeline.compare import value_difference
from pacplan.pipeline.provenance import verify_certificate as verify

TOY = {
    "prior.safetensors": "a88a205d97fbae837ed1ab5bd1deef7c5041117217c7c1e7b63551d6200336fc",
    "policies.npy": "c44671b0f011899941641c15ad16cb993210427c7fa2cc8645e7841d02776373",
    "costs/cert.npy": "c02dd9748fd67a2f89571532519c816b841888a20a7f74ec89f0ff5178023b2e",
    "costs/test.npy": "beb918859277e888ae0dd292779502e585fd5aee2ae0757ef82f2a0e9be92338",
}

UAV_QUICK = {  # re-pinned on purpose: the shipped `uav` prior became the conv student (issue 52)
    "prior.safetensors": "493180ae624ce56f64bd4aa179a8e5a37996b2729f3bf65046fe7fe9dc5a5933",
    "policies.npy": "93b86a7c4c7abcca64ef45a987f0f8ad352d6ed1bf267a4d9cdf94e2ef8d7c07",
    "costs/cert.npy": "771c7bb94c6aaec335d70fd43e2e31aaf23bbc55679ed9f87b26955ea2e020cb",
    "costs/test.npy": "97b63a950d24dc7d232f3a40aaf0343cad3019aed028504ae2553b75abe0ef86",
    "costs/baseline-depth-filter-only.npy":  # no prior involved: unchanged since issue 10
        "c89c973aefa6651b671a177b647c5d41ff7743d61fb70f0c37cabd17c89ca9a8",
}

PINNED = Path(__file__).resolve().parent / "data" / "pinned"


def check_pinned(run_dir: Path, pinned: dict[str, str], certificates: Path) -> None:
    """Byte-identical artifacts by sha256; certificates by value against the reference files."""
    got = {name: sha256_file(run_dir / name) for name in pinned}
    assert got == pinned
    references = sorted(certificates.glob("N*.json"))
    assert references, f"no reference certificates in {certificates}"
    for reference in references:
        made = json.loads((run_dir / "certificates" / reference.name).read_text())
        assert value_difference(json.loads(reference.read_text()), made) is None, reference.name
    verify(run_dir / "certificate.json")
