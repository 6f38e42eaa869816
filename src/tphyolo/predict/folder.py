"""A prediction over files into one run folder, as `tphyolo.predict.run.run_predict` runs it: in one process, or
shared by the ranks of a torchrun run; resumable either way.

The files are cut into units (`sources.source_units`: groups of images, a video), run by the runner of every
sharded run (`predict.runner.units`), dealt and gathered as `runtime.sharding` states. Every rank writes the
outputs of its files into the one run folder, with the names one process gives them, and journals each unit it
finishes (`predict.runner.journal`). At the end rank 0 gathers every rank's detections and writes
predictions.json in file order, as one process writes it. A resumed run leaves out the units the journal records
as finished (whatever number of processes finished them) and deals the others anew; one stopped by a fault
still writes predictions.json of what it did, in one process.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from tqdm import tqdm

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.errors import InputError
from tphyolo.ops.detections import Detections
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle
from tphyolo.predict.job import SETTINGS_FILE
from tphyolo.predict.outputs import OutputSettings
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.runner.journal import FrameRecord, UnitRecord
from tphyolo.predict.runner.units import RunJournal, UnitRunner
from tphyolo.predict.sources import Stream, count_frames, source_names, source_units
from tphyolo.predict.writers import PredictionWriter, coco_gt_image_ids, coco_predictions, output_name
from tphyolo.runtime.decisions import write_decisions
from tphyolo.runtime.distributed import DistContext


@dataclass(frozen=True)
class PredictionRun:
    """What a prediction run did, over all ranks and, when resumed, with what was finished before: detections
    found, files predicted and skipped (undecodable), how many of the files were finished before, and how many
    frames came with a warning (`Frame.notes`)."""

    save_dir: Path
    detections: int
    files: int
    skipped: int
    finished_before: int
    warned: int = 0


@dataclass(frozen=True)
class RunCallbacks:
    """What a prediction run tells its caller as it goes. on_skip(file, error): as `Predictor.stream` (called on
    the rank that met the file); on_note(text): each warning a frame comes with (`Frame.notes`) and each bad
    journal line a resume meets (on rank 0)."""

    on_skip: Callable[[Path | Stream, Exception], None] | None = None
    on_note: Callable[[str], None] | None = None


class _Progress:
    """This rank's state: the units it runs (`runner.mine`), and the frames of the unit under way."""

    def __init__(self, runner: UnitRunner[UnitRecord], units: Sequence[Sequence[int]], names: Sequence[str]) -> None:
        self.runner, self.names = runner, names
        self.units = [units[k] for k in runner.mine]
        self.unit_of = {position: k for k, unit in enumerate(self.units) for position in unit}
        self.next = 0  # the first unit not journaled yet
        self.frames: list[FrameRecord] = []
        self.detections = 0
        self.warned = 0
        self.skipped: dict[int, int] = {}

    def finish_before(self, unit: int, writer: PredictionWriter) -> None:
        """Journal every unit before `unit` (all of them for len(units)): their outputs are complete."""
        while self.next < min(unit, len(self.units)):
            files = [self.names[i] for i in self.units[self.next]]
            for name in files:
                writer.end_file(name)
            record = UnitRecord(tuple(files), self.detections, self.skipped.get(self.next, 0), tuple(self.frames),
                                self.warned)  # fmt: skip
            self.runner.finish(self.runner.mine[self.next], record)
            self.frames, self.detections, self.warned = [], 0, 0
            self.next += 1


