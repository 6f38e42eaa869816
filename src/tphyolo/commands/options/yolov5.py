"""The flags of YOLOv5 v6.0's scripts (which TPH-YOLOv5 keeps) and where each one went in tphyolo.

A YOLOv5 spelling of a setting tphyolo has under another name is accepted as it is: the flag declares it as an
alias (`--conf-thres` beside `--conf`, `--img-size` beside `--img`). `HINTS` says, for each YOLOv5 flag a command
does not take, what to do instead; `tphyolo COMMAND` prints it as one line under the parser's error. The tests
check that every flag of `YOLOV5_FLAGS` is either taken by the command or has a hint, and the docs render both
as the table of the "coming from YOLOv5" page. `ULTRALYTICS_HINTS` does the same for flags of ultralytics' `yolo`
command a newcomer from there tries, and `unknown_command_hint` for a YOLOv5 script's name given as a command
(`tphyolo detect`). Importing this module imports nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

# tphyolo command -> the YOLOv5 script it replaces.
YOLOV5_SCRIPTS: dict[str, str] = {"train": "train.py", "val": "val.py", "predict": "detect.py", "export": "export.py"}

# The flags of each YOLOv5 v6.0 script, in the order its parser declares them.
YOLOV5_FLAGS: dict[str, tuple[str, ...]] = {
    "train": (
        "--weights", "--cfg", "--data", "--hyp", "--epochs", "--batch-size", "--imgsz", "--img", "--img-size",
        "--rect", "--resume", "--nosave", "--noval", "--noautoanchor", "--evolve", "--bucket", "--cache",
        "--image-weights", "--device", "--multi-scale", "--single-cls", "--adam", "--sync-bn", "--workers",
        "--project", "--name", "--exist-ok", "--quad", "--linear-lr", "--label-smoothing", "--patience", "--freeze",
        "--save-period", "--local_rank", "--entity", "--upload_dataset", "--bbox_interval", "--artifact_alias",
    ),
    "val": (
        "--data", "--weights", "--batch-size", "--imgsz", "--img", "--img-size", "--conf-thres", "--iou-thres",
        "--task", "--device", "--single-cls", "--augment", "--verbose", "--save-txt", "--save-hybrid", "--save-conf",
        "--save-json", "--project", "--name", "--exist-ok", "--half",
    ),
    "predict": (
        "--weights", "--source", "--imgsz", "--img", "--img-size", "--conf-thres", "--iou-thres", "--max-det",
        "--device", "--view-img", "--save-txt", "--save-conf", "--save-crop", "--nosave", "--classes",
        "--agnostic-nms", "--augment", "--visualize", "--update", "--project", "--name", "--exist-ok",
        "--line-thickness", "--hide-labels", "--hide-conf", "--half", "--dnn",
    ),
    "export": (
        "--data", "--weights", "--imgsz", "--img", "--img-size", "--batch-size", "--device", "--half", "--inplace",
        "--train", "--optimize", "--int8", "--dynamic", "--simplify", "--opset", "--topk-per-class", "--topk-all",
        "--iou-thres", "--conf-thres", "--include",
    ),
}  # fmt: skip

_NO_WANDB = "no Weights & Biases logging: the run folder has results.csv, results.png and TensorBoard events"
_TFJS_NMS = "for TF.js NMS; exported models end before NMS, which `tphyolo predict --weights W.onnx` runs"

# tphyolo command -> YOLOv5 flag it does not take -> what to do instead (one line).
HINTS: dict[str, dict[str, str]] = {
    "train": {
        "--evolve": "hyperparameter search is its own command: `tphyolo tune` (YOLOv5's evolution is its default)",
        "--bucket": "no cloud storage: copy the dataset to a local folder and give its yaml to --data",
        "--image-weights": "class-weighted image sampling is not implemented",
        "--adam": "use `--optimizer Adam` (or AdamW, SGD)",
        "--quad": "the quad collate is not implemented",
        "--linear-lr": "linear decay is the default here; `--cos-lr` gives cosine",
        "--local_rank": "torchrun passes the rank in the environment: `tphyolo train --device 0,1` launches it",
        "--entity": _NO_WANDB,
        "--upload_dataset": _NO_WANDB,
        "--bbox_interval": _NO_WANDB,
        "--artifact_alias": _NO_WANDB,
    },
    "val": {
        "--single-cls": "val scores the classes the checkpoint has; a model trained with `--single-cls` has one",
        "--save-hybrid": "not implemented; `--save-txt` writes the predictions, the labels are the dataset's own",
        "--save-conf": "`--save-txt` always writes scores in val",
    },
    "predict": {
        "--view-img": "no window: annotated images go to runs/predict/exp; in Python, `result.plot()` draws them",
        "--visualize": "feature maps are not drawn; `tphyolo profile` shows where a forward spends its time",
        "--update": "nothing to update: original checkpoints load as they are (`tphyolo convert checkpoint` converts)",
        "--dnn": "no OpenCV DNN backend: `tphyolo export --format onnx`, then `--weights W.onnx` runs ONNX Runtime",
    },
    "export": {
        "--inplace": "not needed: the exported head always decodes out of place",
        "--train": "exports are for inference only (fused, eval mode)",
        "--optimize": "no mobile optimisation; `--format openvino` or `onnx` are the fast CPU formats",
        "--topk-per-class": _TFJS_NMS,
        "--topk-all": _TFJS_NMS,
        "--iou-thres": _TFJS_NMS,
        "--conf-thres": _TFJS_NMS,
    },
}


_NO_WINDOW = "no window: the drawn {} go to the run folder ({}); in Python, `result.plot()` draws a result"

# tphyolo command -> flag of ultralytics' `yolo predict` / `yolo track` it does not take -> what to do instead.
ULTRALYTICS_HINTS: dict[str, dict[str, str]] = {
    "predict": {"--show": _NO_WINDOW.format("images and videos", "runs/predict/exp")},
    "track": {
        "--show": _NO_WINDOW.format("videos", "runs/track/exp"),
        "--persist": "not needed: tracks persist through each video (and stream) already, and start afresh with "
        "the next",
    },
}


def unknown_flag_hints(command: str, arguments: Iterable[str]) -> list[str]:
    """One line for each YOLOv5 (or ultralytics) flag among `arguments` (what the parser of `command` did not
    take) that has a hint: `--evolve is YOLOv5's: hyperparameter search is ...`. Values after flags are
    ignored."""
    tables = (("YOLOv5's", HINTS.get(command, {})), ("ultralytics'", ULTRALYTICS_HINTS.get(command, {})))
    lines = []
    for argument in arguments:
        name = argument.split("=", 1)[0]
        lines += [f"{name} is {owner}: {hints[name]}" for owner, hints in tables if name in hints]
    return lines


def unknown_command_hint(name: str) -> str | None:
    """The line for a command tphyolo does not have that is a YOLOv5 script's name (`detect`), else None."""
    command = next((c for c, script in YOLOV5_SCRIPTS.items() if script.removesuffix(".py") == name), None)
    if command is None or command == name:
        return None
    return f"{name} is YOLOv5's {YOLOV5_SCRIPTS[command]}: use `tphyolo {command}` (it takes YOLOv5's flags)"
