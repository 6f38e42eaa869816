"""`tphyolo classify train|val`: the crop classifier that re-labels a detector's confusable classes."""

from __future__ import annotations

import argparse

from tphyolo.classify.config import ClassifyConfig
from tphyolo.flags import add_flags, from_flags

USES_RUNTIME = True
ACTIONS = ("train", "val")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="train a classifier, or validate one (--weights)")
    add_flags(parser, ClassifyConfig)
    parser.add_argument("--task", choices=("val", "test"), default="val", help="val: the split to evaluate")


def _print_accuracy(accuracy) -> None:
    print(accuracy.table())
    print()
    print(accuracy.matrix_text())


def run(args: argparse.Namespace) -> int:
    from tphyolo.errors import UsageError

    if args.action == "train":
        from tphyolo.train.classifier.fit import fit_classifier

        result = fit_classifier(from_flags(ClassifyConfig, args), args.runtime, log=print)
        _print_accuracy(result.accuracy)
        print(f"results in {result.run_dir} ({result.seconds:.0f} s); weights: {result.best}, {result.last}")
        return 0
    if not args.weights:
        raise UsageError("classify val needs --weights: a crop-classifier checkpoint")
    from tphyolo.train.classifier.fit import validate_classifier

    accuracy = validate_classifier(
        args.weights,
        args.data,
        split=args.task,
        runtime=args.runtime,
        batch=2 * args.batch,
        workers=args.workers,
        min_side=args.min_size,
    )
    print(f"{args.weights} on the '{args.task}' split of {args.data}:")
    _print_accuracy(accuracy)
    return 0
