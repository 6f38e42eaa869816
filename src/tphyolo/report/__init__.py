"""An evaluation report to look at: where a detector fails, by class, object size and image.

`records` saves and loads the per-image results a report is built from (`evaluation.json`); `matching` matches
detections to objects once per image; `sizes` scores AP50 and recall by object size; `data` computes the
report's numbers (`ReportData`, also what `val --json` writes with `--report`); `figures`, `gallery` and `html`
render them; `writer` writes `report.html` with its pictures.
"""
