"""A hostile `.onnx` policy cannot hang pacplan: control flow is refused from the protobuf before
onnxruntime sees it, every call runs under a deadline that stops it (one slow node too),
SIGINT/SIGTERM stop a call in flight, and a non-finite output or one that is not numbers is
refused rather than turned into an action. The
models are built here with `onnx.helper`, so each holds exactly the operators a test needs."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.policy_certification import onnx_file
from pacplan.policy_certification.policies import load_policy

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
helper, numpy_helper, T = onnx.helper, onnx.numpy_helper, onnx.TensorProto

CARTPOLE = gym.make("CartPole-v1")


def _const(name: str, value: object, dtype: type = np.float32) -> object:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _save(tmp_path: Path, nodes: list, inits: list, out: str = "out", obs_dim: int = 4,
          functions: tuple = (), name: str = "m.onnx", out_type: int = T.FLOAT) -> Path:
    graph = helper.make_graph(
        nodes, "policy", [helper.make_tensor_value_info("obs", T.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info(out, out_type, None)], inits)
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(f.domain, 1)
                                               for f in functions]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = 8
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def _load(path: Path, env: gym.Env = CARTPOLE) -> object:
    return load_policy(str(path), env.observation_space, env.action_space)


def _loop(tmp_path: Path, trip_count: int | None, name: str = "loop.onnx") -> Path:
    """A Loop adding 0 to the scores `trip_count` times (None: while true, for ever)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "zero"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", T.INT64, []),
         helper.make_tensor_value_info("cond_in", T.BOOL, []),
         helper.make_tensor_value_info("v_in", T.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []),
         helper.make_tensor_value_info("v_out", T.FLOAT, [1, 2])],
        [_const("zero", np.zeros((1, 2)))])
    trip = "" if trip_count is None else "trip"
    nodes = [helper.make_node("Loop", [trip, "cond", "start"], ["out"], name="spin", body=body)]
    inits = [_const("cond", True, np.bool_), _const("start", [[0.0, 1.0]]),
             _const("trip", trip_count or 0, np.int64)]
    return _save(tmp_path, nodes, inits, name=name)


def test_control_flow_is_refused_from_the_protobuf(tmp_path: Path) -> None:
    # 100,000 turns, a stand-in for an endless loop: today's reader runs them and acts
    with pytest.raises(PacplanError) as info:
        _load(_loop(tmp_path, 100_000))
    text = str(info.value)
    assert "\n" not in text and "loop.onnx" in text and "'spin' (Loop)" in text, text
    # an If hidden in a model-local function the graph calls
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "b", [],
                               [helper.make_tensor_value_info("y", T.FLOAT, None)])
    fn = helper.make_function("user.fns", "Choose", ["x", "c"], ["y"],
                              [helper.make_node("If", ["c"], ["y"], then_branch=branch,
                                                else_branch=branch)],
                              [helper.make_opsetid("", 17)])
    path = _save(tmp_path, [helper.make_node("Choose", ["obs", "c"], ["out"], domain="user.fns",
                                             name="choose")],
                 [_const("c", True, np.bool_)], functions=(fn,), name="fn.onnx")
    with pytest.raises(PacplanError, match=r"fn\.onnx: node #0 \(If\) in its function "
                                           r"user\.fns\.Choose is control flow"):
        _load(path)
    # any node carrying a subgraph (onnxruntime's contrib BeamSearch loops over one)
    beam = helper.make_node("BeamSearch", ["obs"], ["out"], domain="com.microsoft",
                            name="search", decoder=branch)
    with pytest.raises(PacplanError, match=r"node 'search' \(BeamSearch\) in its graph"):
        _load(_save(tmp_path, [beam], [], name="beam.onnx"))
    scan = helper.make_node("Scan", ["obs"], ["out"], name="scan", body=branch,
                            num_scan_inputs=1)
    with pytest.raises(PacplanError, match=r"'scan' \(Scan\)"):
        _load(_save(tmp_path, [scan], [], name="scan.onnx"))


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """A 0.5 s limit per call instead of 10 s."""
    monkeypatch.setattr(onnx_file, "RUN_LIMIT_S", 0.5)
    yield 0.5


