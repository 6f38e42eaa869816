"""Runs into a run folder: the runner every resumable sharded run shares (`units`: units dealt to the ranks,
journaled, resumed, gathered), the journal of finished units (`journal`) and what a resume checks of its inputs
(`resume`).

Importing this package imports none of its modules; import them directly (`tphyolo.predict.runner.units`).
"""
