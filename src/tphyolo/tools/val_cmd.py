"""`tphyolo val`: score a checkpoint on a dataset split (YOLO, COCO or VisDrone protocol)."""

from __future__ import annotations

import argparse

from tphyolo.tools.predict_cmd import add_inference_arguments, check_weights

HELP = "evaluate a checkpoint on a dataset split (mAP table, plots, json/txt outputs)"
USES_RUNTIME = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--weights", required=True, help="checkpoint file (tphyolo or original TPH-YOLOv5/YOLOv5)")
    parser.add_argument("--data", required=True, help="dataset yaml, folder, or built-in name (visdrone, synthetic)")
    parser.add_argument("--task", choices=("val", "test"), default="val", help="split to evaluate (default: val)")
    add_inference_arguments(parser, conf=0.001, iou=0.6, batch=32)
    parser.add_argument(
        "--protocol", choices=("yolo", "coco", "visdrone"), default="yolo", help="scoring rules (default: yolo)"
    )
    parser.add_argument("--workers", type=int, default=2, help="data loading processes (default: 2)")
    parser.add_argument("--save-json", action="store_true", help="COCO results json (predictions.json)")
    parser.add_argument("--save-txt", action="store_true", help="YOLO txt with scores per image (labels/)")
    parser.add_argument("--plots", action="store_true", help="PR/F1/P/R curves, confusion matrix, batch images")
    parser.add_argument("--verbose", action="store_true", help="per-class rows in the table (always for test)")


def run(args: argparse.Namespace) -> int:
    import torch

    from tphyolo.checkpoint import load_checkpoint
    from tphyolo.data.dataset_config import load_data_config
    from tphyolo.data.loader import build_dataloader, build_dataset
    from tphyolo.engine.evaluate import evaluate, format_results
    from tphyolo.engine.tta import TTAConfig
    from tphyolo.engine.writers import run_dir

    check_weights([args.weights])
    data = load_data_config(args.data)
    checkpoint = load_checkpoint(args.weights)
    names = list(data.names) or list(checkpoint.names)
    if data.names and len(data.names) != checkpoint.nc:
        raise ValueError(f"{args.weights}: {checkpoint.nc} classes, but {args.data} has {len(data.names)}")
    device = args.runtime.torch_device()
    if args.half and device.type != "cuda":
        raise ValueError(f"--half needs a CUDA device, got {device}")
    model = checkpoint.build_model().fuse().to(device).eval()
    if args.half:
        model = model.half()
    stride = int(torch.as_tensor(model.stride).max())
    if args.runtime.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if args.runtime.compile != "off":
        model = torch.compile(model, mode=args.runtime.compile)
    if args.img % stride:
        raise ValueError(f"--img {args.img} must be a multiple of the model's largest stride {stride}")
    dataset, _ = build_dataset(data, args.task, imgsz=args.img, rect=True, batch_size=args.batch, stride=stride)
    loader = build_dataloader(dataset, batch_size=args.batch, workers=args.workers, pin_memory=device.type == "cuda")
    save_dir = run_dir(args.project or "runs/val", args.name, exist_ok=args.exist_ok)
    results = evaluate(
        model,
        loader,
        names=names,
        device=device,
        runtime=args.runtime,
        conf_thres=args.conf,
        iou_thres=args.iou,
        max_det=args.max_det,
        protocol=args.protocol,
        half=args.half,
        tta=TTAConfig(tuple(args.tta_scales), tuple(args.tta_flips)) if args.augment else None,
        merge=args.merge,
        merge_iou=args.merge_iou,
        save_dir=save_dir,
        save_json=args.save_json,
        save_txt=args.save_txt,
        plots=args.plots,
        progress=True,
    )
    print(format_results(results, verbose=args.verbose or args.task == "test"))
    print(f"results in {save_dir}")
    return 0
