"""The crop classifier's effect, measured: detector alone vs detector + classifier on one dataset.

    python benchmarks/classifier_effect.py                       # synthetic-fine: trains both, then measures
    python benchmarks/classifier_effect.py --detector det.pt --classifier cls.pt --data D --img 320

Without --detector it trains one with `tphyolo train --data D` defaults; without --classifier it trains one
with `tphyolo classify train --data D --detector DET` defaults (which sweeps the classifier's weight on val).
Then it runs `tphyolo val --json` on the val split twice (without and with --classifier) and times prediction
(`Predictor`, predict thresholds) on the val images: both predictors built once, warmed up, then timed image by
image, interleaved, `--repeats` times; the median of the per-image times is reported, and the ratio of the two
medians is the classifier's overhead. Prints a markdown table (and writes --json). The confusable classes are
the dataset's `confusable:` list, else the classifier's classes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from tphyolo.classify.checkpoint import load_classifier
from tphyolo.classify.data import confusable_classes, scan_records
from tphyolo.cli import main
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.files.image_io import read_image
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.interleaved import time_interleaved


def _run(argv: list[str]) -> None:
    print("$ tphyolo " + " ".join(argv), flush=True)
    if main(argv) != 0:
        raise SystemExit(f"tphyolo {argv[0]} failed")


def _val(weights: str, data: str, img: int, device: str, out: Path, classifier: str | None) -> dict:
    argv = ["val", "--weights", weights, "--data", data, "--img", str(img), "--device", device, "--workers", "0",
            "--project", str(out.parent), "--name", out.stem, "--exist-ok", "--verbose",
            "--json", str(out)]  # fmt: skip
    _run(argv + (["--classifier", classifier] if classifier else []))
    return json.loads(out.read_text())


def _time_predictions(detector: str, classifier: str, images: list, *, img: int, device: str, repeats: int):
    """Median seconds per image of predicting with the detector alone and with the classifier (interleaved)."""
    runtime = RuntimeConfig(device=device)
    alone = Predictor(detector, imgsz=img, runtime=runtime)
    both = Predictor(detector, imgsz=img, runtime=runtime, classifier=classifier)
    alone(images[0]), both(images[0])  # warm-up
    times: dict[str, list[float]] = {"alone": [], "both": []}
    for image in images:
        pair = time_interleaved((lambda x=image: alone(x), lambda x=image: both(x)), warmup=0, rounds=repeats)
        times["alone"] += pair[0]
        times["both"] += pair[1]
    ids = set(both.detector.classifier.class_ids)
    relabelled = sum(int(sum(int(label) in ids for label in d.labels)) for d in alone(images))
    return statistics.median(times["alone"]), statistics.median(times["both"]), relabelled / len(images)


def _table(data_name: str, confusable: list[str], base: dict, withc: dict, ms: tuple[float, float]) -> str:
    head = ["", *[f"AP50 {c}" for c in confusable], "AP50 confusable", "mAP50", "mAP50-95", "ms / image"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, result, t in (("detector alone", base, ms[0]), ("detector + classifier", withc, ms[1])):
        per = [result["per_class"].get(c, {}).get("AP50", 0.0) for c in confusable]
        cells = [label, *[f"{v:.3f}" for v in per], f"{sum(per) / len(per):.3f}", f"{result['metrics']['mAP50']:.3f}",
                 f"{result['metrics']['mAP50-95']:.3f}", f"{1000 * t:.0f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"\n{data_name}: classifier overhead {ms[1] / ms[0] - 1:+.1%} of the detector-only prediction time")
    return "\n".join(lines)


def main_benchmark(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="synthetic-fine", help="dataset (default: synthetic-fine)")
    parser.add_argument("--detector", default=None, help="detector checkpoint (default: train one)")
    parser.add_argument("--classifier", default=None, help="crop classifier (default: train one)")
    parser.add_argument("--img", type=int, default=320, help="detector inference size (default: 320)")
    parser.add_argument("--device", default="cpu", help="device (default: cpu)")
    parser.add_argument("--repeats", type=int, default=3, help="timing passes over the val images (default: 3)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the runs (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this json file")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="classifier-effect-"))
    detector, classifier = args.detector, args.classifier
    if detector is None:
        _run(["train", "--data", args.data, "--project", str(work), "--name", "detector", "--exist-ok"])
        detector = str(work / "detector" / "weights" / "best.pt")
    if classifier is None:
        _run(["classify", "train", "--data", args.data, "--detector", detector, "--detector-img", str(args.img),
              "--project", str(work), "--name", "classifier", "--exist-ok"])  # fmt: skip
        classifier = str(work / "classifier" / "weights" / "best.pt")
    data = load_data_config(args.data)
    confusable = list(confusable_classes(data) or load_classifier(classifier).names)
    base = _val(detector, args.data, args.img, args.device, work / "val_alone.json", None)
    withc = _val(detector, args.data, args.img, args.device, work / "val_classifier.json", classifier)
    images = [read_image(r.im_file) for r in scan_records(data, "val").records]
    alone_s, both_s, per_image = _time_predictions(detector, classifier, images, img=args.img, device=args.device,
                                                   repeats=args.repeats)  # fmt: skip
    table = _table(args.data, confusable, base, withc, (alone_s, both_s))
    weight = load_classifier(classifier).weight
    print(f"\ndetector {detector}, classifier {classifier} (weight {weight:g}), {len(images)} val images at "
          f"{args.img} px, {per_image:.1f} detections of its classes per image at predict thresholds\n")  # fmt: skip
    print(table)
    if args.json is not None:
        numbers = {"alone": base, "classifier": withc, "seconds_per_image": {"alone": alone_s, "classifier": both_s},
                   "confusable": confusable, "weight": weight}  # fmt: skip
        args.json.write_text(json.dumps(numbers, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_benchmark())
