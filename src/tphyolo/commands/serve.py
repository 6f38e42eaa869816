"""`tphyolo serve`: an HTTP detection service over the same inference as `tphyolo predict`.

The inference flags are predict's (`InferenceConfig`, slicing, crop classifier, runtime): they set the
service's defaults, which a request may override (`tphyolo.serve.options`). The service flags come from
`ServeConfig`. See docs/serving.md.
"""

from __future__ import annotations

import argparse

from tphyolo.commands.options.inference import (
    add_classifier_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    slice_settings,
)
from tphyolo.flags import add_flags, bounded

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.serve.config import ServeConfig

    parser.add_argument(
        "--weights",
        nargs="+",
        required=True,
        help="checkpoint(s) or exported model(s) (.onnx, OpenVINO, .torchscript); several form an ensemble",
    )
    parser.add_argument(
        "--model-weights", nargs="+", type=bounded(float, 0), default=None, help="WBF weight of each model"
    )
    add_flags(parser, InferenceConfig, exclude=("batch",))  # the service batches by --max-batch
    add_classifier_flags(parser)
    add_slice_flags(parser)
    add_flags(parser, ServeConfig)


def run(args: argparse.Namespace) -> int:
    from tphyolo.flags import from_flags
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.serve.app import create_app
    from tphyolo.serve.config import ServeConfig
    from tphyolo.serve.server import run_server

    device = inference_device(args.runtime)
    settings = from_flags(ServeConfig, args)
    app = create_app(
        args.weights, from_flags(InferenceConfig, args), serve=settings, slice=slice_settings(args),
        model_weights=args.model_weights, runtime=args.runtime, device=str(device), **classifier_settings(args),
    )  # fmt: skip

    def listening(host: str, port: int) -> None:
        print(f"tphyolo serve: {' '.join(args.weights)} on http://{host}:{port} (ready when /readyz says so)",
              flush=True)  # fmt: skip

    run_server(app, settings, on_listening=listening)
    print("tphyolo serve: stopped")
    return 0