def predict_into(
    predictor: Predictor,
    files: Sequence[Path | Stream],
    writer: PredictionWriter,
    *,
    dist: DistContext,
    save_json: bool = False,
    image_ids: dict[str, int] | None = None,
    resume: bool = False,
    vid_stride: int = 1,
    calls: RunCallbacks = RunCallbacks(),
    progress: bool = True,
) -> PredictionRun:
    """Predict `files` (`sources.resolve_source`) and write each frame with `writer` into its folder, and
    predictions.json there with `save_json` (COCO image ids from `image_ids` by output name when given);
    module docstring. Every rank of a torchrun run calls this with the same arguments (`writer` on the same
    folder). resume: leave out what the folder's journal records as finished (each line checked; a bad one is
    passed to `calls.on_note` and its unit redone). calls: see RunCallbacks. The counts returned are rank 0's
    (each rank gets its own)."""
    on_skip, on_note = calls.on_skip, calls.on_note
    save_dir = writer.save_dir
    names = source_names(files)
    all_units = source_units(files, batch=predictor.config.batch)
    journal = RunJournal(save_dir, read=partial(UnitRecord.from_json, classes=len(predictor.names)), resume=resume,
                         on_bad=on_note)  # fmt: skip
    runner = UnitRunner([tuple(names[i] for i in u) for u in all_units], dist=dist, journal=journal)
    state = _Progress(runner, all_units, names)
    positions: dict[Path | Stream, list[int]] = {}  # this rank's positions of each file, in the order it reads them
    for unit in state.units:
        for i in unit:
            positions.setdefault(files[i], []).append(i)

    def skip(file: Path | Stream, error: Exception) -> None:
        unit = state.unit_of[positions[file].pop(0)]
        state.skipped[unit] = state.skipped.get(unit, 0) + 1
        if on_skip is not None:
            on_skip(file, error)

    bar = None
    if progress and dist.is_main:
        total = count_frames([files[i] for k in runner.left for i in all_units[k]], vid_stride=vid_stride)
        bar = tqdm(total=total, unit="img", desc="predict")
    failed = True
    try:
        stream = predictor.stream(files, units=state.units, on_skip=skip, vid_stride=vid_stride)
        for frame, detections in stream:
            state.finish_before(state.unit_of[frame.file], writer)
            for note in frame.notes if on_note is not None else ():
                on_note(note)
            state.warned += bool(frame.notes)
            name = output_name(frame)
            if save_json and image_ids is not None and name not in image_ids:
                raise InputError(f"{frame.path}: the COCO ground truth has no image named {name!r}")
            writer.write(frame, detections)
            state.detections += len(detections)
            if save_json:
                state.frames.append(FrameRecord(names[frame.file], frame.index, name, detections.rows()))
            done_frames = runner.count(1)
            if bar is not None:
                bar.update(done_frames - bar.n)
        state.finish_before(len(state.units), writer)
        failed = False
    finally:
        if bar is not None:
            bar.close()
        writer.close()
        if failed and save_json and not dist.distributed:  # what was written before the fault
            partial_unit = UnitRecord((), 0, 0, tuple(state.frames))
            _write_json(save_dir / "predictions.json", [*runner.records(), partial_unit], names, image_ids)
    gathered = runner.gather()
    units_done = runner.records() if gathered is None else gathered[0]
    if save_json and gathered is not None:
        _write_json(save_dir / "predictions.json", units_done, names, image_ids)
    skipped = sum(unit.skipped for unit in units_done)
    return PredictionRun(
        save_dir=save_dir,
        detections=sum(unit.detections for unit in units_done),
        files=len(files) - skipped,
        skipped=skipped,
        finished_before=sum(len(unit.files) for unit in runner.before.values()),
        warned=sum(unit.warned for unit in units_done),
    )


def predict_to_folder(
    predictor: Predictor,
    files: Sequence[Path | Stream],
    save_dir: Path,
    outputs: OutputSettings,
    *,
    dist: DistContext,
    style: DrawStyle = DEFAULT_STYLE,
    image_ids: dict[str, int] | None = None,
    settings: Mapping[str, Any] | None = None,
    model: str = "tphyolo",
    **options: Any,
) -> PredictionRun:
    """Predict `files` into the run folder `save_dir` with the writers `outputs` asks for, drawn in `style`
    (`predict_into`, which takes `options`: resume, vid_stride, calls, progress). settings: the run's
    settings, written to save_dir/SETTINGS_FILE by rank 0 once the writers accepted them (a refusal leaves no
    settings behind), for a resume to read. model: the model's name in the labelling tools' files."""
    # predictions.json is predict_into's: it gathers every rank's detections
    writer = PredictionWriter(save_dir, names=predictor.names, outputs=replace(outputs, save_json=False), style=style,
                              model=model)  # fmt: skip
    if settings is not None and dist.is_main:
        write_text_atomic(Path(save_dir) / SETTINGS_FILE, yaml.safe_dump(dict(settings)))
        write_decisions(Path(save_dir), {"predict": predictor.decisions})
    return predict_into(predictor, files, writer, dist=dist, save_json=outputs.save_json, image_ids=image_ids,
                        **options)  # fmt: skip


def source_image_ids(coco_gt: Path | str, files: Sequence[Path | Stream]) -> dict[str, int]:
    """The COCO image ids of `files` by output name, from the COCO dataset json `coco_gt`; raises ValueError
    naming it when one of the files has no image there."""
    image_ids = coco_gt_image_ids(Path(coco_gt))
    missing = [name for name in source_names(files) if name not in image_ids]
    if missing:
        raise InputError(f"{coco_gt}: no image named {missing[0]!r} ({len(missing)} source file(s) missing)")
    return image_ids


def _write_json(path: Path, units: Sequence[UnitRecord], names: Sequence[str], image_ids: dict[str, int] | None):
    """predictions.json of the frames of `units`, in file order (the position of a file's output name among
    `names`, then frame index): the order one process writes them in."""
    first = {}
    for position, name in enumerate(names):
        first.setdefault(name, position)
    frames = sorted((f for unit in units for f in unit.frames), key=lambda f: (first[f.file], f.index))
    named = [(f.name, Detections.from_rows(f.rows)) for f in frames]
    write_text_atomic(path, json.dumps(coco_predictions(named, image_ids)))
