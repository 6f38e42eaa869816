"""`tphyolo serve`: an HTTP detection service over the same inference as `tphyolo predict`.

The inference flags are predict's (`InferenceConfig`, slicing, crop classifier, runtime): they set the
service's defaults, which a request may override (`tphyolo.serve.options`). The service flags come from
`ServeConfig`. See docs/serving.md.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from tphyolo.commands.options.inference import (
    add_classifier_flags,
    add_model_chosen_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    inference_settings,
    slice_settings,
)
from tphyolo.flags import add_flags, from_flags
from tphyolo.serve.config import RayConfig, ServeConfig, ServedModels

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, ServedModels)
    add_model_chosen_flags(parser, exclude=("batch",))  # the service batches by --max-batch
    add_classifier_flags(parser)
    add_slice_flags(parser)
    add_flags(parser, ServeConfig)
    add_flags(parser.add_argument_group("Ray Serve"), RayConfig)


def run(args: argparse.Namespace) -> int:
    from tphyolo.serve.server import serve_weights  # lazy: imports torch; 'tphyolo serve -h' must not

    device = inference_device(args.runtime)
    settings, cluster = from_flags(ServeConfig, args), from_flags(RayConfig, args)
    where = "on Ray Serve" if cluster.ray else "on"

    def listening(host: str, port: int) -> None:
        print(f"tphyolo serve: {' '.join(args.weights)} {where} http://{host}:{port} (ready when /readyz says so)",
              flush=True)  # fmt: skip

    inference = inference_settings(args)
    if settings.max_batch is None:  # the device's default, at most a fixed-batch export's
        inference = replace(inference, from_model=(*inference.from_model, "batch"))
    serve_weights(
        args.weights, inference, serve=settings, cluster=cluster, on_listening=listening,
        slice=slice_settings(args), model_weights=args.model_weights, runtime=args.runtime, device=str(device),
        **classifier_settings(args),
    )  # fmt: skip
    print("tphyolo serve: stopped")
    return 0
