"""`tphyolo predict` and `tphyolo val` with `--classifier`, and `val --json`, on the painted scene with a detector
that knows it (put in place of the loaded weights) and a saved classifier forced to answer "tricycle"."""

import json

import pytest
from reclassify_scene import NAMES, SceneDetector, save_forced_classifier, scene, write_scene_data

from tphyolo.cli import main
from tphyolo.infer.backends.pytorch import TorchBackend

TRICYCLE, AWNING = NAMES.index("tricycle"), NAMES.index("awning-tricycle")


def _scene_backends(weights, *, runtime, device, fuse=True, **choices):  # backend, precision, job: one model
    return [TorchBackend(runtime.prepare_model(SceneDetector(), device), runtime=runtime, device=device)]


@pytest.fixture
def scene_detector(monkeypatch):
    """`--weights` of predict and val load the scene detector, whatever the file."""
    # the modules that bind load_backends at import come first, so that they import with the real one
    monkeypatch.setattr("tphyolo.infer.build.load_backends", _scene_backends)  # predict and val build through it
    monkeypatch.setattr("tphyolo.infer.backends.pytorch.load_backends", _scene_backends)


@pytest.fixture(scope="module")
def forced(tmp_path_factory):
    return save_forced_classifier(tmp_path_factory.mktemp("classifier") / "tricycle.pt", k=0)


@pytest.fixture(scope="module")
def data_yaml(tmp_path_factory):
    return write_scene_data(tmp_path_factory.mktemp("scene"))


def _val(tmp_path, data_yaml, name, *extra):
    argv = ["val", "--weights", "scene.pt", "--data", str(data_yaml), "--img", "256", "--batch", "2", "--device",
            "cpu", "--workers", "0", "--project", str(tmp_path), "--name", name, "--verbose", *extra]  # fmt: skip
    return main(argv)


def _table(out: str) -> dict[str, list[float]]:
    """The YOLO table's rows printed by val: name -> [P, R, mAP50, mAP50-95]."""
    lines = out.split("mAP@.5:.95", 1)[1].splitlines()[1:]
    rows = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 7:
            break
        rows[parts[0]] = [float(v) for v in parts[3:]]
    return rows


@pytest.mark.parametrize("tta", [[], ["--augment"]], ids=["plain", "tta"])
def test_val_json_holds_the_printed_numbers_and_the_classifier_changes_them(
    scene_detector, forced, data_yaml, tmp_path, capsys, tta
):
    assert _val(tmp_path, data_yaml, "base", "--json", str(tmp_path / "base.json"), *tta) == 0
    base_out = capsys.readouterr().out
    argv = ["--classifier", str(forced), "--json", str(tmp_path / "cls.json"), *tta]
    assert _val(tmp_path, data_yaml, "cls", *argv) == 0
    out = capsys.readouterr().out
    base, data = json.loads((tmp_path / "base.json").read_text()), json.loads((tmp_path / "cls.json").read_text())
    assert set(base) == {"protocol", "metrics", "per_class"}
    assert set(data) == {"protocol", "metrics", "per_class", "classifier_classes"}
    assert data["protocol"] == "yolo" and data["classifier_classes"] == ["tricycle", "awning-tricycle"]
    for printed, numbers in ((_table(base_out), base), (_table(out), data)):
        assert set(printed) == {"all", *NAMES}
        for name, values in printed.items():
            row = numbers["metrics"] if name == "all" else numbers["per_class"][name]
            keys = ("P", "R", "mAP50", "mAP50-95") if name == "all" else ("P", "R", "AP50", "AP50-95")
            assert values == [float(f"{row[k]:.3g}") for k in keys], name
    # the detector calls both tricycles awning-tricycles, the classifier calls both tricycles: one right each time
    assert base["per_class"]["tricycle"]["AP50"] == 0 and data["per_class"]["tricycle"]["AP50"] > 0.5
    assert base["per_class"]["awning-tricycle"]["AP50"] > 0.4 and data["per_class"]["awning-tricycle"]["AP50"] == 0
    for name in ("car", "pedestrian"):
        assert data["per_class"][name] == base["per_class"][name] and base["per_class"][name]["AP50"] > 0.9
    assert "ms crop classifier" in out


def test_predict_with_classifier_tta_and_slicing_relabels_the_set(scene_detector, forced, tmp_path):
    image = tmp_path / "scene.png"
    import cv2

    cv2.imwrite(str(image), scene())
    argv = ["predict", "--source", str(image), "--weights", "scene.pt", "--img", "256", "--device", "cpu",
            "--project", str(tmp_path), "--exist-ok", "--save-txt", "--save-conf", "--no-save-img",
            "--augment", "--slice", "160", "--slice-full"]  # fmt: skip
    assert main([*argv, "--name", "base"]) == 0
    assert main([*argv, "--name", "cls", "--classifier", str(forced)]) == 0
    base = [line.split() for line in (tmp_path / "base" / "labels" / "scene.txt").read_text().splitlines()]
    relabelled = [line.split() for line in (tmp_path / "cls" / "labels" / "scene.txt").read_text().splitlines()]
    assert sorted(r[1:5] for r in base) == sorted(r[1:5] for r in relabelled)  # the same boxes
    assert {int(r[0]) for r in base} == {0, 1, AWNING}
    assert {int(r[0]) for r in relabelled} == {0, 1, TRICYCLE}
    outside = sorted((r[1:5], r[0], r[5]) for r in base if int(r[0]) < TRICYCLE)
    assert outside == sorted((r[1:5], r[0], r[5]) for r in relabelled if int(r[0]) < TRICYCLE)


def test_a_classifier_of_other_classes_is_a_one_line_error(scene_detector, data_yaml, tmp_path, capsys):
    other = save_forced_classifier(tmp_path / "vehicles.pt", k=0, names=("van", "bus"), dataset_names=("van", "bus"))
    assert _val(tmp_path, data_yaml, "v", "--classifier", str(other)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(other) in err and "['van', 'bus'] are not among the detector's classes" in err


def test_classifier_weight_needs_a_classifier(scene_detector, data_yaml, tmp_path, capsys):
    assert _val(tmp_path, data_yaml, "v", "--classifier-weight", "0.5") == 2
    assert capsys.readouterr().err.strip() == "tphyolo val: error: --classifier-weight needs --classifier"
