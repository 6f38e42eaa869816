"""Training the crop classifier (`fit`) and choosing its combination weight by running the detector (`sweep`):
the application of the classifier library `tphyolo.classify`, which imports none of this.

Importing this package imports none of its modules; import them directly (`tphyolo.training.classifier.fit`).
"""
