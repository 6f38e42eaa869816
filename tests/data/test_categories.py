"""The category table of a data set (`tphyolo.data.categories`): what the built-in sets declare, what a yaml's
`categories:` mapping reads as, how it is refused, and how a table round-trips."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from tphyolo.cli import main
from tphyolo.data.builtin.synthetic import NAMES, generate_synthetic
from tphyolo.data.categories import (
    MOT,
    UAVDT,
    VISDRONE,
    CategoryTable,
    parse_categories,
    read_table,
    table_for,
    write_table,
)
from tphyolo.data.dataset_config import parse_data_yaml
from tphyolo.data.formats.visdrone import read_visdrone_rows
from tphyolo.data.scan import scan_split


def test_the_benchmarks_tables_are_their_own():
    assert dict(zip(VISDRONE.ids, VISDRONE.names, strict=True))[4] == "car" and VISDRONE.ids == tuple(range(1, 11))
    assert UAVDT.to_yaml() == {1: "car", 2: "truck", 3: "bus"}
    assert MOT.to_yaml()[1] == "pedestrian" and MOT.to_yaml()[3] == "car"
    assert table_for(VISDRONE.names) == VISDRONE
    assert table_for(NAMES).to_yaml() == {1: "car", 2: "bus", 3: "pedestrian", 4: "truck", 5: "motor", 6: "van"}


def test_a_table_maps_classes_to_categories_and_back():
    table = parse_categories({4: "car", 9: "bus", "1": 2}, ["car", "bus", "pedestrian"], "d.yaml")
    assert table.ids == (4, 9, 1)
    np.testing.assert_array_equal(table.categories([0, 1, 2, -1, 7]), [4, 9, 1, -1, -1])
    np.testing.assert_array_equal(table.classes([4.0, 9, 1, 0, 11, -1]), [0, 1, 2, -1, -1, -1])
    assert table.ids_of(["bus", "van", "car"]) == (9, -1, 4)


@pytest.mark.parametrize("table", [VISDRONE, UAVDT, MOT, CategoryTable(("car", "bus"), (4, 9))])
def test_a_table_round_trips_through_its_file_and_a_yaml_mapping(tmp_path, table):
    assert read_table(write_table(tmp_path / "run", table).parent) == table
    assert parse_categories(yaml.safe_load(yaml.safe_dump(table.to_yaml())), table.names, "x") == table
    assert read_table(tmp_path / "elsewhere") is None


@pytest.mark.parametrize(
    "mapping, problem",
    [
        ({1: "car", 2: "car"}, "'categories' 2: class 'car' has a category already"),
        ({1: "car", 2: "lorry"}, "'categories' 2: 'lorry' is not a class index 0..1 or a name of 'names'"),
        ({1.5: "car", 2: "bus"}, "'categories' key 1.5 is not a whole category number >= 1"),
        ({"one": "car", 2: "bus"}, "'categories' key 'one' is not a whole category number >= 1"),
        ({0: "car", 2: "bus"}, "'categories' key 0 is not a whole category number >= 1"),
        ({1: "car", "1": "bus"}, "'categories' gives category 1 twice"),
        ({1: "car"}, "'categories' gives no category to the class(es) bus"),
        ({1: 0, 2: 5}, "'categories' 2: 5 is not a class index 0..1"),
        ([1, 2], "'categories' must be a mapping"),
    ],
)
def test_a_bad_categories_mapping_is_one_line_naming_the_file_and_key(tmp_path, capsys, mapping, problem):
    path = tmp_path / "data.yaml"
    (tmp_path / "images").mkdir()
    path.write_text(yaml.safe_dump({"train": "images", "val": "images", "names": ["car", "bus"],
                                    "categories": mapping}))  # fmt: skip
    with pytest.raises(ValueError) as error:
        parse_data_yaml(path)
    assert str(error.value).startswith(f"{path}: ") and problem in str(error.value) and "\n" not in str(error.value)
    assert main(["data", "check", "--data", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and problem in err


def test_the_loader_reads_a_sets_files_through_its_categories_mapping(visdrone_copy):
    """VisDrone files of a two-class set numbered by VisDrone's table: car 4 and bus 9 are its classes 0 and 1,
    the other VisDrone categories are left out, ignored regions stay."""
    path = visdrone_copy / "data.yaml"
    path.write_text(yaml.safe_dump({"train": "images", "val": "images", "names": ["car", "bus"],
                                    "categories": {4: "car", 9: "bus"}}))  # fmt: skip
    data = parse_data_yaml(path)
    assert data.categories == (4, 9) and data.category_table == CategoryTable(("car", "bus"), (4, 9))
    scan = scan_split(data.val, names=data.names, categories=data.categories, cache=False)
    for record in scan.records:
        rows = read_visdrone_rows(visdrone_copy / "annotations" / f"{Path(record.im_file).stem}.txt")
        cars, buses = (rows[:, 5] == 4).sum(), (rows[:, 5] == 9).sum()
        assert (record.labels.classes == 0).sum() <= cars and (record.labels.classes == 1).sum() <= buses
        assert len(record.labels.classes) > 0 or cars + buses == 0
    total = sum(len(r.labels.classes) for r in scan.records)
    assert total > 0 and all(set(r.labels.classes.tolist()) <= {0, 1} for r in scan.records)
    assert sum(len(r.labels.ignore) for r in scan.records) > 0  # category 0 stays an ignored region
    unmapped = scan_split(data.val, names=data.names, cache=False)  # class index + 1: categories above 3 refused
    assert unmapped.records == [] and unmapped.report.counts["corrupt"] == len(scan.records)


def test_the_synthetic_set_declares_the_table_its_files_are_numbered_with(tmp_path):
    data = parse_data_yaml(generate_synthetic(tmp_path / "s", n_train=1, n_val=2, imgsz=256))
    declared = yaml.safe_load((tmp_path / "s" / "data.yaml").read_text())["categories"]
    assert declared == {1: "car", 2: "bus", 3: "pedestrian", 4: "truck", 5: "motor", 6: "van"}
    assert data.category_table.to_yaml() == declared and data.categories == ()  # read as without it: unchanged
    for record in scan_split(data.val, names=data.names, cache=False).records:
        rows = read_visdrone_rows(tmp_path / "s" / "val" / "annotations" / f"{Path(record.im_file).stem}.txt")
        written = rows[rows[:, 5] > 0, 5].astype(int)
        np.testing.assert_array_equal(written, data.category_table.categories(record.labels.classes))
