"""Dynamic int8 of the products with large constant weights (pytracking.onnx.quantize.quantize_linear_layers),
on small ONNX graphs made here: the rewrite that exposes the weights computes the same values, and only the
large products are quantised."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from pytracking.onnx.quantize import MIN_LINEAR_WEIGHTS, _constant_weights, quantize_linear_layers


def graph_with_products(rng: np.random.Generator) -> onnx.ModelProto:
    """x (4, 512) -> Gemm with a transposed constant (512 -> 256, bias) -> ReLU -> MatMul with a transposed
    initializer (256 -> 512) -> y; and x -> MatMul with a small constant (512 -> 2) -> z."""
    big = rng.standard_normal((256, 512)).astype(np.float32) / 20
    back = rng.standard_normal((512, 256)).astype(np.float32) / 20
    small = rng.standard_normal((512, 2)).astype(np.float32)
    bias = rng.standard_normal(256).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "big", "bias"], ["h"], name="fc", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Transpose", ["back"], ["back_t"], name="t", perm=[1, 0]),
        helper.make_node("MatMul", ["r", "back_t"], ["y"], name="fc_back"),
        helper.make_node("MatMul", ["x", "small"], ["z"], name="small_product"),
    ]
    inits = [
        numpy_helper.from_array(a, n)
        for a, n in ((big, "big"), (back, "back"), (small, "small"), (bias, "bias"))
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 512])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 512]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, 2]),
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def run(model: onnx.ModelProto | str, x: np.ndarray) -> list[np.ndarray]:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def test_constant_weights_rewrite_computes_the_same_values():
    rng = np.random.default_rng(0)
    model = graph_with_products(rng)
    x = rng.standard_normal((4, 512)).astype(np.float32)
    want = run(model, x)
    rewritten = _constant_weights(graph_with_products(np.random.default_rng(0)))
    ops = [n.op_type for n in rewritten.graph.node]
    assert "Gemm" not in ops and "Transpose" not in ops and ops.count("MatMul") == 3
    inits = {i.name for i in rewritten.graph.initializer}
    assert all(n.input[1] in inits for n in rewritten.graph.node if n.op_type == "MatMul")
    assert "back" not in inits and "big" not in inits  # the transposed originals are gone
    for got, ref in zip(run(rewritten, x), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_only_the_large_products_are_quantised(tmp_path):
    rng = np.random.default_rng(1)
    model = graph_with_products(rng)
    src, dst = tmp_path / "f32.onnx", tmp_path / "int8.onnx"
    onnx.save(model, str(src))
    assert 256 * 512 >= MIN_LINEAR_WEIGHTS > 512 * 2
    assert sorted(quantize_linear_layers(src, dst)) == ["fc", "fc_back"]
    x = rng.standard_normal((4, 512)).astype(np.float32)
    (y, z), (y_q, z_q) = run(model, x), run(str(dst), x)
    np.testing.assert_array_equal(z_q, z)  # the small product stays float32
    error = np.abs(y_q - y).max() / np.abs(y).max()
    assert 0 < error < 0.03, error  # int8 weights per output channel, activations per call
    quantised = onnx.load(str(dst))
    int8 = [np.prod(i.dims) for i in quantised.graph.initializer if i.data_type == TensorProto.INT8]
    assert sorted(n for n in int8 if n >= MIN_LINEAR_WEIGHTS) == [256 * 512, 256 * 512]  # not zero points
