"""OpenVINO backend for IR exports (`<name>_openvino_model/` folders, or their `.xml`), on the CPU.

Compiled with the LATENCY hint, `threads` inference threads (default: the cores this process may use), and
f32 inference precision for fp32 IRs (so that CPUs with bf16 units do not silently lower precision). A
dynamic IR runs a whole batch in one request.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from tphyolo.imports import require
from tphyolo.infer.backends.base import ExportedBackend, check_format, cpu_threads, error_reason
from tphyolo.infer.backends.metadata import ExportMetadata

RT_INFO_SECTION = "tphyolo"  # the rt_info section holding the metadata, one JSON value per field


def ir_file(path: Path) -> Path:
    """The .xml of an IR given as the file or as its folder (which must hold exactly one .xml)."""
    if path.is_file():
        return path
    found = sorted(path.glob("*.xml"))
    if len(found) != 1:
        raise ValueError(f"{path}: an OpenVINO model folder holds one .xml file, found {[p.name for p in found]}")
    return found[0]


def read_rt_info(model, source: str) -> ExportMetadata:  # noqa: ANN001 - an openvino.Model
    """The metadata that `tphyolo export` wrote into the rt_info section `RT_INFO_SECTION`, from a read (not yet
    compiled) OpenVINO model."""
    entries = {}
    if model.has_rt_info([RT_INFO_SECTION]):
        section = model.get_rt_info([RT_INFO_SECTION]).astype(dict)
        entries = {key: value.astype(str) for key, value in section.items()}
    return ExportMetadata.from_strings(entries, source=source)


class OpenVINOBackend(ExportedBackend):
    """An OpenVINO IR compiled for the CPU."""

    format = "openvino"
    suffix = "_openvino_model"  # a folder holding the .xml and .bin
    cpu_only = True

    @classmethod
    def recognises(cls, path: Path) -> bool:
        """An IR folder (holding an .xml) or its .xml."""
        return any(path.glob("*.xml")) if path.is_dir() else path.suffix.lower() == ".xml"

    def __init__(self, path: Path, *, device: torch.device, threads: int | None = None) -> None:
        ov = require("openvino", purpose="running OpenVINO models")
        if device.type != "cpu":
            raise ValueError(f"{path}: OpenVINO models run on the CPU here, not on {device}")
        xml = ir_file(path)
        core = ov.Core()
        try:
            model = core.read_model(str(xml))
        except RuntimeError as error:
            reason = error_reason(error)
            raise ValueError(f"{path}: not a readable OpenVINO IR (truncated or corrupt?): {reason}") from error
        metadata = read_rt_info(model, str(path))
        check_format(metadata, "openvino", path)
        metadata.check_graph(str(path), input_shape=_dims(model.inputs[0].partial_shape),
                             output_shape=_dims(model.outputs[0].partial_shape))  # fmt: skip
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads or cpu_threads()}
        if not metadata.half:
            config["INFERENCE_PRECISION_HINT"] = "f32"
        try:
            compiled = core.compile_model(model, "CPU", config)
        except RuntimeError as error:
            reason = error_reason(error)
            raise ValueError(f"{path}: OpenVINO cannot compile this IR (corrupt weights?): {reason}") from error
        super().__init__(path, metadata, device)
        self.request = compiled.create_infer_request()

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.request.infer({0: x.numpy()})[0]
        return torch.from_numpy(np.array(out, copy=True))  # the request reuses its output buffer


def _dims(shape) -> list[int | None]:  # noqa: ANN001 - an openvino.PartialShape
    """An OpenVINO partial shape with its free dimensions as None."""
    return [dim.get_length() if dim.is_static else None for dim in shape]
