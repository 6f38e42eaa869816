"""The optimisation of a training run: YOLOv5's rules for parameter groups, decay, schedule and warm-up
(`rules`), the `Optimization` built from them (`optimization`) and the EMA of the weights (`ema`).

Importing this package imports none of its modules; import them directly (`tphyolo.training.optim.rules`).
"""
