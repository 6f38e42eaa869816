"""The error of a checkpoint file that cannot be saved, fetched or loaded."""

from tphyolo.errors import InputError


class CheckpointError(InputError):
    """A checkpoint that cannot be saved or loaded; the message names the file and the problem."""
