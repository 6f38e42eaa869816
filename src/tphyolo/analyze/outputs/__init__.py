"""What the analytics write: drawn frames and the files of a run folder."""
