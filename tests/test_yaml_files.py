"""The one yaml loader: plain data, anchors and aliases as usual, but no file that expands past the node limit,
no recursive alias, nothing over the size limit."""

import tracemalloc

import pytest

from tests.reliability.corpus import billion_laughs
from tphyolo.yaml_files import MAX_YAML_BYTES, load_yaml_file, load_yaml_text


def test_aliases_within_the_limit_load_as_usual():
    text = "base: &b {lr0: 0.01, momentum: 0.9}\nfine: *b\nmerged: {<<: *b, lr0: 0.1}\nnames: [a, b]\n"
    data = load_yaml_text(text, "hyp.yaml")
    assert data["fine"] == {"lr0": 0.01, "momentum": 0.9}
    assert data["merged"] == {"lr0": 0.1, "momentum": 0.9} and data["names"] == ["a", "b"]


def test_billion_laughs_is_refused_at_once():
    """Refused while parsing, with nothing expanded: the parse allocates under 1 MiB (10**9 strings would be tens
    of GB). Memory, unlike time, does not depend on the machine's load."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="lol.yaml: invalid yaml .*expands to over 1,000,000 nodes"):
            load_yaml_text(billion_laughs(), "lol.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak


@pytest.mark.parametrize("text", ["a: &a [1, *a]", "a: &a {b: *a}"])
def test_a_recursive_alias_is_refused(text):
    with pytest.raises(ValueError, match="x.yaml: invalid yaml .*recursive alias"):
        load_yaml_text(text, "x.yaml")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"x: " + b"a" * MAX_YAML_BYTES, "f.yaml: yaml file of .* bytes, above the limit"),
        (b"names: [caf\xe9]\n", "f.yaml: not UTF-8 text"),
        (b"!!python/object/apply:os.system ['true']\n", "f.yaml: invalid yaml .*could not determine a constructor"),
    ],
)
def test_size_encoding_and_code_tags_are_refused(tmp_path, content, message):
    (tmp_path / "f.yaml").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_yaml_file(tmp_path / "f.yaml")
