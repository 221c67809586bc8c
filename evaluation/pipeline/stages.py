"""The three stages of a run: generate images, segment them, extract distributions.

A run's files live under ``<data_dir>/runs/<run>/``: ``images/`` and ``masks/`` (PNG,
named by the SHA-256 of their bytes in the one layout of `storage.files`) and ``pixels/`` (one ``.npz`` pixel summary per
segmented image). Every file is written to a temporary name and renamed into place, and
the item's row is updated only after its files exist, so a run killed at any moment
resumes cleanly and redoes at most the batch in flight.
"""

from __future__ import annotations

import io
import time
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from evaluation.color.extraction import distribution_from_pixels, image_pixels
from evaluation.concepts import Concept
from evaluation.models.generation import GenerationError, build_prompt, generate, item_seed
from evaluation.models.registry import (
    DEFAULT_MODELS_DIR,
    ModelSpec,
    load_pipeline,
    spec_from_dict,
    spec_to_dict,
    tiny_in,
)
from evaluation.models.segmentation import BOX_THRESHOLD, TEXT_THRESHOLD, Detector, SamBackend, segment
from evaluation.pipeline import runs
from evaluation.pipeline.executors import Batch, Executor, InProcessExecutor
from evaluation.pipeline.ray_storage import (
    Location,
    is_uri,
    location,
    read_file,
    remove_run_temporaries,
    write_file,
)
from storage import files, transaction
from storage.files import png_bytes

Progress = Callable[[int, int], None]

MAX_RUN_IMAGES = 1_000_000
"""The most images one run may plan. Every model of the registry over the paper's whole grid
(7 models x 1,278 concepts x 2 styles x 7 guidance scales x 5 seeds = 626,220 images) fits;
a typo such as 10**12 seeds is refused before a single item is built (building them would
hold the server's memory until it is killed)."""


def check_run_size(
    models: Sequence[ModelSpec],
    cells: int,
    samples: int,
    what: str,
    *,
    per_cell: str = "seed(s)",
    lower: str = "the seeds, guidance scales, concepts or models",
) -> int:
    """The number of images of a run over `models` x `cells` x each model's guidance scales x
    `samples`, or a ValueError saying what to lower when it is over `MAX_RUN_IMAGES`.

    Parameters
    ----------
    models : sequence of ModelSpec
        Each sweeps its own ``cfg_scales``.
    cells : int
        Cells per model and guidance scale: concepts x styles, or prompts.
    samples : int
        Images per cell and guidance scale (seeds).
    what : str
        What a cell is, for the message, e.g. ``"concept-style pairs"``.
    per_cell, lower : str
        For the message: what `samples` counts, and what the person may lower (the form's
        words: an explicit-color run's *Images per prompt*, not seeds).
    """
    n = sum(len(spec.cfg_scales) for spec in models) * cells * samples
    if n > MAX_RUN_IMAGES:
        scales = sorted({len(spec.cfg_scales) for spec in models})
        raise ValueError(
            f"the run would make {n:,} images ({len(models)} model(s) x {cells:,} {what} x "
            f"{'/'.join(map(str, scales))} guidance scale(s) x {samples:,} {per_cell}); one run makes "
            f"at most {MAX_RUN_IMAGES:,}: lower {lower}, or split it into several runs"
        )
    return n


def save_by_hash(data_dir: Location, folder: Path, data: bytes, suffix: str) -> tuple[str, str]:
    """Store `data` under `data_dir`/`folder` by its SHA-256 (`storage.files.put_bytes`), and say where.

    Writing the same content twice writes the same file (whole, see
    `evaluation.pipeline.ray_storage.write_file`), so a retried item never leaves a second copy.

    Parameters
    ----------
    data_dir : Location
        A folder or an object-store URI (`evaluation.pipeline.ray_storage`).
    folder : Path
        Relative to `data_dir`, e.g. ``runs/<run>/images``.
    data : bytes
        The file's content.
    suffix : str
        File name suffix with its dot, e.g. ``".png"``.

    Returns
    -------
    relative : str
        ``<folder>/<sha[:2]>/<sha256 hex><suffix>`` (`storage.files.content_path`), POSIX
        separators, relative to `data_dir`.
    digest : str
        The SHA-256 of `data`, 64 hex digits.
    """
    stored = files.put_bytes(data_dir, data, folder=Path(folder).as_posix(), suffix=suffix, write=write_file)
    return stored.path, stored.sha256


