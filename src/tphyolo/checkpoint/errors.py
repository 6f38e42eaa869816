"""The error of a checkpoint file that cannot be saved, fetched or loaded."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be saved or loaded; the message names the file and the problem."""
