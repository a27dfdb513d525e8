"""The ONNX Runtime sessions the backend opens (pytracking.onnx.runtime.make_session), on a one-node model the test
writes: their thread count, and idle threads that sleep instead of spinning."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytracking.onnx.runtime import make_session


@pytest.fixture
def identity_model(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "identity.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_sessions_take_the_threads_asked_and_their_idle_threads_sleep(identity_model):
    session = make_session(identity_model, threads=2)
    options = session.get_session_options()
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    x = np.array([1.5, -2.0], dtype=np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], x)
