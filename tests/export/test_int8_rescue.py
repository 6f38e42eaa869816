"""The accuracy check's retries rescue a real INT8 file: a trained model with one INT8-sensitive layer fails the
check fully quantized and passes once the retries keep that layer in float, and a layer kept float reads float
values in both runtimes."""

import copy
import re
import shutil

import numpy as np
import pytest
import torch
import yaml
from tests.export.test_int8 import TRAIN_STEPS
from tests.helpers import BLOCKS_SIZE

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.data.files.image_io import read_image
from tphyolo.export import ExportConfig, export_model
from tphyolo.export.int8_policy import QUANTIZED_OPS, float_nodes, layer_name, sensitive_layers
from tphyolo.export.onnx_file import trace_onnx
from tphyolo.export.quantize_onnx import quantize_onnx
from tphyolo.infer.backends import load_backend
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor

PRODUCER, SENSITIVE = 21, 22  # the layer given the outlier channel, and the one layer that reads its output
OUTLIER = 1000.0  # the outlier channel's constant value; the other channels of that tensor stay within about 0..5
LABEL_CONF = 0.5  # the float model's detections above this score are the check's ground truth


def readers(model, index: int) -> list[int]:
    """The layers of `model.model` whose inputs include the output of layer `index` (concatenations included)."""
    found = []
    for j, source in enumerate(model.sources):
        inputs = source if isinstance(source, tuple) else (source,)
        if index in {j - 1 if i == -1 else i for i in inputs}:
            found.append(j)
    return found


def cut_outlier_channel(model, channel: int) -> None:
    """Gives the inputs of layer SENSITIVE's two 1x1 convolutions zero weight on `channel` (in place)."""
    with torch.no_grad():
        for conv in (model.model[SENSITIVE].cv1.conv, model.model[SENSITIVE].cv2.conv):
            conv.weight[:, channel] = 0.0


def add_outlier(model, channel: int) -> None:
    """Makes `channel` of layer PRODUCER's output the constant OUTLIER (in place): its last convolution's
    BatchNorm scales that channel by 0 and shifts it by OUTLIER, and SiLU(1000) is 1000 in float32."""
    with torch.no_grad():
        norm = model.model[PRODUCER].cv2.bn
        norm.weight[channel], norm.bias[channel] = 0.0, OUTLIER


def label_with_float_detections(model, images, folder) -> int:
    """A val split under `folder` (images/, labels/) of `images` labelled with `model`'s own detections above
    LABEL_CONF, in YOLO format; returns how many labels it wrote."""
    predictor = Predictor(model, imgsz=BLOCKS_SIZE, conf=LABEL_CONF, device="cpu")
    (folder / "images").mkdir(parents=True)
    (folder / "labels").mkdir()
    count = 0
    for image in images:
        shutil.copy(image, folder / "images" / image.name)
        detections = predictor(read_image(image))[0]
        lines = [
            f"{label} {(x1 + x2) / 2 / BLOCKS_SIZE} {(y1 + y2) / 2 / BLOCKS_SIZE} {(x2 - x1) / BLOCKS_SIZE} "
            f"{(y2 - y1) / BLOCKS_SIZE}\n"
            for (x1, y1, x2, y2), label in zip(detections.boxes.tolist(), detections.labels.tolist(), strict=True)
        ]
        (folder / "labels" / f"{image.stem}.txt").write_text("".join(lines))
        count += len(lines)
    return count


