"""Policy kinds are an enum dispatched on, while certificates keep recording the same text
('sb3 PPO MLP (tanh)'), so every folder already written still reads, exports and verifies."""

from __future__ import annotations

import pytest

from pacplan.policy_certification.kinds import PolicyKind
from pacplan.policy_certification.policies import ImportedPolicy


@pytest.mark.parametrize(("kind", "detail", "recorded"), [
    (PolicyKind.ONNX, "", "onnx"),
    (PolicyKind.CALLABLE, "", "callable"),
    (PolicyKind.SB3, "PPO MLP (tanh)", "sb3 PPO MLP (tanh)"),
    (PolicyKind.SB3, "model with VecNormalize", "sb3 model with VecNormalize"),
    (PolicyKind.TORCH, "module", "torch module"),
])
def test_the_recorded_text_is_unchanged_and_reads_back(kind: PolicyKind, detail: str,
                                                       recorded: str) -> None:
    policy = ImportedPolicy("p", kind, "0" * 64, lambda obs: 0, detail=detail)
    assert policy.record()["kind"] == recorded
    assert PolicyKind.of(recorded) is kind


@pytest.mark.parametrize("text", ["", "sb3PPO", "onnx-ish", "python function", None, 3])
def test_any_other_record_is_no_kind(text: object) -> None:
    """A hand-edited or foreign record names no kind: export refuses it by its text."""
    assert PolicyKind.of(text) is None


def test_what_export_can_run() -> None:
    assert {k for k in PolicyKind if k.runtime_runs} == {PolicyKind.ONNX, PolicyKind.SB3}
    assert {k for k in PolicyKind if k.converted} == {PolicyKind.SB3}
