"""`tphyolo.val(...)`: one call from weights and data to the metrics, checked with a detector that knows the
answer."""

import pytest
from tests.evaluation.test_evaluate import CPU, VISDRONE_NAMES, Oracle, _loader

import tphyolo
from tphyolo.evaluation.results import EvalResults


class NamedOracle(Oracle):
    """The ground-truth detector with the dataset's class names, as a checkpoint would carry them."""

    def __init__(self, loader, names) -> None:
        super().__init__(loader, nc=len(VISDRONE_NAMES))
        self.names = list(names)


@pytest.mark.parametrize(("protocol", "perfect"), [("yolo", 0.995), ("coco", 1.0)])
def test_val_scores_a_perfect_detector_perfectly(data_yaml, tmp_path, protocol, perfect):
    oracle = NamedOracle(_loader(data_yaml, imgsz=320, batch=2), VISDRONE_NAMES)  # the loader val builds
    metrics = tphyolo.val(oracle, data_yaml, imgsz=320, batch=2, iou=0.99, runtime=CPU, workers=0,
                          protocol=protocol, save_dir=tmp_path, save_json=True)  # fmt: skip
    assert isinstance(metrics, EvalResults) and metrics.images == 4 and metrics.instances > 100
    assert metrics.map50 == pytest.approx(perfect, abs=1e-6) and metrics.map == pytest.approx(perfect, abs=1e-6)
    assert {c.name for c in metrics.per_class} <= set(VISDRONE_NAMES) and metrics.per_class
    assert (tmp_path / "predictions.json").is_file()


def test_val_refuses_a_model_whose_classes_do_not_match_the_data(data_yaml):
    oracle = NamedOracle(_loader(data_yaml, imgsz=320, batch=2), VISDRONE_NAMES[:3])
    with pytest.raises(ValueError, match="3 classes, but .* has 10"):
        tphyolo.val(oracle, data_yaml, imgsz=320, runtime=CPU, workers=0)
