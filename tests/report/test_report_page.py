"""The report on the VisDrone samples: an oracle scores AP 1 in every populated size bucket, a detector with
known misses has the recall per bucket that the annotations predict, the page is self-contained, and the report
is rebuilt identically from its saved records."""

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tphyolo.cli import main
from tphyolo.evaluation.detection_files import read_visdrone_rows
from tphyolo.report.sizes import BUCKET_LABELS, bucket_index


def _eval_report(samples: Path, pred: str, protocol: str, run: Path) -> dict:
    argv = ["eval", "--gt", str(samples / "annotations"), "--pred", str(samples / pred), "--protocol", protocol]
    assert main([*argv, "--report", str(run)]) == 0
    return json.loads((run / "report.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["yolo", "coco", "visdrone"])
def test_oracle_scores_one_in_every_populated_bucket(visdrone_samples, tmp_path, protocol):
    sizes = _eval_report(visdrone_samples, "oracle", protocol, tmp_path)["sizes"]
    populated = [b for b in BUCKET_LABELS if sizes["overall"][b]["objects"]]
    assert populated == list(BUCKET_LABELS)  # the samples hold objects of every size
    assert sizes["overall"]["all"]["objects"] > 2000
    for row in [sizes["overall"], *sizes["per_class"].values()]:
        for cell in row.values():
            if cell["objects"]:
                assert cell["AP50"] == pytest.approx(1.0) and cell["recall"] == 1.0, cell
            else:
                assert cell["AP50"] is None and cell["recall"] is None


def _expected_known_misses(annotations: Path) -> dict[str, tuple[int, int]]:
    """Bucket -> (objects, found) read from the annotation files: objects of categories 1..10, found at even lines."""
    objects, found = np.zeros(len(BUCKET_LABELS), int), np.zeros(len(BUCKET_LABELS), int)
    for path in sorted(annotations.glob("*.txt")):
        rows = read_visdrone_rows(path)
        is_object = (rows[:, 5] >= 1) & (rows[:, 5] <= 10)
        xyxy = np.concatenate([rows[:, :2], rows[:, :2] + rows[:, 2:4]], 1)
        bucket = bucket_index(xyxy)
        even = np.arange(len(rows)) % 2 == 0
        np.add.at(objects, bucket[is_object], 1)
        np.add.at(found, bucket[is_object & even], 1)
    return {label: (int(objects[k]), int(found[k])) for k, label in enumerate(BUCKET_LABELS)}


def test_known_misses_give_the_expected_recall_per_bucket(visdrone_samples, tmp_path):
    report = _eval_report(visdrone_samples, "misses", "yolo", tmp_path)
    expected = _expected_known_misses(visdrone_samples / "annotations")
    for label, (objects, found) in expected.items():
        cell = report["sizes"]["overall"][label]
        assert (cell["objects"], cell["found"]) == (objects, found), label
        assert 0 < found < objects
        assert cell["recall"] == pytest.approx(found / objects)
    for name, row in report["sizes"]["per_class"].items():
        for label in BUCKET_LABELS:
            cell = row[label]
            if cell["objects"]:  # every detection is exact: precision 1 down to the last, AP = recall
                assert cell["AP50"] == pytest.approx(cell["recall"]), (name, label)
    misses = sum(image["misses"] for image in report["images"])
    assert misses == sum(objects - found for objects, found in expected.values())
    assert sum(image["FP"] for image in report["images"]) == 0


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.refs += [value for key, value in attrs if key in ("src", "href") and value]


def test_page_is_self_contained(simulated_report):
    text = (simulated_report / "report.html").read_text(encoding="utf-8")
    parser = _References()
    parser.feed(text)
    parser.close()
    assert "http://" not in text and "https://" not in text and "<script" not in text
    assert parser.tags.count("table") >= 6 and parser.tags.count("img") > 20
    for ref in parser.refs:
        assert ref.startswith("report_files/"), ref
        path = simulated_report / ref
        assert path.is_file() and path.stat().st_size > 0, ref
    galleries = [r for r in parser.refs if "/misses_" in r or "/false_positives_" in r]
    assert len(galleries) == 12  # six images with the most misses, six with the most false positives
    for colour in ("true positive", "false positive", "miss", "ground truth (found)"):
        assert colour in text


def test_report_rebuilds_identically_from_its_records(simulated_report, tmp_path, capsys):
    before = (simulated_report / "report.json").read_text()
    page = (simulated_report / "report.html").read_text()
    assert main(["report", str(simulated_report)]) == 0
    assert (simulated_report / "report.json").read_text() == before
    assert (simulated_report / "report.html").read_text() == page
    numbers = json.loads(before)
    assert numbers["protocol"] == "visdrone" and 0 < numbers["metrics"]["mAP50"] < 1
    assert set(numbers) >= {"metrics", "per_class", "sizes", "images", "dataset"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format="other"), "not a tphyolo evaluation file"),
        (lambda d: d.update(protocol="voc"), "'protocol' must be one of"),
        (lambda d: d["images"][0].update(boxes=[[1, 2, 3]]), "images[0].boxes: expected rows of 4 numbers"),
        (lambda d: d["images"][1].pop("detections"), "images[1]: lacks ['detections']"),
    ],
)
def test_bad_records_are_named_in_one_line(simulated_report, tmp_path, capsys, edit, message):
    data = json.loads((simulated_report / "evaluation.json").read_text())
    edit(data)
    (tmp_path / "evaluation.json").write_text(json.dumps(data))
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "evaluation.json") in err and message in err


def test_report_without_records_says_how_to_make_them(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "tphyolo val --report" in capsys.readouterr().err


def test_images_that_cannot_be_read_are_listed_not_drawn(visdrone_samples, tmp_path):
    argv = ["eval", "--gt", str(visdrone_samples / "annotations"), "--pred", str(visdrone_samples / "misses")]
    argv += ["--protocol", "yolo", "--images", str(tmp_path / "none"), "--report", str(tmp_path / "run")]
    assert main(argv) == 0
    page = (tmp_path / "run" / "report.html").read_text()
    assert "Images that could not be read, not drawn: 0000001_02999_d_0000005" in page
    assert not list((tmp_path / "run" / "report_files").glob("*.jpg"))
    numbers = json.loads((tmp_path / "run" / "report.json").read_text())
    assert numbers["sizes"]["overall"]["all"]["found"] > 1000  # scored all the same


def test_eval_report_needs_visdrone_txt_folders(tmp_path, capsys):
    (tmp_path / "gt.json").write_text("{}")
    argv = ["eval", "--gt", str(tmp_path / "gt.json"), "--pred", str(tmp_path / "dt.json"), "--protocol", "coco"]
    assert main([*argv, "--report", str(tmp_path / "run")]) == 2
    assert "--report needs folders of VisDrone txt files" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["yolo", "visdrone"])
def test_eval_prints_and_writes_the_same_numbers_with_a_report(visdrone_samples, tmp_path, capsys, protocol):
    argv = ["eval", "--gt", str(visdrone_samples / "annotations"), "--pred", str(visdrone_samples / "simulated")]
    argv += ["--protocol", protocol]
    assert main([*argv, "--json", str(tmp_path / "plain.json")]) == 0
    plain = capsys.readouterr().out
    assert main([*argv, "--json", str(tmp_path / "with.json"), "--report", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out.endswith(plain)  # after the line naming the report
    assert (tmp_path / "with.json").read_text() == (tmp_path / "plain.json").read_text()