def test_an_endless_loop_past_the_static_check_is_stopped_at_the_limit(
        tmp_path: Path, limit: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline really stops an endless Loop (the second line of defence): the child
    running it is killed."""
    monkeypatch.setattr(onnx_file, "check_graph", lambda path, data: None)
    start = time.monotonic()
    with pytest.raises(PacplanError) as info:
        _load(_loop(tmp_path, None))
    text = str(info.value)
    assert "\n" not in text and "loop.onnx" in text and "0.5 s limit" in text, text
    assert "zero observation at load" in text
    assert time.monotonic() - start < limit + 6.0  # a fresh child's start-up counts here too


def _slow(tmp_path: Path, nodes: int = 3000, size: int = 512) -> Path:
    """No control flow, but work that grows with the observation: a chain of `nodes` MatMuls
    of a (size·obs[0], size) matrix by a (size, size) one, built at run time (no initializer
    to fold or prepack). The zero observation (the load-time probe) makes it empty and fast;
    obs[0] = 1 makes it seconds of work (3000 × 0.27 GFLOP)."""
    inits = [_const("idx0", [0], np.int64), _const("idx1", [1], np.int64),
             _const("scale", [[float(size)]]), _const("cols", [size], np.int64),
             _const("wshape", [size, size], np.int64), _const("zeros", np.zeros((1, 2)))]
    graph = [helper.make_node("Slice", ["obs", "idx0", "idx1", "idx1"], ["first"]),
             helper.make_node("Mul", ["first", "scale"], ["rows_f"]),
             helper.make_node("Cast", ["rows_f"], ["rows_2d"], to=T.INT64),
             helper.make_node("Reshape", ["rows_2d", "idx1"], ["rows"]),
             helper.make_node("Concat", ["rows", "cols"], ["xshape"], axis=0),
             helper.make_node("ConstantOfShape", ["xshape"], ["x0"],
                              value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("ConstantOfShape", ["wshape"], ["w"],
                              value=numpy_helper.from_array(np.full(1, 1 / size, np.float32)))]
    graph += [helper.make_node("MatMul", [f"x{i}", "w"], [f"x{i + 1}"]) for i in range(nodes)]
    graph += [helper.make_node("ReduceSum", [f"x{nodes}"], ["total"], keepdims=0),
              helper.make_node("Add", ["zeros", "total"], ["out"])]
    return _save(tmp_path, graph, inits, name="slow.onnx")


def test_a_call_past_the_limit_is_stopped(tmp_path: Path, limit: float) -> None:
    policy = _load(_slow(tmp_path))
    assert policy.act(np.zeros(4, np.float32)) in (0, 1)  # fast where it is empty
    start = time.monotonic()
    with pytest.raises(PacplanError) as info:
        policy.act(np.array([1.0, 0, 0, 0], np.float32))
    text = str(info.value)
    assert "\n" not in text and "slow.onnx: the model ran past the 0.5 s limit" in text, text
    assert time.monotonic() - start < limit + 3.0
    assert policy.act(np.zeros(4, np.float32)) in (0, 1)  # and it still acts afterwards


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_and_sigterm_stop_a_call_in_flight(tmp_path: Path, signum: int) -> None:
    """The CLI turns SIGTERM into KeyboardInterrupt (`sigterm_as_ctrl_c`); Python runs that
    handler, and SIGINT's, only between bytecodes, never inside onnxruntime. (A shell starts a
    background job with SIGINT ignored, so `pytest &` would not see Ctrl-C at all: Python's
    own handler is put back for the test.)"""
    from pacplan.cli.output import sigterm_as_ctrl_c

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_stops_a_call(tmp_path, signum, sigterm_as_ctrl_c)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_stops_a_call(tmp_path: Path, signum: int, sigterm_as_ctrl_c: object) -> None:
    policy = _load(_slow(tmp_path))
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signum))
    start = time.monotonic()
    with sigterm_as_ctrl_c(), pytest.raises(KeyboardInterrupt):  # type: ignore[operator]
        timer.start()
        try:
            policy.act(np.array([1.0, 0, 0, 0], np.float32))
        finally:
            timer.join()
    assert time.monotonic() - start < 3.0
    assert policy.act(np.zeros(4, np.float32)) in (0, 1)


def _sqrt_model(tmp_path: Path, obs_dim: int, n_out: int) -> Path:
    """sqrt of the first `n_out` observation values: NaN where one is negative."""
    inits = [_const("s", [0], np.int64), _const("e", [n_out], np.int64),
             _const("a", [1], np.int64)]
    nodes = [helper.make_node("Slice", ["obs", "s", "e", "a"], ["head"]),
             helper.make_node("Sqrt", ["head"], ["out"])]
    return _save(tmp_path, nodes, inits, obs_dim=obs_dim, name="sqrt.onnx")


def test_a_non_finite_output_is_refused_not_acted_on(tmp_path: Path) -> None:
    policy = _load(_sqrt_model(tmp_path, 4, 2))  # the probe at 0 is fine: sqrt(0) = 0
    assert policy.act(np.array([1.0, 4.0, 0, 0], np.float32)) == 1
    with pytest.raises(PacplanError) as info:  # today: argmax([nan, 1]) = 0, an action
        policy.act(np.array([-1.0, 1.0, 0, 0], np.float32))
    text = str(info.value)
    assert "\n" not in text and "sqrt.onnx: the model gave a non-finite output (nan)" in text
    assert "for observation [-1." in text, text
    pendulum = gym.make("Pendulum-v1")
    box = _load(_sqrt_model(tmp_path, 3, 1), pendulum)
    np.testing.assert_allclose(box.act(np.array([0.25, 0, 0], np.float32)), [0.5])
    with pytest.raises(PacplanError, match="non-finite output"):  # today: a NaN torque
        box.act(np.array([-0.25, 0, 0], np.float32))


def test_a_forked_child_runs_under_its_own_limit(tmp_path: Path, limit: float) -> None:
    """A forked process does not share its parent's model process: it starts its own, so its
    calls keep their limit and the parent's still acts."""
    policy = _load(_slow(tmp_path))
    pid = os.fork()
    if pid == 0:  # the child: exit status 3 when stopped at the limit, as it must be
        code = 1
        try:
            signal.alarm(30)  # a child that hangs is killed, and the test fails
            policy.act(np.array([1.0, 0, 0, 0], np.float32))
            code = 0
        except PacplanError as exc:
            code = 3 if "0.5 s limit" in str(exc) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3
    assert policy.act(np.zeros(4, np.float32)) in (0, 1)


