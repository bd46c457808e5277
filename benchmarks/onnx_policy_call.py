"""What running `.onnx` policies in a child process costs per action, against onnxruntime in the
calling process, in one run, as one JSON object.

    python benchmarks/onnx_policy_call.py [--calls 20000] [--hidden 64]

Why: certify-policy runs each `.onnx` policy in a child process it can kill at the 10 s limit
(onnxruntime stops a call only between nodes, so one slow node outlasted the limit); each
action then crosses a pipe. The baseline is the same model in an in-process session with the
same options (one thread, graph optimizations off), fed the same observations. Both include
what certify-policy does around the call (the float32 batch in, the first output out);
`OnnxPolicy.act` also flattens the observation and takes the argmax.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np


def _model(path: Path, hidden: int) -> None:
    """A CartPole MLP, 4 → hidden → 2, tanh, as SB3 exports one."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=s).astype(np.float32), n)
             for n, s in (("w1", (hidden, 4)), ("w2", (2, hidden)))]
    nodes = [helper.make_node("Gemm", ["obs", "w1"], ["h"], transB=1),
             helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Gemm", ["t", "w2"], ["out"], transB=1)]
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("obs", TensorProto.FLOAT,
                                                             ["batch", 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args()
    import onnxruntime as ort

    from pacplan.policy_certification.onnx_file import OnnxPolicy

    env = gym.make("CartPole-v1")
    obs = np.random.default_rng(1).normal(size=(args.calls, 4)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.onnx"
        _model(path, args.hidden)
        data = path.read_bytes()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        start = time.perf_counter()
        direct = [int(np.argmax(session.run(None, {"obs": o.reshape(1, -1)})[0]))
                  for o in obs]
        in_process = time.perf_counter() - start
        policy = OnnxPolicy(str(path), data, env.observation_space, env.action_space)
        start = time.perf_counter()
        child = [int(policy.act(o)) for o in obs]
        in_child = time.perf_counter() - start
    print(json.dumps({
        "benchmark": "onnx_policy_call", "calls": args.calls, "hidden": args.hidden,
        "same_actions": direct == child,
        "us_per_call": {"in_process_session": round(1e6 * in_process / args.calls, 1),
                        "child_process": round(1e6 * in_child / args.calls, 1)},
        "ratio_child_over_in_process": round(in_child / in_process, 2)}))


if __name__ == "__main__":
    main()
