"""The most INT8 can gain on this CPU: INT8 against FP32 convolutions and matrix products, through the runtimes
that run exported models (OpenVINO and ONNX Runtime), in one process with the calls interleaved.

    python benchmarks/int8_bound.py --pairs 15

Each kernel is a one-operation ONNX graph with random weights, shaped as the layers of a TPH-YOLOv5-l at
640 px are (`KERNELS`): a 3x3 convolution of the 80x80 level, a 1x1 convolution of the 40x40 level, the
linear projection and the attention product of a C3TR block on the 20x20 map. The baseline of each row is the
FP32 graph in the same runtime; the INT8 graph is the same weights quantized as the model quantizers do it:

- OpenVINO: `nncf.quantize` of the FP32 model (symmetric int8 weights per output channel, activations per
  tensor), compiled for the CPU;
- ONNX Runtime: `quantize_static` in QDQ format (uint8 activations, int8 weights per channel), run with every
  graph optimisation, which fuses the Q/DQ pairs around a convolution or product into an integer kernel.

Prints, per runtime and kernel, the median time of each (labelled: they are inflated by any other load on a
shared machine) and the paired ratio FP32 / INT8 with its quartiles: the gain a whole model can approach when
its time is spent in such layers. On an AVX2 CPU without VNNI, int8 products go through vpmaddubsw + vpmaddwd
(two instructions for 32 multiply-adds, against four FMAs for the same 32 in fp32); the measured ratio is the
bound that matters, not this count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tphyolo.runtime.interleaved import time_interleaved

SEED = 0


@dataclass(frozen=True)
class Kernel:
    """One operation: `op` "conv" (input (1, c_in, h, w), weight (c_out, c_in, k, k), padding k // 2),
    "linear" (input (1, tokens, c_in) times a weight (c_in, c_out)) or "attention" (two activations
    (heads, tokens, c_in) and (heads, c_in, tokens): queries times keys)."""

    name: str
    op: str
    c_in: int
    c_out: int
    size: int  # spatial side (conv) or tokens (linear, attention)
    k: int = 1
    heads: int = 1

    def macs(self) -> int:
        if self.op == "conv":
            return self.c_out * self.c_in * self.k * self.k * self.size * self.size
        if self.op == "linear":
            return self.size * self.c_in * self.c_out
        return self.heads * self.size * self.c_in * self.size


KERNELS = (
    Kernel("conv3x3 128->128 @80x80", "conv", 128, 128, 80, k=3),
    Kernel("conv1x1 512->256 @40x40", "conv", 512, 256, 40, k=1),
    Kernel("linear 400x1024->1024 (C3TR qkv)", "linear", 1024, 1024, 400),
    Kernel("attention 8x400x128 @ 128x400 (C3TR q.k)", "attention", 128, 400, 400, heads=8),
)


def kernel_graph(kernel: Kernel, path: Path) -> list[np.ndarray]:
    """Writes the FP32 ONNX graph of `kernel` to `path`; returns one example input per graph input."""
    rng = np.random.default_rng(SEED)
    f32 = TensorProto.FLOAT
    if kernel.op == "conv":
        shape = (1, kernel.c_in, kernel.size, kernel.size)
        weight = rng.normal(0, (kernel.c_in * kernel.k**2) ** -0.5, (kernel.c_out, kernel.c_in, kernel.k, kernel.k))
        bias = rng.normal(0, 0.1, kernel.c_out)
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[kernel.k // 2] * 4)
        inits = [numpy_helper.from_array(a.astype(np.float32), n) for a, n in ((weight, "w"), (bias, "b"))]
        inputs = [helper.make_tensor_value_info("x", f32, shape)]
        examples = [rng.random(shape, dtype=np.float32)]
    elif kernel.op == "linear":
        shape = (1, kernel.size, kernel.c_in)
        weight = rng.normal(0, kernel.c_in**-0.5, (kernel.c_in, kernel.c_out))
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
        inits = [numpy_helper.from_array(weight.astype(np.float32), "w")]
        inputs = [helper.make_tensor_value_info("x", f32, shape)]
        examples = [rng.normal(0, 1, shape).astype(np.float32)]
    else:
        q_shape, k_shape = (kernel.heads, kernel.size, kernel.c_in), (kernel.heads, kernel.c_in, kernel.size)
        node = helper.make_node("MatMul", ["x", "k"], ["y"])
        inits = []
        inputs = [helper.make_tensor_value_info("x", f32, q_shape), helper.make_tensor_value_info("k", f32, k_shape)]
        examples = [rng.normal(0, 1, q_shape).astype(np.float32), rng.normal(0, 1, k_shape).astype(np.float32)]
    output = helper.make_tensor_value_info("y", f32, None)
    graph = helper.make_graph([node], kernel.name, inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return examples


def calibration_inputs(examples: list[np.ndarray], count: int = 8) -> list[list[np.ndarray]]:
    """`count` inputs distributed as the examples are (the example itself plus scaled copies)."""
    rng = np.random.default_rng(SEED + 1)
    return [[(x * rng.uniform(0.8, 1.2)).astype(np.float32) for x in examples] for _ in range(count)]


def openvino_pair(fp32_path: Path, examples: list[np.ndarray], threads: int) -> tuple[Callable, Callable]:
    import nncf
    import openvino as ov

    core = ov.Core()
    config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
    model = core.read_model(str(fp32_path))
    names = [i.get_any_name() for i in model.inputs]
    dataset = nncf.Dataset(calibration_inputs(examples), lambda xs: dict(zip(names, xs, strict=True)))
    quantized = nncf.quantize(core.read_model(str(fp32_path)), dataset, subset_size=8)
    feed = dict(zip(names, examples, strict=True))
    fp32 = core.compile_model(model, "CPU", config).create_infer_request()
    int8 = core.compile_model(quantized, "CPU", config).create_infer_request()
    return (lambda: fp32.infer(feed)), (lambda: int8.infer(feed))


def onnxruntime_pair(fp32_path: Path, examples: list[np.ndarray], threads: int) -> tuple[Callable, Callable]:
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    names = [i.name for i in onnx.load(str(fp32_path)).graph.input]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter(calibration_inputs(examples))

        def get_next(self) -> dict | None:
            batch = next(self.batches, None)
            return None if batch is None else dict(zip(names, batch, strict=True))

    int8_path = fp32_path.with_name(fp32_path.stem + "_int8.onnx")
    quantize_static(
        str(fp32_path),
        str(int8_path),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
    )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    feed = dict(zip(names, examples, strict=True))
    fp32 = ort.InferenceSession(str(fp32_path), options, providers=["CPUExecutionProvider"])
    int8 = ort.InferenceSession(str(int8_path), options, providers=["CPUExecutionProvider"])
    return (lambda: fp32.run(None, feed)), (lambda: int8.run(None, feed))


RUNTIMES: dict[str, Callable[[Path, list[np.ndarray], int], tuple[Callable, Callable]]] = {
    "openvino": openvino_pair,
    "onnxruntime": onnxruntime_pair,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="timed pairs per kernel after two untimed ones")
    parser.add_argument("--runtimes", default="openvino,onnxruntime", help=f"some of {','.join(RUNTIMES)}")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    print(f"{args.threads} threads, {args.pairs} pairs per row; ms are medians on this machine as loaded now")
    with tempfile.TemporaryDirectory(prefix="int8-bound-") as tmp:
        for runtime in args.runtimes.split(","):
            for index, kernel in enumerate(KERNELS):
                path = Path(tmp) / f"{runtime}-{index}.onnx"
                fp32, int8 = RUNTIMES[runtime](path, kernel_graph(kernel, path), args.threads)
                fp32_s, int8_s = time_interleaved((fp32, int8), warmup=2, rounds=args.pairs)
                ratios = [a / b for a, b in zip(fp32_s, int8_s, strict=True)]
                q1, _, q3 = statistics.quantiles(ratios, n=4)
                print(
                    f"{runtime:12s} {kernel.name:42s} {kernel.macs() / 1e6:7.0f} MMAC  "
                    f"fp32 {1e3 * statistics.median(fp32_s):7.2f} ms  int8 {1e3 * statistics.median(int8_s):7.2f} ms  "
                    f"FP32/INT8 paired {statistics.median(ratios):.2f}x ({q1:.2f}-{q3:.2f})"
                )


if __name__ == "__main__":
    main()
