"""`tphyolo classify train|val`: the crop classifier that re-labels a detector's confusable classes."""

from __future__ import annotations

import argparse
from dataclasses import fields

from tphyolo.classify.config import ClassifierSplit, ClassifyConfig
from tphyolo.errors import UsageError
from tphyolo.flags import add_flags, from_flags

USES_RUNTIME = True
VAL_SETTINGS = ("data", "weights", "batch", "workers", "min_size")  # the ClassifyConfig flags `classify val` takes


def add_arguments(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """`classify train` and `classify val`, each with its own flags (`tphyolo classify train -h` shows train's);
    returns the two parsers, which get the runtime flags."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    train = actions.add_parser("train", help="train a crop classifier", description="train a crop classifier")
    add_flags(train, ClassifyConfig)
    val = actions.add_parser("val", help="validate a crop classifier (--weights)",
                             description="validate a crop classifier (--weights) on a split of --data")  # fmt: skip
    add_flags(val, ClassifyConfig, exclude=[f.name for f in fields(ClassifyConfig) if f.name not in VAL_SETTINGS])
    add_flags(val, ClassifierSplit)
    return [train, val]


def _print_accuracy(accuracy) -> None:
    print(accuracy.table())
    print()
    print(accuracy.matrix_text())


def run(args: argparse.Namespace) -> int:
    if args.action == "train":
        from tphyolo.training.classifier.fit import fit_classifier  # lazy: torch; not for 'classify -h'

        result = fit_classifier(from_flags(ClassifyConfig, args), args.runtime, log=print)
        _print_accuracy(result.accuracy)
        print(f"results in {result.run_dir} ({result.seconds:.0f} s); weights: {result.best}, {result.last}")
        return 0
    if not args.weights:
        raise UsageError("classify val needs --weights: a crop-classifier checkpoint")
    from tphyolo.training.classifier.fit import validate_classifier  # lazy: torch; not for 'classify -h'

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
