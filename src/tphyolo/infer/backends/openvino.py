"""OpenVINO backend for IR exports (`<name>_openvino_model/` folders, or their `.xml`), on the CPU.

Compiled with the LATENCY hint, `threads` inference threads (default: the cores this process may use), and an
explicit inference precision, f32 unless `precision="bf16"` is asked for: OpenVINO's own CPU default is bf16 on
CPUs with AMX or AVX512-BF16, which would silently lower the precision of every IR, fp16-weight and INT8 ones
(their float parts) included. On a CPU without bf16 instructions OpenVINO keeps f32 whatever it is asked; the
backend then says so in one line and `precision` is what it runs. A dynamic IR runs a whole batch in one
request. `save_ir` writes an IR with tphyolo's metadata, as `tphyolo export` and the compiled CPU runtime
(`tphyolo.infer.backends.compiled`) do.

A service with many callers asks for OpenVINO's throughput path as well (`use_streams`): the model compiled again
with the THROUGHPUT hint, forwards run on an async infer queue of OpenVINO's own number of requests
(`OPTIMAL_NUMBER_OF_INFER_REQUESTS`, one per inference stream, each stream a share of the threads), so that as
many threads may run forwards at once. A forward that finds no other running, when its caller says no other work
is coming (`use_streams(alone_when=...)`: the service, when its worker holds one batch), runs alone on the
LATENCY compilation, on every thread (the others that arrive meanwhile wait for it to end): one caller then waits
for a forward on all cores, not on a stream's share (on a 2-core Xeon, 2 streams of 1 thread each: 21.6 ms
against 44.6 ms for tph-yolov5n at 640), while many keep the streams (taken whenever no forward ran, the LATENCY
path cost 16 callers a fifth of their images/s: 24.4 against 30.5). That is done only where both compilations
give the same answers bit for bit, checked once when the streams are made, on one input of the export's own size
(`alone_on_latency`); where they do not, every forward takes the queue, so an answer never depends on how busy
the service was.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from tphyolo.cores import available_cores
from tphyolo.data.files.atomic import atomic_path
from tphyolo.errors import InputError
from tphyolo.imports import require
from tphyolo.infer.backends.base import ExportedBackend, check_format, error_reason
from tphyolo.infer.backends.metadata import ExportMetadata

RT_INFO_SECTION = "tphyolo"  # the rt_info section holding the metadata, one JSON value per field
PRECISIONS = {"fp32": "f32", "bf16": "bf16"}  # tphyolo's name -> OpenVINO's INFERENCE_PRECISION_HINT
LOGGER = logging.getLogger("tphyolo")


def ir_file(path: Path) -> Path:
    """The .xml of an IR given as the file or as its folder (which must hold exactly one .xml)."""
    if path.is_file():
        return path
    found = sorted(path.glob("*.xml"))
    if len(found) != 1:
        raise InputError(f"{path}: an OpenVINO model folder holds one .xml file, found {[p.name for p in found]}")
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
    has_streams = True  # `use_streams`

    @classmethod
    def recognises(cls, path: Path) -> bool:
        """An IR folder (holding an .xml) or its .xml."""
        return any(path.glob("*.xml")) if path.is_dir() else path.suffix.lower() == ".xml"

    def __init__(
        self, path: Path, *, device: torch.device, threads: int | None = None, precision: str = "fp32"
    ) -> None:
        ov = require("openvino", purpose="running OpenVINO models")
        if precision not in PRECISIONS:
            raise InputError(f"{path}: OpenVINO precision {precision!r}; known: {sorted(PRECISIONS)}")
        if device.type != "cpu":
            raise InputError(f"{path}: OpenVINO models run on the CPU here, not on {device}")
        xml = ir_file(path)
        core = ov.Core()
        try:
            model = core.read_model(str(xml))
        except RuntimeError as error:
            reason = error_reason(error)
            raise InputError(f"{path}: not a readable OpenVINO IR (truncated or corrupt?): {reason}") from error
        metadata = read_rt_info(model, str(path))
        check_format(metadata, "openvino", path)
        metadata.check_graph(str(path), input_shape=_dims(model.inputs[0].partial_shape),
                             output_shape=_dims(model.outputs[0].partial_shape))  # fmt: skip
        self._core, self._threads = core, threads or available_cores()
        super().__init__(path, metadata, device)
        self.precision = precision  # what it computes in (`dtype` is its input's)
        compiled = self._compile(model, "LATENCY")
        ran = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        if ran != PRECISIONS[precision]:  # bf16 asked of a CPU without bf16 instructions: OpenVINO keeps f32
            LOGGER.warning("%s: OpenVINO runs %s here, not the %s asked for: this CPU has no %s instructions", path,
                           ran, precision, precision)  # fmt: skip
            self.precision = {hint: name for name, hint in PRECISIONS.items()}.get(ran, precision)
        self.request = compiled.create_infer_request()
        self.queue = None  # the async infer queue, once `use_streams`
        self.alone_on_latency = False  # once `use_streams`: a forward alone runs on `request` (module docstring)
        self._alone_when: Callable[[], bool] = lambda: True  # `use_streams`' word on whether other work is coming
        self._submit = threading.Lock()  # the queue hands one idle request to one caller at a time
        self._gate = threading.Condition()  # over the two counts below, once `use_streams`
        self._running = 0  # forwards running
        self._alone = False  # one of them runs on `request`, alone

    def _compile(self, model, hint: str):  # noqa: ANN001, ANN202 - openvino.Model -> openvino.CompiledModel
        config = {"PERFORMANCE_HINT": hint, "INFERENCE_NUM_THREADS": self._threads,
                  "INFERENCE_PRECISION_HINT": PRECISIONS[self.precision]}  # fmt: skip
        try:
            return self._core.compile_model(model, "CPU", config)
        except RuntimeError as error:
            reason = error_reason(error)
            raise InputError(f"{self.path}: OpenVINO cannot compile this IR (corrupt weights?): {reason}") from error

    def use_streams(self, alone_when: Callable[[], bool] = lambda: True) -> int:
        """Compile the model again with the THROUGHPUT hint (same threads and precision) and run later forwards
        on an async infer queue of OpenVINO's OPTIMAL_NUMBER_OF_INFER_REQUESTS requests, a forward alone on the
        LATENCY compilation where the two agree bit for bit (`alone_on_latency`, checked here once) and
        `alone_when()` says no other work is coming (module docstring); from then on `run` may be called from
        several threads, that many forwards running at once. Returns that number (the same on every call: it is
        decided once)."""
        self._alone_when = alone_when
        if self.queue is None:
            ov = require("openvino", purpose="running OpenVINO models")
            compiled = self._compile(self._core.read_model(str(ir_file(Path(self.path)))), "THROUGHPUT")
            queue = ov.AsyncInferQueue(compiled, compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            queue.set_callback(_settle_forward)
            probe = torch.rand((self.batch, 3, *self.imgsz), generator=torch.Generator().manual_seed(0))
            probe = probe.to(self.dtype)
            self.queue = queue
            self.alone_on_latency = torch.equal(self._on_latency(probe), self._on_queue(probe))
            if not self.alone_on_latency:
                LOGGER.info("%s: OpenVINO's LATENCY and THROUGHPUT compilations differ in the last bit on this CPU; "
                            "every forward runs on the inference streams", self.path)  # fmt: skip
                self.request = None
        return len(self.queue)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.queue is None:
            return self._on_latency(x)
        with self._gate:
            while self._alone:
                self._gate.wait()
            alone = self.alone_on_latency and self._running == 0 and self._alone_when()
            self._alone = alone
            self._running += 1
        try:
            return self._on_latency(x) if alone else self._on_queue(x)
        finally:
            with self._gate:
                self._running -= 1
                if alone:
                    self._alone = False
                self._gate.notify_all()

    def _on_latency(self, x: torch.Tensor) -> torch.Tensor:
        out = self.request.infer({0: x.numpy()})[0]
        return torch.from_numpy(np.array(out, copy=True))  # the request reuses its output buffer

    def _on_queue(self, x: torch.Tensor) -> torch.Tensor:
        done: dict = {"event": threading.Event()}
        with self._submit:  # two threads in start_async at once can be given the same idle request ("busy")
            self.queue.start_async({0: x.numpy()}, done)  # waits for an idle request
        done["event"].wait()
        if "error" in done:
            raise RuntimeError(done["error"])
        return torch.from_numpy(done["out"])


def _settle_forward(request, done: dict) -> None:  # noqa: ANN001 - an openvino.InferRequest
    """The async queue's callback, in OpenVINO's thread: a copy of the output (the request reuses its buffer)
    for the waiting `_forward`."""
    try:
        done["out"] = np.array(request.get_output_tensor(0).data, copy=True)
    except Exception as error:  # noqa: BLE001 - raised again in the waiting thread, which would otherwise hang
        done["error"] = str(error)
    finally:
        done["event"].set()


def _dims(shape) -> list[int | None]:  # noqa: ANN001 - an openvino.PartialShape
    """An OpenVINO partial shape with its free dimensions as None."""
    return [dim.get_length() if dim.is_static else None for dim in shape]


def ir_from_onnx(onnx_path: Path, folder: Path, *, metadata: ExportMetadata, half: bool = False) -> Path:
    """Converts the ONNX file `onnx_path` (fp32) into an IR in `folder` (`save_ir`). Returns the folder."""
    ov = require("openvino", purpose="converting models to OpenVINO")
    model = ov.Core().read_model(str(onnx_path))  # unlike ov.convert_model: no telemetry, a tenth of the time
    return save_ir(model, folder, metadata=metadata, half=half)


def save_ir(model, folder: Path, *, metadata: ExportMetadata, half: bool = False) -> Path:  # noqa: ANN001
    """Writes the `openvino.Model` `model` with `metadata` in its rt_info into `folder` (created), as
    `<ir_stem>.xml` + `.bin`, fp16 weights when `half`; a folder there is replaced once the new IR is whole.
    Returns the folder."""
    ov = require("openvino", purpose="writing OpenVINO models")
    for key, value in metadata.to_strings().items():
        model.set_rt_info(value, [RT_INFO_SECTION, key])
    with atomic_path(folder) as tmp:
        tmp.mkdir(parents=True)
        ov.save_model(model, str(tmp / f"{ir_stem(folder)}.xml"), compress_to_fp16=half)
    return folder


def ir_stem(folder: Path) -> str:
    """`W` for a folder `W_openvino_model`, else the folder's name."""
    return folder.name.removesuffix("_openvino_model") or folder.name
