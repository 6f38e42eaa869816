"""Evaluation on top of the inference core: the validation loop over a dataset (`loop.evaluate`) and scoring a
checkpoint on a split in one call (`val.val`).

Importing this package imports none of its modules; import them directly (`tphyolo.evaluation.loop`).
"""
