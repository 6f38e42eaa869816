"""`tphyolo serve`: an HTTP detection service over the same inference as `tphyolo predict`.

The detector's flags are predict's (`tphyolo.commands.options.detector`, and the runtime's): they set the
service's defaults, which a request may override (`tphyolo.serve.options`). The service flags come from
`ServeConfig`. The service is `tphyolo.serve.server.run_serve`; this module builds its job from the flags
and prints where it listens. See docs/serving.md.
"""

from __future__ import annotations

import argparse

from tphyolo.commands.options.detector import add_detector_flags, detector_spec, on_process_device
from tphyolo.errors import UsageError
from tphyolo.flags import add_flags, from_flags
from tphyolo.runtime.console import RunEvents
from tphyolo.serve.config import RayConfig, ServeConfig, ServeJob

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_detector_flags(parser, exclude=("batch",))  # the service batches by --max-batch
    add_flags(parser, ServeConfig)
    add_flags(parser.add_argument_group("Ray Serve"), RayConfig)


def run(args: argparse.Namespace) -> int:
    from tphyolo.serve.server import run_serve  # lazy: imports torch; 'tphyolo serve -h' must not

    if args.weights is None:
        raise UsageError("--weights is required: the model(s) to serve")
    detector = on_process_device(detector_spec(args), args.runtime)
    job = ServeJob(detector, from_flags(ServeConfig, args), from_flags(RayConfig, args))
    where = "on Ray Serve" if job.cluster.ray else "on"

    def listening(host: str, port: int) -> None:
        print(f"tphyolo serve: {' '.join(args.weights)} {where} http://{host}:{port} (ready when /readyz says so)",
              flush=True)  # fmt: skip

    run_serve(job, runtime=args.runtime, events=RunEvents(listening=listening))
    print("tphyolo serve: stopped")
    return 0
