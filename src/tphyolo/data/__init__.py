"""Everything between files on disk and a training batch.

Public entry points:

- `load_data_config(source)`: dataset yaml (a path or a built-in name; YOLOv5 / ultralytics layout) -> `DataConfig`;
- `scan_split(sources, ...)`: list, verify and index one split's images and labels (cached) -> `SplitScan`;
- `formats.FORMATS`: the label formats (VisDrone-DET, YOLO, COCO) the scan detects, reads and can write;
- `DetectionDataset` + `build_dataloader(...)`: augmented samples collated into a `Batch`;
- `generate_synthetic(root, ...)`: procedural drone-like dataset in VisDrone format;
- `convert_visdrone(src, dst, to="yolo")`: VisDrone-DET annotations -> any registered format + data.yaml.
"""
