"""The report page: one html file with inline CSS and no script, its pictures in a folder beside it referenced
by relative links, nothing fetched from the network; it prints on paper as it shows on screen.

`render_html(data, figures, galleries, files)` returns the page text; every number on it is read from the
`ReportData` (the object `val --json` writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path

from tphyolo.metrics.registry import get_protocol
from tphyolo.report.data import GALLERY_SCORE, ReportData
from tphyolo.report.gallery import LEGEND, Tile
from tphyolo.report.sizes import ALL, BUCKET_LABELS, SizeScore

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #aaa; margin-top: 1.6em; font-size: 1.2em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #eee; }
figure { display: inline-block; margin: 4px; vertical-align: top; }
figcaption { font-size: 0.75em; max-width: 480px; }
img { max-width: 100%; }
.crops img { width: 96px; height: 96px; }
.gallery figure { width: 48%; } .gallery figcaption { max-width: none; }
.legend span { display: inline-block; margin-right: 1.2em; font-size: 0.85em; }
.legend i { display: inline-block; width: 1.2em; height: 0.8em; margin-right: 0.3em; border: 2px solid; }
.note { font-size: 0.85em; color: #555; }
@media print { body { max-width: none; } h2 { page-break-after: avoid; } figure { page-break-inside: avoid; } }
"""


