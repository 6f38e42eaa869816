"""Hyperparameter search on Ray Tune: each trial is a training run, the searcher proposes its hyp values.

`space` (what is searched, within which ranges) and `evolution` (YOLOv5-style mutation of the best so far) are
plain Python; `searchers` builds the Ray Tune searcher a search names. Nothing here imports Ray until a
searcher is built, so `ray[tune]` stays an optional extra (`pip install -e ".[tune]"`).
"""
