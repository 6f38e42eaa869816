"""How `tphyolo eval --help` groups the flags of its job (`tphyolo.evaluation.jobs.EvalJob`): those of
`--task track` and `--task count` under their own headings."""

from __future__ import annotations

EVAL_FLAG_GROUPS = {  # heading (None: the command's own) -> the EvalJob fields under it
    None: ("task", "gt", "pred", "data", "protocol", "images", "json", "report", "save_gt"),
    "--task track": ("format", "split"),
    "--task count: --pred an analyze run (counts.json), --gt its true tracks": ("lines", "source"),
}