def _table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells = "".join(f"<th>{escape(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(_fmt(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _figure(files: str, name: str, caption: str = "") -> str:
    cap = f"<figcaption>{escape(caption)}</figcaption>" if caption else ""
    return f'<figure><img src="{escape(files)}/{escape(name)}" alt="{escape(caption or name)}">{cap}</figure>'


def _bgr_css(bgr: tuple[int, int, int]) -> str:
    b, g, r = bgr
    return f"#{r:02x}{g:02x}{b:02x}"


def _summary(data: ReportData) -> str:
    r = data.results
    rows = [["protocol", r.protocol], ["images", r.images], ["objects", r.instances],
            ["P (YOLO)", r.mp], ["R (YOLO)", r.mr], ["mAP50", r.map50], ["mAP50-95", r.map]]  # fmt: skip
    if not get_protocol(r.protocol).yolo_metrics:
        rows += [[f"{r.protocol} {k} (%)", f"{v:.2f}"] for k, v in r.extra.items()]
    rows += [[f"speed {k} (ms/image)", f"{v:.1f}"] for k, v in r.speed.items()]
    settings = _table(["setting", "value"], sorted(data.settings.items())) if data.settings else ""
    return _table(["", "value"], rows) + settings


def _per_class(data: ReportData) -> str:
    head = ["class", "images", "objects", "P", "R", "AP50", "AP50-95"]
    rows = [[c.name, c.images, c.instances, c.precision, c.recall, c.map50, c.map] for c in data.results.per_class]
    table = _table(head, rows) if rows else "<p>No detection was correct: no per-class numbers.</p>"
    protocol = ""
    if not get_protocol(data.results.protocol).yolo_metrics and data.results.protocol_per_class:
        keys = list(next(iter(data.results.protocol_per_class.values())))
        prow = [[name, *(f"{v[k]:.2f}" for k in keys)] for name, v in data.results.protocol_per_class.items()]
        protocol = f"<p>{escape(data.results.protocol)} protocol, percent:</p>" + _table(["class", *keys], prow)
    return table + protocol


def _size_cell(cell: SizeScore) -> str:
    return "–" if not cell.objects else f"{cell.ap50:.3f} / {cell.recall:.3f} ({cell.objects})"


def _sizes(data: ReportData, files: str, figure: str, per_class_figure: str) -> str:
    labels = [*BUCKET_LABELS, ALL]
    head = ["class", *(f"{label} px" if label != ALL else ALL for label in labels)]
    rows = [["all classes", *(_size_cell(data.sizes.overall[k]) for k in labels)]]
    rows += [[name, *(_size_cell(row[k]) for k in labels)] for name, row in data.sizes.per_class.items()]
    note = (
        '<p class="note">Each cell: AP50 / recall (objects). Size: sqrt(w*h) of the box in original pixels. A '
        "bucket is scored on its own objects: detections that found an object of another bucket are left out, "
        "false positives fall in the bucket of their own size; ignore regions and crowd objects are treated as "
        f"the {escape(data.results.protocol)} protocol treats them. Matching at IoU 0.5, all-point AP.</p>"
    )
    plots = _figure(files, figure, "AP50 and recall by object size, all classes")
    plots += _figure(files, per_class_figure, "AP50 by object size, per class")
    return plots + note + _table(head, rows)


def _tiles(files: str, tiles: Sequence[Tile]) -> str:
    return "".join(_figure(files, t.file, t.caption) for t in tiles) or "<p>None.</p>"


def _galleries(files: str, galleries: dict) -> str:
    legend = "".join(
        f'<span><i style="border-color:{_bgr_css(colour)}"></i>{escape(name)}</span>'
        for name, (colour, _) in LEGEND.items()
    )
    parts = [f'<p class="legend">{legend}</p>', f'<p class="note">Detections scoring at least {GALLERY_SCORE}.</p>']
    for title, key in (("the most missed objects", "misses"), ("the most false positives", "false_positives")):
        parts += [f"<h3>Images with {title}</h3>", f'<div class="gallery">{_tiles(files, galleries[key])}</div>']
    parts.append("<h3>Worst misses (largest first) and false positives (highest score first), by class</h3>")
    for name, misses, fps in galleries["crops"]:
        parts.append(f"<h4>{escape(name)}</h4>")
        parts.append(f'<div class="crops"><p>misses:</p>{_tiles(files, misses)}')
        parts.append(f"<p>false positives:</p>{_tiles(files, fps)}</div>")
    if galleries["unreadable"]:
        listed = ", ".join(escape(p) for p in galleries["unreadable"][:10])
        parts.append(f'<p class="note">Images that could not be read, not drawn: {listed}</p>')
    return "".join(parts)


def _dataset(data: ReportData, files: str, figure: str) -> str:
    stats = data.dataset.as_json()
    sides = stats["object_side_px"]
    per_image = stats["objects_per_image"]
    rows = [
        ["images", stats["images"]],
        ["objects (scored)", stats["objects"]],
        [
            "objects per image, mean / max",
            f"{per_image['mean']:.1f} / {per_image['max']}",
        ],
        ["object side px, 10% / 50% / 90%", " / ".join(_fmt(v) for v in sides.values())],
        ["ignore regions", stats["ignore_regions"]],
    ]
    per_class = _table(["class", "objects"], [[k, v] for k, v in stats["objects_per_class"].items()])
    return _figure(files, figure, "objects per image and object sizes") + _table(["", ""], rows) + per_class


def _errors(data: ReportData) -> str:
    worst = sorted(data.errors, key=lambda e: (-(e.misses + e.false_positives), e.path))[:20]
    rows = [[Path(e.path).name, e.objects, e.misses, e.true_positives, e.false_positives] for e in worst]
    return _table(["image", "objects", "misses", "TP", "FP"], rows)


def render_html(data: ReportData, figures: dict[str, str], galleries: dict, files: str, *, title: str) -> str:
    """The page (see the module docstring); `figures` and `galleries` name files in the folder `files`."""
    sections = [
        ("Summary", _summary(data)),
        ("Per class", _per_class(data)),
        ("AP and recall by object size", _sizes(data, files, figures["sizes"], figures["size_classes"])),
        ("Curves and confusion", _figure(files, figures["pr"], "precision-recall at IoU 0.5 (YOLO matching)")
         + _figure(files, figures["scores"], "scores of true and false positives (report matching)")
         + _figure(files, figures["confusion"], "confusion matrix, columns normalised, background last")),
        ("Images with the most errors", _errors(data)),
        ("Galleries", _galleries(files, galleries)),
        ("Dataset", _dataset(data, files, figures["dataset"])),
    ]  # fmt: skip
    body = "".join(f"<h2>{escape(name)}</h2>{content}" for name, content in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )
