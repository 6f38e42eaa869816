"""The lines and zones yaml: what it accepts, and one line naming the file and the problem for what it refuses."""

import numpy as np
import pytest

from tphyolo.analyze import load_regions

GOOD = """
lines:
  - name: north_exit
    points: [[0, 270], [512, 260], [1024, 270]]
zones:
  - name: junction
    points: [[200, 100], [800, 100], [800, 440], [200, 440]]
"""


def write(tmp_path, text):
    path = tmp_path / "regions.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_lines_and_zones(tmp_path):
    regions = load_regions(write(tmp_path, GOOD), frame_size=(1024, 540))
    [line], [zone] = regions.lines, regions.zones
    assert line.name == "north_exit" and line.points.shape == (3, 2) and line.points[1].tolist() == [512, 260]
    assert zone.name == "junction" and np.array_equal(zone.points[2], [800, 440])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("lines: []\n", "no lines and no zones"),
        (
            "lines:\n  - name: a\n    points: [[0, 10], [2000, 10]]\n",
            "line 'a': point (2000, 10) is outside",
        ),
        (
            "zones:\n  - name: bow\n    points: [[0, 0], [100, 100], [100, 0], [0, 100]]\n",
            "edges cross",
        ),
        ("lines:\n  - name: a\n    points: [[0, 10]]\n", "line 'a': needs 2 or more"),
        ("zones:\n  - name: z\n    points: [[0, 0], [9, 9]]\n", "zone 'z': needs 3 or more"),
        (
            "lines: [{name: a, points: [[0, 1], [2, 3]]}]\nzones: [{name: a, points: [[0, 0], [9, 0], [9, 9]]}]\n",
            "name 'a' is given twice",
        ),
        ("lines: {a: 1}\n", "'lines' must be a list"),
        ("cameras: []\n", "unknown key(s) ['cameras']"),
    ],
)
def test_refuses_bad_files_in_one_line_naming_the_file(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as error:
        load_regions(path, frame_size=(1024, 540))
    message = str(error.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("lines:\n  - name: far\n    points: [[1e308, 1e308], [-1e308, -1e308]]\n",
         "line 'far': points value 1e+308 is beyond ±10,000,000 px"),
        ("lines:\n  - name: huge\n    points: [[0, 0], [1" + "0" * 400 + ", 0]]\n", "line 'huge': points must be"),
        ("lines:\n  - name: dot\n    points: [[320, 0], [320, 0]]\n", "line 'dot': points 1 and 2 are the same point"),
        ("lines:\n  - name: bent\n    points: [[0, 0], [5, 5], [5, 5], [9, 0]]\n", "points 2 and 3 are the same"),
        ("lines:\n  - name: t\n    points: [[true, 0], [10, 0]]\n", "line 't': points must be [[x, y], ...] numbers"),
        ("lines:\n  - name: s\n    points: [[one, 0], [10, 0]]\n", "line 's': points must be [[x, y], ...] numbers"),
        ("lines:\n  - name:\n    points: [[0, 0], [10, 0]]\n", "lines[0]: 'name' must be a non-empty name"),
        ("lines:\n  - name: '  '\n    points: [[0, 0], [10, 0]]\n", "lines[0]: 'name' must be a non-empty name"),
        ("zones:\n  - name: [a]\n    points: [[0, 0], [9, 0], [9, 9]]\n", "zones[0]: 'name' must be a non-empty"),
        ("lines:\n  - name: geo\n    latlon: [[91, 0], [0, 1]]\n", "latlon value 91 is beyond latitude -90..90"),
    ],
)
def test_refuses_coordinates_and_names_that_would_count_wrong(tmp_path, text, problem):
    """Each of these was accepted: a line of 1e308 coordinates crossed every track yet counted none (the
    crossing products overflow), a zero-length line, `true` read as 1, an empty name read as 'None'."""
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as error:
        load_regions(path, frame_size=None)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message
