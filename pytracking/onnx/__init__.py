"""Deployment of the DiMP tracker with ONNX Runtime: the network calls as exportable parts (:mod:`.parts`),
their export with a manifest (:mod:`.export`, :mod:`.manifest`; the command is ``python -m
pytracking.export_onnx``), int8 static quantisation (:mod:`.quantize`) and the tracker backend that runs the
models (:mod:`.runtime`, ``DiMPParams(backend="onnxruntime", onnx_dir=...)``). Needs the ``onnx`` extra."""
