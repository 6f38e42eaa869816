"""Hyperparameter search on Ray Tune: each trial is a training run, the searcher proposes its hyp values.

`space` (what is searched, within which ranges) is plain Python; `searchers` holds YOLOv5-style evolution and
builds the Ray Tune searcher a search names; `trials` keeps the search's table; `trainable` is one trial and
`search` the whole search. Nothing here imports Ray until a search starts, so `ray[tune]` stays an optional extra
(`pip install -e ".[tune]"`).
"""
