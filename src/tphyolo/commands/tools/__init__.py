"""The commands around the tasks: the environment (`doctor`), measurement (`bench`, `profile`), converting files
(`convert`) and rebuilding reports (`report`). The task commands (train, val, predict, ...) are in the parent."""
