"""Class names and counts of a data yaml: each malformed entry is one ValueError naming the yaml."""

import re

import pytest

from tphyolo.data.dataset_config import parse_data_yaml


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("names: []", "'names' is empty"),
        ("names: {}", "'names' is empty"),
        ("nc: 0", "'nc' must be a whole number of classes >= 1, got 0"),
        ("nc: -1", "'nc' must be a whole number of classes >= 1, got -1"),
        ("nc: 10.7", "'nc' must be a whole number of classes >= 1, got 10.7"),
        ("nc: '3'", "'nc' must be a whole number of classes >= 1, got '3'"),
        ("nc: true", "'nc' must be a whole number of classes >= 1, got True"),
        ("names: [car, 7]", "class 1 of 'names' must be a non-empty string (quote it), got 7"),
        ("names: [car, [bus]]", "class 1 of 'names' must be a non-empty string"),
        ("names: [car, null]", "class 1 of 'names' must be a non-empty string"),
        ("names: {0: car, 1: {a: b}}", "class 1 of 'names' must be a non-empty string"),
        ("names: {a: car}", "'names' keys must be class ids 0, 1, ..., got 'a'"),
        ("names: {0.5: car}", "'names' keys must be class ids 0, 1, ..., got 0.5"),
        ("names: {0: car, '0': bus}", "'names' gives a class id twice"),
        ("names: {0: car, 2: bus}", "'names' ids must be 0..1, got [0, 2]"),
        ("names: car", "'names' must be a list or a mapping, got str"),
        ("names: [a, b]\nnc: 3", "nc=3 but 2 names"),
    ],
)
def test_bad_names_or_class_counts_name_the_yaml(tmp_path, entries, message):
    path = tmp_path / "data.yaml"
    path.write_text(f"train: images\nval: images\n{entries}\n")
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        parse_data_yaml(path)
    assert str(error.value).startswith(f"{path}: ") and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("entries", "names"),
    [
        ("names: [car, bus]", ("car", "bus")),
        ("names: {1: bus, 0: car}\nnc: 2", ("car", "bus")),
        ("names: {'0': car, '1': bus}", ("car", "bus")),
        ("nc: 2", ("class0", "class1")),
    ],
)
def test_good_names_and_counts_are_read(tmp_path, entries, names):
    path = tmp_path / "data.yaml"
    path.write_text(f"train: images\n{entries}\n")
    assert parse_data_yaml(path).names == names