def _nms(tmp_path: Path, boxes: int = 100_000) -> Path:
    """One slow node and no control flow: a NonMaxSuppression over `boxes` constant boxes that
    barely overlap (about 17 s at 100,000 on a 2026 laptop core; quadratic in the count). The
    scores it outputs are the number of boxes kept, whatever the observation."""
    rng = np.random.default_rng(0)
    corner = rng.uniform(0, 1000, size=(boxes, 2))
    inits = [_const("boxes", np.concatenate([corner, corner + 0.001], axis=1)[None]),
             _const("scores", rng.uniform(size=(1, 1, boxes))),
             _const("most", [boxes], np.int64), _const("iou", [0.5]), _const("zero", 0.0),
             _const("axis", [1], np.int64)]
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "most", "iou"], ["kept"]),
             helper.make_node("ReduceSum", ["kept"], ["total"], keepdims=0),
             helper.make_node("Cast", ["total"], ["total_f"], to=T.FLOAT),
             helper.make_node("Mul", ["obs", "zero"], ["nothing"]),
             helper.make_node("ReduceSum", ["nothing", "axis"], ["column"], keepdims=1),
             helper.make_node("Add", ["column", "total_f"], ["score"]),
             helper.make_node("Concat", ["score", "score"], ["out"], axis=1)]
    return _save(tmp_path, nodes, inits, name="nms.onnx")


def test_one_slow_node_is_stopped_at_the_limit(tmp_path: Path, limit: float) -> None:
    """onnxruntime checks `terminate` only between nodes, so a single slow node ran on past
    the limit (22 s against 10 s); the child process that runs it is killed at the limit."""
    start = time.monotonic()
    with pytest.raises(PacplanError) as info:
        _load(_nms(tmp_path))
    text = str(info.value)
    assert "\n" not in text and "nms.onnx: the model ran past the 0.5 s limit" in text, text
    assert time.monotonic() - start < limit + 6.0  # with a child's start-up; the node: ~17 s
    assert _load(_slow(tmp_path)).act(np.zeros(4, np.float32)) in (0, 1)  # a new child acts


def _string_output(tmp_path: Path) -> Path:
    return _save(tmp_path, [helper.make_node("Cast", ["obs"], ["out"], to=T.STRING)], [],
                 name="strings.onnx", out_type=T.STRING)


def _zipmap_output(tmp_path: Path) -> Path:
    """scikit-learn's classifier export: scores through ZipMap, a sequence of maps."""
    graph = helper.make_graph(
        [helper.make_node("Slice", ["obs", "s", "e", "a"], ["head"]),
         helper.make_node("ZipMap", ["head"], ["out"], domain="ai.onnx.ml",
                          classlabels_int64s=[0, 1])],
        "policy", [helper.make_tensor_value_info("obs", T.FLOAT, ["batch", 4])],
        [helper.make_value_info("out", helper.make_sequence_type_proto(
            helper.make_map_type_proto(T.INT64, helper.make_tensor_type_proto(T.FLOAT, []))))],
        [_const("s", [0], np.int64), _const("e", [2], np.int64), _const("a", [1], np.int64)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 1)])
    model.ir_version = 8
    path = tmp_path / "zipmap.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize(("make", "words"), [(_string_output, "holds strings, not numbers"),
                                              (_zipmap_output, "sequence of maps")],
                         ids=["strings", "zipmap"])
def test_an_output_that_is_not_numbers_is_one_line(tmp_path: Path, make: object,
                                                   words: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(PacplanError) as info:
        _load(path)
    text = str(info.value)
    assert "\n" not in text and path.name in text and words in text, text
