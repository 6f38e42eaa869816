"""Checkpoints: the detector checkpoint format (`format`), release weights (`release`) and the explicit
converter of pickled checkpoints of the original code (`legacy`).

Importing this package imports none of its modules; import them directly (`tphyolo.checkpoint.format`).
"""
