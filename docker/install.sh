#!/usr/bin/env bash
# Installs tphyolo with the extras a development image carries. The Dockerfiles run this script, and CI runs it
# in its own virtual environment, so the image's install commands are exercised on every change.
#
#   docker/install.sh [--editable] [--dry-run] [EXTRAS]     EXTRAS default: export,notebook
#
# Run from the repository root (or anywhere: it finds the root beside itself). PyTorch itself comes from the base
# image (CUDA) or was installed before (CPU); the project's torch range accepts what is there.
set -euo pipefail

editable=""
dry_run=0
extras="export,notebook"
for arg in "$@"; do
    case "$arg" in
        --editable) editable="-e" ;;
        --dry-run) dry_run=1 ;;
        -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
        -*) echo "install.sh: unknown option $arg" >&2; exit 2 ;;
        *) extras="$arg" ;;
    esac
done

root="$(cd "$(dirname "$0")/.." && pwd)"
cmd=(python3 -m pip install --no-cache-dir ${editable:+"$editable"} "${root}[${extras}]")
if [ "$dry_run" = 1 ]; then
    printf '%s\n' "${cmd[*]}"
    exit 0
fi
"${cmd[@]}"
python3 -c "import tphyolo, torch; print('tphyolo', tphyolo.__version__, 'torch', torch.__version__)"
