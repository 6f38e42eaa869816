"""Our weighted boxes fusion against the `ensemble_boxes` package (when installed), in one run: a study of
our implementation, not a setting a user chooses (the user-facing benchmarks are `tphyolo bench`).

    python benchmarks/wbf_vs_ensemble_boxes.py                 # 8 lists x 300 and x 1250 boxes, 10 classes
    python benchmarks/wbf_vs_ensemble_boxes.py --clock cpu     # process CPU time: steadier on a shared machine

Inputs: 8 model lists of 300 boxes each over 10 classes (random normalised xyxy boxes clustered around 60
objects, uniform scores: an ensemble or TTA merge), and 8 lists of 1250 (10^4 boxes around 250 objects whose
boxes overlap widely: the merge of a densely sliced image), iou_thr 0.55, conf_type "avg". Both are checked to
return the same boxes first.
Peak memory is not reported: the baseline works in numpy, which PyTorch's allocator statistics do not see.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import torch

from tphyolo.bench.report import Row, machine_info, print_report
from tphyolo.bench.timing import CLOCKS, time_call, time_calls
from tphyolo.ops.wbf import weighted_boxes_fusion

CPU = torch.device("cpu")


def wbf_inputs(models: int, boxes: int, classes: int, *, seed: int = 0) -> tuple[list, list, list]:
    """`models` lists of (boxes, 4) xyxy in [0, 1], (boxes,) scores, (boxes,) labels; boxes jitter around
    objects so that lists overlap as an ensemble's do."""
    rng = np.random.default_rng(seed)
    objects = max(boxes // 5, 1)
    centres = rng.uniform(0.1, 0.9, (objects, 2))
    sizes = rng.uniform(0.02, 0.2, (objects, 2))
    object_labels = rng.integers(0, classes, objects)
    boxes_list, scores_list, labels_list = [], [], []
    for _ in range(models):
        pick = rng.integers(0, objects, boxes)
        centre = centres[pick] + rng.normal(0, 0.01, (boxes, 2))
        size = sizes[pick] * rng.uniform(0.8, 1.2, (boxes, 2))
        xyxy = np.clip(np.concatenate([centre - size / 2, centre + size / 2], 1), 0, 1)
        boxes_list.append(xyxy)
        scores_list.append(rng.uniform(0.05, 1.0, boxes))
        labels_list.append(object_labels[pick].astype(np.float64))
    return boxes_list, scores_list, labels_list


def bench_wbf(
    *, quick: bool = False, repeats: int = 5, clock: str = "wall", log: Callable[[str], None] = print
) -> list[Row]:
    """One Row per input size: ours against ensemble_boxes (ours alone when it is absent), timed by `clock`
    (timing.CLOCKS)."""
    sizes = [(2, 30, 3)] if quick else [(8, 300, 10), (8, 1250, 10)]
    try:
        from ensemble_boxes import weighted_boxes_fusion as reference
    except ImportError:
        log("bench wbf: ensemble_boxes is not installed; timing ours only")
        reference = None
    return [_bench_one(models, boxes, classes, reference, repeats=repeats, clock=clock, log=log)
            for models, boxes, classes in sizes]  # fmt: skip


def _bench_one(models: int, boxes: int, classes: int, reference, *, repeats: int, clock: str, log) -> Row:
    inputs = wbf_inputs(models, boxes, classes)
    config = f"{models} lists x {boxes} boxes x {classes} classes, iou 0.55, avg"
    ours_fn = lambda: weighted_boxes_fusion(*inputs, iou_thr=0.55, skip_box_thr=0.0)  # noqa: E731
    if reference is None:
        ours_t = time_call(ours_fn, device=CPU, warmup=1, repeats=repeats, clock=clock)
        absent = {"baseline": "absent", "clock": clock}
        return Row("wbf", config, ours_t.median_ms, ours_spread_ms=ours_t.spread_ms, extra=absent)
    base_fn = lambda: reference(*inputs, iou_thr=0.55, skip_box_thr=0.0)  # noqa: E731
    got, expected = ours_fn(), base_fn()
    same = len(got[0]) == len(expected[0]) and np.allclose(got[0], expected[0], atol=1e-4)
    if not same:
        log(f"bench wbf: results differ from ensemble_boxes ({len(got[0])} vs {len(expected[0])} boxes)")
    base_t, ours_t = time_calls([base_fn, ours_fn], device=CPU, warmup=1, repeats=repeats, clock=clock)
    row = Row(
        "wbf", config, ours_t.median_ms, base_t.median_ms,
        ours_spread_ms=ours_t.spread_ms, baseline_spread_ms=base_t.spread_ms,
        extra={"baseline": "ensemble_boxes", "same_boxes": same, "fused": len(got[0]), "clock": clock},
    )  # fmt: skip
    log(f"wbf {config}: ensemble_boxes {base_t.median_ms:.1f} ms, ours {ours_t.median_ms:.1f} ms ({clock} time)")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes and one repeat: checks that it runs")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls; the median is reported (default 5)")
    parser.add_argument("--clock", choices=CLOCKS, default="wall",
                        help="wall time, or the process's CPU time, which other load disturbs less")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)
    if repeats < 1:
        parser.error(f"--repeats must be at least 1, got {repeats}")
    rows = bench_wbf(quick=args.quick, repeats=repeats, clock=args.clock, log=lambda line: print(line, flush=True))
    machine = machine_info(CPU)
    print_report(rows, machine, json_path=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