def read_image(data_dir: str | Path, relative: str) -> np.ndarray:
    """An item's image as (H, W, 3) uint8, or its mask as (H, W) bool (by file content).

    `data_dir` is a folder or a URI (`evaluation.pipeline.ray_storage`); the file is
    decoded within `storage.files.open_image`'s byte and pixel caps.
    """
    with files.open_image(read_file(data_dir, relative), name=relative) as image:
        return np.array(image) if image.mode != "1" else np.array(image, dtype=bool)


def pixel_summary(image: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Per-image record of the masked pixels, as the extraction pipeline consumes them.

    Returns
    -------
    dict
        ``pixels``: (N, 3) uint8 sRGB, the masked foreground downsampled to 100x100
        (`evaluation.color.extraction.image_pixels`, step 1 of Appendix C.3); ``n_pixels``: the
        full-resolution mask's pixel count; ``mask_fraction``: n_pixels / (H * W) in [0, 1].
        `extract` builds distributions from ``pixels`` alone, which gives the same result
        as `evaluation.color.extraction.concept_distribution` on the images and masks.
    """
    return {
        "pixels": image_pixels(image, mask),
        "n_pixels": np.int64(mask.sum()),
        "mask_fraction": np.float64(mask.mean()),
    }


def plan_run(
    models: Sequence[ModelSpec],
    concepts: Sequence[Concept],
    styles: Sequence[str],
    samples: int,
) -> tuple[list[dict], dict]:
    """Items and configuration of a run over models x concepts x styles x cfg x samples.

    Each model sweeps its own `cfg_scales`; its steps and resolution are stored in the
    configuration so that a resumed run generates exactly like the first.
    """
    if samples < 1:
        raise ValueError(f"`samples` must be a positive integer, got {samples}")
    check_run_size(models, len(concepts) * len(styles), samples, "concept-style pairs")
    items = [
        {
            "model": spec.key,
            "concept": c.key,
            "noun": c.base,
            "style": style,
            "cfg": cfg,
            "sample": s,
            "seed": item_seed(spec.key, c.key, style, cfg, s),
            "prompt": build_prompt(c, style),
        }
        for spec in models
        for c in concepts
        for style in styles
        for cfg in spec.cfg_scales
        for s in range(samples)
    ]
    config = {
        "models": {spec.key: spec_to_dict(spec) for spec in models},
        "concepts": [c.key for c in concepts],
        "styles": list(styles),
        "samples": samples,
    }
    return items, config


def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when this process sees a GPU, else ``"cpu"``; others unchanged.

    Resolved where the work runs: a Ray worker sees the GPU Ray gave it.
    """
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def models_dir_of(data_dir: str | Path) -> Path:
    """Where the tiny models of the data folder `data_dir` are built and loaded from: its
    ``models``, or the checkout's for an object store's URI."""
    return DEFAULT_MODELS_DIR if is_uri(data_dir) else Path(data_dir) / "models"


class GenerationWork:
    """Work of the generate stage: images for a batch of items of one model and cfg.

    Loads each model's pipeline once, on first use, and keeps only the current one;
    `device` may be ``"auto"`` (see `resolve_device`). Pickles without its pipeline.
    """

    def __init__(
        self, specs: Mapping[str, ModelSpec], data_dir: str | Path, *, device: str, dtype: Any = None
    ):
        self.specs, self.data_dir, self.device, self.dtype = dict(specs), location(data_dir), device, dtype
        self._current: tuple[str, Any] | None = None

    @classmethod
    def from_run(
        cls, config: Mapping[str, Any], data_dir: str | Path, *, device: str, dtype: Any = None
    ) -> GenerationWork:
        """Work for a stored run configuration (see `plan_run`); a tiny model loads from
        `data_dir`'s ``models`` (`evaluation.models.registry.tiny_in`)."""
        specs = {key: spec_from_dict(fields) for key, fields in config["models"].items()}
        specs = {key: tiny_in(spec, models_dir_of(data_dir)) for key, spec in specs.items()}
        return cls(specs, data_dir, device=device, dtype=dtype)

    def _pipeline(self, key: str) -> Any:
        if self._current is None or self._current[0] != key:
            self._current = None
            device = resolve_device(self.device)
            self._current = (key, load_pipeline(self.specs[key], device=device, dtype=self.dtype))
        return self._current[1]

    def __getstate__(self) -> dict:
        # A distributed executor ships the work to its workers: without the loaded pipeline.
        return {**self.__dict__, "_current": None}

    def __call__(self, batch: Batch) -> Batch:
        spec = self.specs[batch[0]["model"]]
        try:
            out = generate(
                self._pipeline(spec.key),
                [i["prompt"] for i in batch],
                [i["seed"] for i in batch],
                batch[0]["cfg"],
                guidance_param=spec.guidance_param,
                steps=spec.steps,
                resolution=spec.resolution,
                call_kwargs=spec.call_kwargs,
            )
        except GenerationError as exc:
            return [{"id": i["id"], "status": "failed", "error": str(exc)} for i in batch]
        folder = Path("runs") / batch[0]["run"] / "images"
        results = []
        for item, image in zip(batch, out.images):
            path, digest = save_by_hash(self.data_dir, folder, png_bytes(image), ".png")
            results.append(
                {
                    "id": item["id"],
                    "status": "generated",
                    "image_path": path,
                    "image_sha256": digest,
                    "gen_seconds": out.seconds / len(batch),
                    "error": None,
                }
            )
        return results


class SegmentationWork:
    """Work of the segment stage: mask and pixel summary of each generated image."""

    def __init__(
        self,
        detector: Detector,
        sam: SamBackend,
        data_dir: str | Path,
        box_threshold: float = BOX_THRESHOLD,
        text_threshold: float = TEXT_THRESHOLD,
    ):
        self.detector, self.sam, self.data_dir = detector, sam, location(data_dir)
        self.box_threshold, self.text_threshold = box_threshold, text_threshold

    def _write_summary(self, item: dict, image: np.ndarray, result, mask_digest: str) -> str:
        buffer = io.BytesIO()
        np.savez_compressed(
            buffer,
            **pixel_summary(image, result.mask),
            box=np.asarray(result.box),
            score=np.float64(result.score),
        )
        path = Path("runs") / item["run"] / "pixels" / f"{item['image_sha256']}-{mask_digest[:16]}.npz"
        write_file(self.data_dir, path.as_posix(), buffer.getvalue())
        return path.as_posix()

    def _one(self, item: dict) -> dict:
        start = time.perf_counter()
        image = read_image(self.data_dir, item["image_path"])
        result = segment(
            image, item["noun"], self.box_threshold, self.text_threshold, detector=self.detector, sam=self.sam
        )
        update = {
            "id": item["id"],
            "status": "segmented",
            "segment_status": result.status,
            "detected": int(result.detected),
            "mask_path": None,
            "mask_sha256": None,
            "summary_path": None,
            "n_pixels": 0,
        }
        if result.mask is not None:
            masks = Path("runs") / item["run"] / "masks"
            mask_path, digest = save_by_hash(self.data_dir, masks, png_bytes(result.mask), ".png")
            update.update(mask_path=mask_path, mask_sha256=digest, n_pixels=int(result.mask.sum()))
        if result.status == "ok":
            update["summary_path"] = self._write_summary(item, image, result, update["mask_sha256"])
        update["seg_seconds"] = time.perf_counter() - start
        return update

    def __call__(self, batch: Batch) -> Batch:
        return [self._one(item) for item in batch]


def run_stage(
    db: sqlite_utils.Database,
    run: str,
    stage: str,
    work: Callable[[Batch], Batch],
    batch_size: int = 1,
    *,
    executor: Executor | None = None,
    progress: Progress | None = None,
    data_dir: str | Path | None = None,
) -> int:
    """Do the pending items of `stage` for `run`, and make its lost files again; return how
    many items were done (recorded, or their lost files made again: not their batch-mates).

    Parameters
    ----------
    stage : str
        ``"generate"`` (batches share model and cfg) or ``"segment"``.
    work : callable
        `GenerationWork` or `SegmentationWork`.
    batch_size : int
        Items per work call (images per pipeline call for generation).
    executor : Executor, optional
        Defaults to `InProcessExecutor`.
    progress : callable, optional
        ``progress(done, total)`` after each recorded batch; an exception it raises stops
        the stage, keeping what was recorded.
    data_dir : str or Path, optional
        The data folder (a path or a URI): temporary files that a killed earlier attempt left in the run's
        folder are removed first, so a resumed run ends with the files of an
        uninterrupted one; and the files of the stage that a local folder lost are made
        again (`lost_files`).

    Raises
    ------
    LostFileError
        After the rest of the stage, if a lost file came out different from the recorded one.
    """
    if data_dir is not None:
        remove_run_temporaries(data_dir, run)
    lost = {item["id"]: item for item in lost_files(db, run, stage, data_dir)}
    again = original_batches(db, run, stage, set(lost), batch_size)
    recorded = {item["id"]: item for batch in again for item in batch}
    made_again = set(recorded)
    there = _files_there(data_dir, stage, recorded.values())
    pending = runs.pending_items(db, run, stage)
    total, done, counted, unmatched, strays = len(pending) + len(made_again), 0, 0, [], []

    def on_result(results: Batch) -> None:
        nonlocal done, counted
        # A lost file is made again, not recorded: its row and what was made from it stay,
        # so only the bytes it had will do. Its batch-mates are made again only to give it
        # the batch it was made in; their rows stay too.
        unmatched.extend(r["id"] for r in results if r["id"] in lost and not _same_files(r, lost[r["id"]]))
        strays.extend(
            f
            for r in results
            if r["id"] in made_again
            for f in _unrecorded_files(stage, r, recorded[r["id"]])
        )
        runs.record_items(db, [r for r in results if r["id"] not in made_again])
        done += len(results)
        counted += sum(1 for r in results if r["id"] not in made_again or r["id"] in lost)
        if progress is not None:
            progress(done, total)

    try:
        (executor or InProcessExecutor()).run(work, [*runs.batches(pending, batch_size), *again], on_result)
    finally:
        _remove_unrecorded(db, data_dir, strays, keep=there)
    if data_dir is not None:  # a worker killed mid-write (and retried) left its temporary
        remove_run_temporaries(data_dir, run)
    if unmatched:
        what = LOST_FILES[stage]
        shown = ", ".join(map(str, sorted(unmatched)[:5])) + (", ..." if len(unmatched) > 5 else "")
        raise LostFileError(
            f"run {run!r}: {len(unmatched)} of its {len(lost)} lost {what} came out different from the "
            f"recorded ones (item(s) {shown}): what the run made from them came from the lost files; "
            "put those back from a backup, or make the run again under a new name"
        )
    return counted


#: What each stage makes again when the data folder lost it (`lost_files`), in words.
LOST_FILES = {"generate": "image(s)", "segment": "mask(s) or pixel summary(ies)"}
#: The fields a file made again must repeat, per the stage that makes it.
_SAME = {"generate": ("image_sha256",), "segment": ("mask_sha256", "summary_path", "segment_status")}


class LostFileError(ValueError):
    """A run's file that was missing from the data folder and came out different when made again."""


#: Each file a stage writes for an item, with the field holding the SHA-256 that names it.
_FILES = {
    "generate": (("image_path", "image_sha256"),),
    "segment": (("mask_path", "mask_sha256"), ("summary_path", "mask_sha256")),
}


def _unrecorded_files(
    stage: str, result: Mapping[str, Any], item: Mapping[str, Any]
) -> list[tuple[str, str, str, str]]:
    """The files that making `item` again in `stage` wrote (`result`) other than those its
    row records: ``(path field, sha field, path, sha)`` each."""
    return [
        (path_field, sha_field, result[path_field], result.get(sha_field))
        for path_field, sha_field in _FILES[stage]
        if result.get(path_field)
        and (result[path_field], result.get(sha_field)) != (item.get(path_field), item.get(sha_field))
    ]


def _files_there(data_dir: str | Path | None, stage: str, items) -> set[str]:
    """The recorded files of `stage` of `items` that the local data folder holds now."""
    if data_dir is None or is_uri(data_dir):
        return set()
    root = Path(data_dir).resolve()
    paths = {item[field] for item in items for field, _ in _FILES[stage] if item.get(field)}
    return {path for path in paths if files.is_stored(root, path)}


def _remove_unrecorded(
    db: sqlite_utils.Database, data_dir: str | Path | None, found: list[tuple], *, keep: set[str]
) -> None:
    """Remove the files of `found` (`_unrecorded_files`) that no row records with the same
    bytes, but those of `keep` (there before the stage: a file that was not lost stays): a
    lost file made again with other bytes (refused, `LostFileError`), or a batch-mate that
    came out otherwise, was left in the data folder (outside probe 200: 14 images after a
    refusal), and one at its recorded path hid the loss from the next run."""
    if data_dir is None or is_uri(data_dir):
        return
    for path_field, sha_field, path, sha in found:
        if path in keep:
            continue
        kept = db.execute(
            f"select 1 from run_items where {path_field} = ? and {sha_field} is ? limit 1", [path, sha]
        ).fetchone()
        if kept is None:
            (Path(data_dir) / path).unlink(missing_ok=True)


def _same_files(result: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    stage = "generate" if result.get("status") == "generated" else "segment"
    return result.get("status") in ("generated", "segmented") and all(
        result.get(field) == item[field] for field in _SAME[stage]
    )


def original_batches(
    db: sqlite_utils.Database, run: str, stage: str, ids: set[int], batch_size: int
) -> list[list[dict]]:
    """The batches an uninterrupted `stage` of `run` made the items `ids` in: every item the
    stage took (for ``generate`` all, for ``segment`` those with an image), in grid order,
    cut as `run_stage` cuts them, and of those the batches holding one of `ids`.

    A lost file is made again in its own batch: on some CPUs a pipeline's arithmetic
    depends on how many images share a call (one image alone came out different from the
    same image made beside its batch-mate). A run that was stopped and resumed may have
    made an item in another batch; its lost file then comes out different and is refused.
    """
    if not ids:
        return []
    # Ids, models and cfgs alone first (a full-size run has 200,000 items), whole rows only
    # for the batches made again.
    took = db.execute(
        "select id, model, cfg from run_items where run = ?"
        + ("" if stage == "generate" else " and coalesce(image_path, '') != ''")
        + f" order by {runs.GRID_ORDER}",
        [run],
    ).fetchall()
    wanted = [
        [item["id"] for item in batch]
        for batch in runs.batches([{"id": i, "model": m, "cfg": c} for i, m, c in took], batch_size)
        if any(item["id"] in ids for item in batch)
    ]
    rows = {row["id"]: row for row in runs.items_by_id(db, [i for batch in wanted for i in batch])}
    return [[rows[i] for i in batch] for batch in wanted]


def lost_files(db: sqlite_utils.Database, run: str, stage: str, data_dir: str | Path | None) -> list[dict]:
    """The items of `run` whose files from `stage` are missing from the local data folder
    `data_dir` (none for a URI or None: a cluster's storage is not checked here).

    ``generate``: an item with an image recorded that is not there. ``segment``: a masked
    item whose image is there but its mask or pixel summary is not. The stage makes each
    again (from the item's seed; from its image) and keeps it when it repeats what was
    recorded (the SHA-256 of an image or a mask, which also names the summary); on a CPU
    it does.
    """
    if data_dir is None or is_uri(data_dir):
        return []
    root = Path(data_dir).resolve()

    def gone(path: str | None) -> bool:
        return bool(path) and not files.is_stored(root, path)

    made = ("generated", "segmented") if stage == "generate" else ("segmented",)
    # The paths alone first: a full-size run has 200,000 items, and few files are ever lost.
    paths = db.execute(
        f"select id, image_path, mask_path, summary_path from run_items where run = ? "
        f"and status in ({', '.join('?' * len(made))})",
        [run, *made],
    ).fetchall()
    if stage == "generate":
        lost = {i for i, image, _, _ in paths if gone(image)}
    else:
        lost = {i for i, image, mask, summary in paths if not gone(image) and (gone(mask) or gone(summary))}
    return runs.items_by_id(db, sorted(lost))


class PixelSummaryError(ValueError):
    """A run item's pixel summary that cannot be read (a damaged or foreign file)."""


#: What reading a damaged ``.npz`` raises: not a zip (`zipfile.BadZipFile`, or numpy's
#: ValueError for bytes it takes for a pickle), cut short (EOFError, `zlib.error`), a zip
#: without the ``pixels`` array (KeyError), or an OSError of the zip reader.
_DAMAGED = (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)
#: The fields of a run item that `read_pixels` reads (and names when it refuses).
SUMMARY_FIELDS = ("id", "run", "model", "concept", "style", "cfg", "sample", "summary_path")


def read_pixels(data_dir: str | Path, item: Mapping[str, Any]) -> np.ndarray:
    """The ``pixels`` of a run item's pixel summary (see `pixel_summary`): (N, 3) uint8 sRGB.

    Parameters
    ----------
    data_dir : str or Path
        The data folder (a path or a URI, `evaluation.pipeline.ray_storage`).
    item : Mapping
        A ``run_items`` row, with at least `SUMMARY_FIELDS`.

    Raises
    ------
    PixelSummaryError
        When the file is not an ``.npz`` archive holding a ``pixels`` array; the one-line
        message names the file (relative to `data_dir`), the item and what to do. A file
        that is missing or cannot be opened raises the OSError of `read_file`.
    """
    data = read_file(data_dir, item["summary_path"])
    try:
        summary = np.load(io.BytesIO(data))
        if not isinstance(summary, np.lib.npyio.NpzFile):  # a bare .npy array
            raise ValueError("not an .npz archive")
        with summary:
            return summary["pixels"]
    except _DAMAGED as exc:
        why = (
            "it holds no `pixels` array" if isinstance(exc, KeyError) else "it is not a readable .npz archive"
        )
        raise PixelSummaryError(
            f"{item['summary_path']}: the pixel summary of item {item['id']} of run {item['run']!r} "
            f"({item['model']}, {item['concept']}, {item['style']}, cfg {float(item['cfg']):g}, "
            f"sample {item['sample']}) cannot be read ({why}); put the file back from a copy of the "
            "data folder, or make the run again under a new name: the segment stage wrote it, and "
            f"`python -m evaluation segment --run {item['run']}` skips an item already segmented"
        ) from None


class ExtractionWork:
    """Work of the extract stage: P_M(x|c) of groups from their items' pixel summaries.

    A batch row is one group: ``model, concept, style, cfg``, ``items`` (the usable
    items, each with `SUMMARY_FIELDS`; their summaries are relative to `data_dir`) and
    ``n_excluded``. Holds no model (``stateless``: a distributed executor may run it as
    plain tasks).
    """

    stateless = True

    def __init__(self, data_dir: str | Path):
        self.data_dir = location(data_dir)

    def _one(self, group: dict) -> dict:
        p, detail = None, None
        if group["items"]:
            result = distribution_from_pixels([read_pixels(self.data_dir, item) for item in group["items"]])
            p, detail = result.p, result.groups
        return {
            **{k: group[k] for k in ("model", "concept", "style", "cfg", "n_excluded")},
            "p": p,
            "n_images": len(group["items"]),
            "groups": detail,
        }

    def __call__(self, batch: Batch) -> Batch:
        return [self._one(group) for group in batch]


def extract(
    db: sqlite_utils.Database,
    run: str,
    data_dir: str | Path,
    *,
    force: bool = False,
    progress: Progress | None = None,
    executor: Executor | None = None,
    batch_size: int = 16,
) -> int:
    """Compute P_M(x|c) for each fully segmented (model, concept, style, cfg) of `run`.

    Reads the items' pixel summaries (see `pixel_summary`) and runs steps 2-5 of the
    extraction pipeline (`evaluation.color.extraction.distribution_from_pixels`) on them, through
    `ExtractionWork` and `executor` (default `InProcessExecutor`), `batch_size` groups per
    call; the results are stored here, one transaction per batch.

    Images whose segmentation is not ``ok`` are excluded and counted in ``n_excluded``;
    a group with no usable image is stored with ``p = NULL``. Groups already stored are
    skipped unless `force`. Returns the number of distributions written; ``progress(done,
    total)`` follows each stored batch. A pixel summary that cannot be read stops the stage
    with `PixelSummaryError` (see `read_pixels`); the batches stored before it stay.
    """
    todo = [
        {
            "model": model,
            "concept": concept,
            "style": style,
            "cfg": cfg,
            "items": [{k: r[k] for k in SUMMARY_FIELDS} for r in rows if r["segment_status"] == "ok"],
            "n_excluded": sum(r["segment_status"] != "ok" for r in rows),
        }
        for (model, concept, style, cfg), rows in runs.segmented_groups(db, run)
        if force or not runs.has_model_distribution(db, run, model, concept, style, cfg)
    ]
    written = 0

    def on_result(results: Batch) -> None:
        nonlocal written
        with transaction(db):
            for r in results:
                runs.store_model_distribution(
                    db,
                    run,
                    r["model"],
                    r["concept"],
                    r["style"],
                    r["cfg"],
                    r["p"],
                    r["n_images"],
                    r["n_excluded"],
                    r["groups"],
                )
        written += len(results)
        if progress is not None:
            progress(written, len(todo))

    batches = [todo[start : start + batch_size] for start in range(0, len(todo), batch_size)]
    (executor or InProcessExecutor()).run(ExtractionWork(data_dir), batches, on_result)
    return written
