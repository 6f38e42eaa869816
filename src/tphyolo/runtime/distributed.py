"""Distributed runs: the torchrun environment, process-group set-up, the few collective calls the package
makes, and launching torchrun.

A run is distributed when torchrun started it (WORLD_SIZE > 1 in the environment). `--device 0,1` without
torchrun relaunches the same command under `python -m torch.distributed.run --nproc_per_node 2`. Multi-node
runs use torchrun's own rendezvous flags (`--nnodes`, `--node_rank`, `--rdzv_endpoint` ...).

Every function here is a no-op (or the one-process answer) outside a distributed run, and every rank must call
a collective one (`barrier`, `broadcast_object`, `gather_to_main`) at the same point, in the same order.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    """This process's place in a run: global rank, rank on this node, and the number of processes."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone logs, validates and saves."""
        return self.rank == 0

    @classmethod
    def from_env(cls) -> DistContext:
        """Read torchrun's RANK / LOCAL_RANK / WORLD_SIZE (a single process when they are absent)."""
        return cls(
            rank=int(os.environ.get("RANK", 0)),
            local_rank=int(os.environ.get("LOCAL_RANK", 0)),
            world_size=int(os.environ.get("WORLD_SIZE", 1)),
        )


def init_process_group(ctx: DistContext, device: torch.device) -> None:
    """Join the process group: NCCL for CUDA devices, gloo for CPU."""
    if not ctx.distributed or dist.is_initialized():
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


@contextlib.contextmanager
def process_group(ctx: DistContext, device: torch.device) -> Iterator[None]:
    """The process group joined for the duration (`init_process_group`), and left at the end when this call
    joined it."""
    joined = ctx.distributed and not dist.is_initialized()
    init_process_group(ctx, device)
    try:
        yield
    finally:
        if joined:
            destroy_process_group(ctx)


def destroy_process_group(ctx: DistContext) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


def barrier(ctx: DistContext) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.barrier()


def broadcast_object(ctx: DistContext, value: object) -> object:
    """Rank 0's `value` on every rank."""
    if not ctx.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_module(ctx: DistContext, module: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers copied into `module` (of the same architecture) on every rank."""
    if not ctx.distributed:
        return
    with torch.no_grad():
        for tensor in module.state_dict().values():
            dist.broadcast(tensor, src=0)


def gather_to_main(ctx: DistContext, value: object) -> list | None:
    """Every rank's `value` (picklable), in rank order, on rank 0; None on the other ranks. ([value] in one
    process.)"""
    if not ctx.distributed:
        return [value]
    values = [None] * ctx.world_size if ctx.is_main else None
    dist.gather_object(value, values, dst=0)
    return values


_counters = itertools.count()


class GlobalCount:
    """A count that every rank adds to and any rank reads without waiting for the others: a key of the process
    group's key-value store (a plain number in one process). For progress bars: rank 0 shows the whole run's
    progress while each rank works on its share. Create it on every rank at the same point (the key is
    numbered in creation order)."""

    def __init__(self, ctx: DistContext) -> None:
        self.number = next(_counters)
        # torch.distributed has no public accessor for the store that init_process_group set up.
        self.store = dist.distributed_c10d._get_default_store() if ctx.distributed else None
        self.local = 0

    def add(self, amount: int) -> int:
        """Adds `amount`; returns the total so far over all ranks."""
        if self.store is None:
            self.local += amount
            return self.local
        return int(self.store.add(f"tphyolo/count/{self.number}", amount))


def torchrun_command(argv: Sequence[str], *, nproc: int) -> list[str]:
    """The torchrun command line that runs `tphyolo <argv>` on `nproc` local processes."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "tphyolo",
        *argv,
    ]


def launch_torchrun(argv: Sequence[str], *, nproc: int) -> int:
    """Run `tphyolo <argv>` under torchrun with `nproc` processes; returns its exit code."""
    return subprocess.call(torchrun_command(argv, nproc=nproc))
