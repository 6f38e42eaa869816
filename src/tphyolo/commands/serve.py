"""`tphyolo serve`: an HTTP detection service over the same inference as `tphyolo predict`.

The inference flags are predict's (`InferenceConfig`, slicing, crop classifier, runtime): they set the
service's defaults, which a request may override (`tphyolo.serve.options`). The service flags come from
`ServeConfig`. The service is `tphyolo.serve.server.run_serve`; this module builds its job from the flags
and prints where it listens. See docs/serving.md.
"""

from __future__ import annotations

import argparse

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
from tphyolo.serve.config import RayConfig, ServeConfig, ServedModels, ServeJob

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
    from tphyolo.serve.server import run_serve  # lazy: imports torch; 'tphyolo serve -h' must not

    device = inference_device(args.runtime)
    settings, cluster = from_flags(ServeConfig, args), from_flags(RayConfig, args)
    job = ServeJob(
        from_flags(ServedModels, args), inference_settings(args), slice_settings(args), **classifier_settings(args),
        serve=settings, cluster=cluster,
    )  # fmt: skip
    where = "on Ray Serve" if job.cluster.ray else "on"

    def listening(host: str, port: int) -> None:
        print(f"tphyolo serve: {' '.join(args.weights)} {where} http://{host}:{port} (ready when /readyz says so)",
              flush=True)  # fmt: skip

    run_serve(job, runtime=args.runtime, device=str(device), on_listening=listening)
    print("tphyolo serve: stopped")
    return 0
