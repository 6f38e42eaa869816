#!/usr/bin/env bash
# Entry point of the tphyolo development images.
#
#   start-dev.sh                  print `tphyolo doctor` once, then start JupyterLab on port 8888
#   start-dev.sh COMMAND [ARGS]   print `tphyolo doctor` once, then run COMMAND (e.g. tphyolo train ...)
#   TPHYOLO_DRY_RUN=1 start-dev.sh [...]   print the environment and the commands instead of running them
#
# Settings: PYTHONFAULTHANDLER=1 (a crash prints the Python stack); CUDA_LAUNCH_BLOCKING is removed (it
# serialises every kernel). The CUDA allocator is configured by tphyolo itself (`--alloc-conf`, default
# expandable_segments:True) unless you set PYTORCH_CUDA_ALLOC_CONF, which always wins. TPHYOLO_DOCTOR=0 skips the
# doctor report; JUPYTER_PORT and JUPYTER_TOKEN set the port and the token of JupyterLab (no token by default is
# NOT used: a random one is printed).
set -euo pipefail

export PYTHONFAULTHANDLER=1
unset CUDA_LAUNCH_BLOCKING || true

dry_run="${TPHYOLO_DRY_RUN:-0}"
port="${JUPYTER_PORT:-8888}"

run() {
    if [ "$dry_run" = 1 ]; then
        printf 'would run: %s\n' "$*"
    else
        "$@"
    fi
}

if [ "$dry_run" = 1 ]; then
    printf 'PYTHONFAULTHANDLER=%s\n' "$PYTHONFAULTHANDLER"
    printf 'CUDA_LAUNCH_BLOCKING=%s\n' "${CUDA_LAUNCH_BLOCKING-<unset>}"
    printf 'PYTORCH_CUDA_ALLOC_CONF=%s\n' "${PYTORCH_CUDA_ALLOC_CONF-<unset: tphyolo applies --alloc-conf>}"
fi

if [ "${TPHYOLO_DOCTOR:-1}" != 0 ]; then
    # The report tells whether the GPU, the flash/efficient attention kernels and the compile toolchain work;
    # the compile probe is skipped here to keep the start fast (run `tphyolo doctor` for it).
    run tphyolo doctor --no-compile-check || echo "start-dev.sh: tphyolo doctor reported a problem (see above)" >&2
fi

if [ "$#" -gt 0 ]; then
    if [ "$dry_run" = 1 ]; then
        run "$@"
        exit 0
    fi
    exec "$@"
fi

jupyter_args=(jupyter lab --ip=0.0.0.0 --port="$port" --no-browser --ServerApp.root_dir="${TPHYOLO_WORKDIR:-$PWD}")
if [ -n "${JUPYTER_TOKEN:-}" ]; then
    jupyter_args+=(--IdentityProvider.token="$JUPYTER_TOKEN")
fi
if [ "$dry_run" = 1 ]; then
    run "${jupyter_args[@]}"
    exit 0
fi
exec "${jupyter_args[@]}"
