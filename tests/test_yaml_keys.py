"""A key written twice in a yaml mapping is refused, naming the key and both lines, in every yaml we read."""

import pytest
import yaml

from tphyolo.data.dataset_config import parse_data_yaml
from tphyolo.models import build_model
from tphyolo.training.hyp import load_hyp
from tphyolo.yaml_files import load_yaml_text


def load_yaml(text):
    return load_yaml_text(text, "t.yaml")


def test_a_repeated_key_is_refused_at_any_depth():
    with pytest.raises(ValueError, match=r"t.yaml: .*key 'nc' is given twice \(lines 1 and 3\)"):
        load_yaml("nc: 10\nnames: [a]\nnc: 80\n")
    with pytest.raises(ValueError, match=r"key 0 is given twice \(lines 2 and 3\)"):
        load_yaml("names:\n  0: car\n  0: bus\n")
    with pytest.raises(ValueError, match="key 'a' is given twice"):
        load_yaml("{a: 1, b: 2, a: 3}")


def test_merged_keys_may_be_overridden_and_equal_values_elsewhere_are_fine():
    text = "base: &base {lr0: 0.01, momentum: 0.9}\nrun:\n  <<: *base\n  lr0: 0.02\nother: {lr0: 0.01}\n"
    assert load_yaml(text)["run"] == {"lr0": 0.02, "momentum": 0.9}
    assert load_yaml("a: 1\nb: 1\n") == yaml.safe_load("a: 1\nb: 1\n")


def test_the_data_hyp_and_model_yamls_refuse_a_repeated_key(tmp_path):
    data = tmp_path / "data.yaml"
    data.write_text("train: images\nnames: [a, b]\nnc: 2\nnc: 3\n")
    with pytest.raises(ValueError, match=f"{data}.*key 'nc' is given twice"):
        parse_data_yaml(data)
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump(load_hyp("synthetic")) + "lr0: 0.5\n")
    with pytest.raises(ValueError, match=f"{hyp}.*key 'lr0' is given twice"):
        load_hyp(hyp)
    model = tmp_path / "model.yaml"
    model.write_text("nc: 2\ndepth_multiple: 0.33\ndepth_multiple: 1.0\n")
    with pytest.raises(ValueError, match=f"{model}.*key 'depth_multiple' is given twice"):
        build_model(str(model))