@pytest.mark.slow
def test_an_outlier_channel_fails_full_int8_and_the_layer_it_feeds_kept_float_passes(int8_trained, blocks_data,
                                                                                     tmp_path):  # fmt: skip
    """The classic outlier channel, on the block images' tph-yolov5n, through OpenVINO and ONNX Runtime. One
    channel of layer 21's output (SPP) is made a constant 1000 and both convolutions of layer 22 (C3) that read
    that output, its only reader, get zero weight on it: in float the channel adds exactly nothing (checked
    against the same model without the outlier). INT8 quantizes each activation per tensor: the input of layer
    22 spans about -0.3 to 1000, so its 256 levels are 3.9 apart and the other channels, within about 0 to 5,
    round to one or two levels. Their information is lost, and with it the stride-4 level and most of what the
    coarser levels get from it. Keeping layer 22 in float removes the quantizer on its input and nothing else
    reads the outlier, so the rest quantizes as well as without it.

    Layer 22 is second in `sensitive_layers` order (after 23, the CBAM that feeds the stride-4 level), so the
    rescue takes exactly two retries: layer 23 kept float does not help, layers 23 and 22 pass.

    The check's ground truth is the float model's own detections above score 0.5 (a model trained 60 steps
    finds mAP50 about 0.02 against the true blocks, where any noise moves the drop by as much as the bound): the
    float file scores near 1 and the check measures how much of its detections the INT8 file keeps. Global
    activation ranges, as NNCF's per-image mean ranges alone already lost 0.53 mAP50 of these labels.
    Measured through OpenVINO: without the outlier INT8 loses 0.0000; with it, full INT8 0.0834, layer 23 in
    float 0.0977, layers 23 and 22 0.0000. Through ONNX Runtime: 0.1171, 0.1179, 0.0030; before its layers kept
    float read float values (`quantize_onnx.read_float_inputs`), layers 23 and 22 still lost 0.1155 (layer 21's
    last convolution rounded its output per tensor, outlier included) and only a third retry passed. On a 2-core
    AMX Xeon (VNNI and AMX INT8 kernels), ONNX Runtime lost 0.2577, 0.2593, then 0.0122 with layers 23 and 22 in
    float, and a third layer kept float brought it to 0.0075."""
    name = "tph-yolov5n"
    reference = load_checkpoint(int8_trained(name, TRAIN_STEPS[name])).build_model().eval()
    order = sensitive_layers(reference)
    assert readers(reference, PRODUCER) == [SENSITIVE] and order[:2] == [23, SENSITIVE], order
    channel = 0
    cut_outlier_channel(reference, channel)
    model = copy.deepcopy(reference)
    add_outlier(model, channel)
    images = sorted((blocks_data.parent / "blocks" / "images").glob("*.png"))
    batch = torch.stack([torch.from_numpy(read_image(p)[:, :, ::-1].copy()).permute(2, 0, 1) for p in images]) / 255
    produced = []
    hook = model.model[PRODUCER].register_forward_hook(lambda _layer, _inputs, output: produced.append(output))
    with torch.no_grad():
        model(batch)
        hook.remove()
        assert (produced[0][:, channel] == OUTLIER).all() and produced[0].abs().amax() == OUTLIER
        # the float model exported and checked: detections as without the outlier
        torch.testing.assert_close(model.fuse()(batch), reference.fuse()(batch), rtol=0, atol=1e-4)
    labels = label_with_float_detections(model, images, tmp_path / "val")
    data = {"path": str(blocks_data.parent), "train": "blocks/images", "val": str(tmp_path / "val" / "images"),
            "names": {0: "red", 1: "blue"}}  # fmt: skip
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(data))
    cfg = ExportConfig(formats=("onnx", "openvino"), imgsz=BLOCKS_SIZE, int8=True, data=str(tmp_path / "data.yaml"),
                       calib_images=16, calib_ranges="global")  # fmt: skip
    lines = []
    results = export_model(model, cfg, stem=tmp_path / "m", model_name=name, log=lines.append)
    for result in results:
        accuracy = result.accuracy
        tries = (re.search(rf"^{result.format} INT8: mAP50 drop (\S+) above", line) for line in lines)
        drops = [float(found[1]) for found in tries if found]
        numbers = f"{labels} labels; drops of the tries {drops}, then {accuracy.drop:.4f}; {result.summary()}"
        assert accuracy.float_map50 > 0.9, numbers  # the float file finds its own detections
        # full INT8, then layer 23 in float: both well above the bound (0.08 to 0.26 measured), not noise near it;
        # how many more layers the rescue keeps depends on the CPU's INT8 kernels (two or three measured)
        assert 2 <= len(drops) <= 3 and min(drops[:2]) > 5 * cfg.max_drop, numbers
        assert accuracy.drop <= cfg.max_drop and result.ok, numbers
        kept = tuple(layer_name(model, i) for i in order[: len(drops)])
        assert accuracy.float_layers == kept and f"layers kept in float: {', '.join(kept)}" in result.summary()
        meta = load_backend(result.path).metadata
        expected_parts = ("head-convs", *(f"model.{i}" for i in order[: len(drops)]))
        assert meta.int8_float_parts == expected_parts, meta.int8_float_parts
        assert meta.int8_map50 == (accuracy.float_map50, accuracy.int8_map50)
    assert sorted(result.format for result in results) == ["onnx", "openvino"]


def dequantized_reads(graph, names: set[str]) -> set[str]:
    """The DequantizeLinear nodes of activations (fed by a QuantizeLinear) whose values reach an input of the
    nodes `names` of `graph` through operations that are not quantized."""
    producer = {out: node for node in graph.node for out in node.output}
    found, pending = set(), [tensor for node in graph.node if node.name in names for tensor in node.input]
    while pending:
        node = producer.get(pending.pop())
        if node is not None and node.op_type == "DequantizeLinear":
            source = producer.get(node.input[0])
            found |= {node.name} if source is not None and source.op_type == "QuantizeLinear" else set()
        elif node is not None and node.op_type not in QUANTIZED_OPS:
            pending.extend(node.input)
    return found


@pytest.mark.slow
def test_a_layer_kept_float_in_onnx_runtime_reads_float_values(tmp_path):
    """ONNX Runtime quantizes the output of each convolution it quantizes, before the activation, and the layer
    after it would read those rounded values though its own nodes are excluded; the retries' layers read past
    that pair, while the convolution before them keeps its int8 input and weights."""
    import onnx

    torch.manual_seed(0)
    model = build_model("yolov5n", num_classes=2).eval().fuse()
    trace = trace_onnx(model, torch.rand(1, 3, 64, 64), tmp_path / "m.onnx", dynamic=False, opset=17)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 256, (1, 3, 64, 64), dtype=np.uint8) for _ in range(2)]
    layer = set(float_nodes(trace, model, (), (2,)))  # C3, reading the Conv of layer 1
    excluded = onnx.load(str(quantize_onnx(trace, tmp_path / "excluded.onnx", batches, keep_float=layer))).graph
    assert dequantized_reads(excluded, layer)  # excluded alone: the layer reads layer 1's rounded output
    path = quantize_onnx(trace, tmp_path / "float.onnx", batches, keep_float=layer, float_inputs=layer)
    graph = onnx.load(str(path)).graph
    assert dequantized_reads(graph, layer) == set()
    (before,) = [node for node in graph.node if node.name == "/model.1/conv/Conv"]
    producer = {out: node.op_type for node in graph.node for out in node.output}
    assert [producer.get(name) for name in before.input] == ["DequantizeLinear"] * 3  # input, weights, bias
