"""`tphyolo data check` prints a correct report."""

import cv2
import numpy as np
import yaml

from tphyolo.cli import main


def test_data_check_on_visdrone_mini(visdrone_copy, tmp_path, capsys):
    data = tmp_path / "d.yaml"
    data.write_text(yaml.safe_dump({"path": str(visdrone_copy), "train": "images", "val": "images",
                                    "names": ["pedestrian", "people", "bicycle", "car", "van", "truck", "tricycle",
                                              "awning-tricycle", "bus", "motor"]}))  # fmt: skip
    assert main(["data", "check", "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "[train] 40 images: 40 labels found, 0 missing, 0 empty, 0 corrupt" in out
    assert "instances: 2531 in 40 usable images" in out
    for name, count in (("pedestrian", 483), ("car", 1091), ("awning-tricycle", 53), ("motor", 302)):
        assert any(line.split()[1:] == [name, str(count)] for line in out.splitlines()), name
    assert "ignore regions: 35 in 16 images" in out
    assert "short side < 8 px: 262" in out
    assert "[val] same images as [train]" in out
    assert main(["data", "check", "--data", str(data)]) == 0
    assert "(loaded)" in capsys.readouterr().out


def test_data_check_bare_folder_with_problems(visdrone_copy, capsys):
    (visdrone_copy / "annotations" / "0000001_02999_d_0000005.txt").write_text("1,2,3\n")
    (visdrone_copy / "images" / "broken.jpg").write_bytes(b"not a jpeg")
    assert main(["data", "check", "--data", str(visdrone_copy), "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "41 images: 39 labels found, 0 missing, 0 empty, 2 corrupt" in out
    assert "0000001_02999_d_0000005.txt:1: expected at least 6" in out
    assert "broken.jpg: cannot read image" in out
    assert not (visdrone_copy / "annotations.cache.json").exists()


def test_data_check_of_visdrone_with_only_the_val_split_names_each_missing_download_and_checks_val(
    visdrone_mini, tmp_path, capsys
):
    from tests.helpers import visdrone_subset

    datasets = tmp_path / "datasets"
    (datasets / "VisDrone" / "VisDrone2019-DET-val").mkdir(parents=True)
    visdrone_subset(visdrone_mini, datasets / "VisDrone" / "VisDrone2019-DET-val", 3)
    assert main(["data", "check", "--data", "visdrone", "--datasets-dir", str(datasets)]) == 0
    out = capsys.readouterr().out.splitlines()
    root = (datasets / "VisDrone").resolve()
    for split, folder in (("train", "VisDrone2019-DET-train"), ("test", "VisDrone2019-DET-test-dev")):
        (line,) = [line for line in out if line.startswith(f"[{split}]")]
        assert line == (f"[{split}] missing {root / folder / 'images'}; get it from https://github.com/VisDrone/"
                        f"VisDrone-Dataset (VisDrone2019-DET train, val and test-dev zips) and unzip it into {root}")
    assert "[val] 3 images: 3 labels found, 0 missing, 0 empty, 0 corrupt" in "\n".join(out)


def test_data_check_with_none_of_the_asked_splits_on_disk_is_one_error_line(tmp_path, capsys):
    data = tmp_path / "d.yaml"
    data.write_text(yaml.safe_dump({"path": str(tmp_path), "train": "a/images", "val": "b/images", "names": ["x"]}))
    assert main(["data", "check", "--data", str(data), "--splits", "train,val"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tphyolo data: error: --data {data}: none of the splits train, val is on disk"]


def test_a_visdrone_folder_reports_the_number_of_classes_it_found(tmp_path, capsys):
    (tmp_path / "images").mkdir()
    (tmp_path / "annotations").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "a.jpg"), np.zeros((64, 64, 3), np.uint8))
    (tmp_path / "annotations" / "a.txt").write_text("1,1,10,10,1,4,0,0\n")  # one car
    assert main(["data", "check", "--data", str(tmp_path), "--no-scan-cache"]) == 0
    out = capsys.readouterr().out
    assert "unknown" not in out  # was: "(unknown number of classes)" above a list of ten
    assert out.splitlines()[-1].startswith("data: 10 classes found: pedestrian, people, bicycle, car,")
