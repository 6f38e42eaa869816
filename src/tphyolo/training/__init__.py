"""Training: the `Trainer` and its builders (config, data, model, optimisation), the loop, loss, hyperparameters
and recipes, resumable state, logs and plots; the crop classifier's training (`train.classifier`).

Importing this package imports none of its modules; import them directly (`tphyolo.training.trainer`).
"""
