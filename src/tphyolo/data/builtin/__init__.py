"""The built-in synthetic data sets, generated on first use (deterministic): `synthetic` (drone-like scenes of the
VisDrone classes), `synthetic-fine` (confusable classes told apart by fine detail) and `synthetic-mot` (drone
videos with true identities, for tracking).

Importing this package imports none of its modules; import them directly (`tphyolo.data.builtin.synthetic`).
"""
