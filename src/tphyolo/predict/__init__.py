"""Prediction on top of the inference core: sources (files, folders, videos, streams, in-memory images), the
`Predictor` API, `Results`, the writers of its outputs and drawing.

Importing this package imports none of its modules; import them directly (`tphyolo.predict.predictor`).
"""
