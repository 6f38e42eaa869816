"""Training hooks: the `TrainHook` interface the trainer calls at the start of a run, after each epoch and at
its end (`base`), the trainer's own hooks (early stopping, the results figure: `builtin`) and an MLflow logger
(`mlflow_logger`)."""
