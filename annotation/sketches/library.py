"""Sketches in the store: the shipped library, imports, generated candidates, the chosen one.

Every sketch is a ``sketches`` row naming a PNG under the data folder
(``sketches/ab/<sha256>.png``, `annotation.files`); a base concept's colorization tasks
use its *selected* sketch (at most one per base, ``selected = 1``), and only bases with
one are handed out (`annotation.assignment`). Sources:

- ``shipped``: ``assets/sketches/`` (manifest and PNGs), loaded at every start-up by
  `sync_shipped_sketches` (idempotent);
- ``imported``: files an admin uploads (PNG, JPEG, WebP or SVG), vetted and normalised
  by `annotation.sketches.importing` (`import_sketches`), rejected with the reason when they are
  not line art;
- ``generated``: candidates from a text-to-image pipeline with the paper's sketch prompt
  (Appendix B.2, `generate_candidates`); those that pass the line-art check are stored
  unselected, and an admin picks one with `select_sketch`.

Choices where the paper is silent: a sketch that arrives for a base without a selected
sketch becomes its selected sketch (imports may also replace it, see `import_sketches`);
a re-rasterised shipped sketch replaces an older shipped one but never a sketch the
admin chose; colorings keep the id of the sketch they were made on.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlite_utils
from PIL import Image

from annotation.concepts import get_concept
from annotation.errors import InvalidInput, NotFound, check_text, shown
from annotation.files import MAX_BYTES, MAX_PIXELS, decode_image, resolve, store_bytes
from annotation.sketches.importing import (
    MANIFEST_CSV,
    ImportedSketch,
    NotLineArtError,
    check_line_art,
    concept_for_filename,
    encode_png,
    import_sketch_file,
    load_manifest,
    normalize_sketch,
    png_data_url,
    sketch_prompt,
)
from storage import audit, insert_row, iso, select, transaction, update_rows
from storage.shown import shown_path

SOURCES = ("shipped", "imported", "generated")
IMPORT_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".svg")
CANDIDATES = 5
"""Candidates generated per concept (Appendix B.2: five)."""
_FOLDER = "sketches"


@dataclass(frozen=True)
class ImportResult:
    """What happened to one imported file: stored as `sketch_id`, or refused for `reason`;
    `known` when the library held this very drawing already (nothing new was stored)."""

    name: str
    base: str | None
    sketch_id: int | None
    reason: str
    known: bool = False
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.sketch_id is not None


@dataclass(frozen=True)
class Candidate:
    """One generated sketch candidate.

    Attributes
    ----------
    image : ndarray, shape (H, W, 3), uint8
        The pipeline's output, sRGB [0, 255].
    seed : int
        Its seed.
    sketch_id : int or None
        The stored (normalised, unselected) sketch; None when it was not line art.
    reason : str
        Why it was refused ("" when stored).
    """

    image: np.ndarray
    seed: int
    sketch_id: int | None
    reason: str


def sync_shipped_sketches(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    *,
    manifest: str | Path = MANIFEST_CSV,
    now: dt.datetime | None = None,
) -> int:
    """Load the shipped sketch library into ``sketches``; safe to call at every start.

    Parameters
    ----------
    data_dir : str or Path
        The app's data folder; PNGs are copied under ``sketches/``.
    manifest : str or Path
        The library's ``manifest.csv`` (`annotation.sketches.importing.load_manifest`).

    Returns
    -------
    int
        Rows added (0 when the library is already loaded). A file missing from the data
        folder (e.g. a wiped folder) is written again.
    """
    added = 0
    with transaction(db):
        for entry in load_manifest(manifest):
            png = entry.png.read_bytes()
            sha = hashlib.sha256(png).hexdigest()
            rows = list(db["sketches"].rows_where("base = ? and sha256 = ?", [entry.concept, sha]))
            if rows:
                if not resolve(data_dir, rows[0]["path"]).is_file():
                    store_bytes(data_dir, png, folder=_FOLDER)
                continue
            current = _selected_row(db, entry.concept)
            replace = current is None or current["source"] == "shipped"
            add_sketch(
                db,
                data_dir,
                entry.concept,
                png,
                source="shipped",
                select=replace,
                meta={"file": f"assets/sketches/{entry.png.name}"},
                now=now,
            )
            added += 1
    return added


def add_sketch(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    base: str,
    png: bytes,
    *,
    source: str,
    select: bool,
    meta: dict | None = None,
    actor: str = "system",
    now: dt.datetime | None = None,
) -> int:
    """Store a normalised sketch PNG for a base concept; its id.

    Parameters
    ----------
    base : str
        A base concept (the key of its ``original`` variant, e.g. ``"apple"``).
    png : bytes
        A normalised sketch (`annotation.sketches.importing.encode_png`).
    source : {'shipped', 'imported', 'generated'}
    select : bool
        Make it the base's selected sketch (the previous one is deselected).
    meta : dict, optional
        JSON-able facts (file name, prompt, seed...).

    Returns
    -------
    int
        The new id, or the existing id when this base already has these exact bytes
        (then only `select` is applied).
    """
    if source not in SOURCES:
        raise InvalidInput(f"`source` must be one of {SOURCES}, got {shown(source)}")
    check_base(db, base)
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    stored = store_bytes(data_dir, png, folder=_FOLDER)
    with transaction(db):
        rows = list(db["sketches"].rows_where("base = ? and sha256 = ?", [base, stored.sha256]))
        if rows:
            sketch_id = rows[0]["id"]
        else:
            sketch_id = insert_row(
                db,
                "sketches",
                {
                    "base": base,
                    "path": stored.path,
                    "sha256": stored.sha256,
                    "source": source,
                    "selected": 0,
                    "width": width,
                    "height": height,
                    "meta": json.dumps(meta or {}, sort_keys=True),
                    "created": iso(now),
                },
            )
            audit.record(
                db,
                actor,
                "add_sketch",
                "sketch",
                sketch_id,
                details={"base": base, "source": source},
                now=now,
            )
        if select:
            select_sketch(db, sketch_id, actor=actor, now=now)
    return sketch_id


def select_sketch(
    db: sqlite_utils.Database,
    sketch_id: int,
    *,
    actor: str = "system",
    why: str = "",
    base: str | None = None,
    now: dt.datetime | None = None,
) -> None:
    """Make `sketch_id` its base concept's sketch for new tasks (one selected per base).

    With `base`, the sketch must be one of that concept's: an id typed for the concept on
    screen never makes another concept's drawing that concept's sketch.

    Raises
    ------
    NotFound
        If there is no such sketch.
    ValueError
        If the sketch is not one of `base`'s.
    """
    check_text(why, "why")
    row = get_sketch(db, sketch_id)
    if base is not None and row["base"] != base:
        raise ValueError(
            f"sketch {sketch_id} is a sketch of {row['base']!r}, not of {base!r}: "
            f"give the id of one of the sketches of {base!r} (Show sketches lists them)"
        )
    with transaction(db):
        update_rows(db, "sketches", {"base": row["base"], "id !=": sketch_id}, {"selected": 0})
        update_rows(db, "sketches", {"id": sketch_id}, {"selected": 1})
        audit.record(
            db, actor, "select_sketch", "sketch", sketch_id, why, details={"base": row["base"]}, now=now
        )


def selected_ids(db: sqlite_utils.Database) -> set[int]:
    """The ids of every base concept's selected sketch."""
    return {r["id"] for r in db.query("select id from sketches where selected = 1")}


def held_tasks(db: sqlite_utils.Database, base: str, *, now: dt.datetime | None = None) -> int:
    """How many coloring tasks designers hold (reserved, unexpired) for a new coloring of a
    concept of `base`: each shows the base's selected sketch, so a new selection changes
    their drawing (a redo keeps the drawing of the coloring it redoes)."""
    [row] = select(
        db,
        "select count(*) as n from tasks t join concepts c on c.key = t.concept_key "
        "where t.kind = 'coloring' and t.status = 'reserved' and t.expires > ? "
        "and t.coloring_id is null and c.base = ?",
        [iso(now), base],
    )
    return row["n"]


def get_sketch(db: sqlite_utils.Database, sketch_id: int) -> dict:
    """The ``sketches`` row of `sketch_id`; raises `NotFound`."""
    rows = list(db["sketches"].rows_where("id = ?", [sketch_id]))
    if not rows:
        raise NotFound(f"unknown sketch id {sketch_id!r}")
    return rows[0]


def selected_sketch(db: sqlite_utils.Database, base: str) -> dict:
    """The selected ``sketches`` row of a base concept.

    Raises
    ------
    NotFound
        If the base has no selected sketch.
    """
    row = _selected_row(db, base)
    if row is None:
        raise NotFound(f"base concept {base!r} has no sketch yet; an admin imports one on the Sketches tab")
    return row


def sketches_of(db: sqlite_utils.Database, base: str) -> list[dict]:
    """Every sketch of a base concept, selected first, then newest first (`check_base`)."""
    check_base(db, base)
    return list(db["sketches"].rows_where("base = ?", [base], order_by="selected desc, id desc"))


def load_sketch(data_dir: str | Path, row: dict) -> np.ndarray:
    """The pixels of a ``sketches`` row: shape (H, W), uint8 luminance [0, 255]."""
    return sketch_file_pixels(str(resolve(data_dir, row["path"]))).copy()


@functools.lru_cache(maxsize=64)
def sketch_file_pixels(path: str) -> np.ndarray:
    """The pixels of the sketch file at absolute `path`, read once per process (sketch
    files have content-hash names, so a path never changes its pixels): shape (H, W),
    uint8 luminance [0, 255], read-only."""
    image = decode_image(Path(path), name=f"sketch {Path(path).name}")
    pixels = np.asarray(image.convert("L"), dtype=np.uint8).copy()
    pixels.setflags(write=False)
    return pixels


def sketch_data_url(data_dir: str | Path, row: dict) -> str:
    """The sketch of a ``sketches`` row as a PNG data URL, as the coloring canvas loads it."""
    return png_data_url(resolve(data_dir, row["path"]).read_bytes())


def bases_without_sketch(db: sqlite_utils.Database) -> list[dict]:
    """Base concepts that lack a selected sketch: ``base`` and ``category``, by category."""
    return list(
        db.query(
            "select key as base, category from concepts c where modifier_type = 'original' and "
            "not exists (select 1 from sketches s where s.base = c.key and s.selected = 1) "
            "order by category, key"
        )
    )


def base_concepts(db: sqlite_utils.Database) -> list[str]:
    """Every base concept in the store, alphabetically."""
    return [
        r["key"] for r in db.query("select key from concepts where modifier_type = 'original' order by key")
    ]


def import_sketches(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    files: Sequence[str | Path],
    *,
    base: str | None = None,
    names: Sequence[str] | None = None,
    select: bool = True,
    actor: str = "admin",
    max_pixels: int = MAX_PIXELS,
    max_bytes: int = MAX_BYTES,
) -> list[ImportResult]:
    """Vet, normalise and store sketch files; a refused file never stops the others.

    Parameters
    ----------
    files : sequence of str or Path
        PNG, JPEG, WebP or SVG files.
    base : str, optional
        The base concept of every file; default: matched from each file name
        (``"Bell Pepper.png"`` -> ``"bell pepper"``, `annotation.sketches.importing.concept_for_filename`).
    names : sequence of str, optional
        The files' original names (an upload's temporary path loses it); default their
        own names.
    select : bool
        Make each stored sketch its base's selected sketch.
    max_pixels, max_bytes : int
        Limits on a raster file (decompression-bomb guard).

    Returns
    -------
    list of ImportResult
        One per file, in order; refused files carry the reason (not line art, unknown
        concept, unreadable, wrong type).
    """
    names = [Path(f).name for f in files] if names is None else list(names)
    if len(names) != len(files):
        raise InvalidInput(f"`names` has {len(names)} entries but `files` has {len(files)}")
    if base is not None:
        check_base(db, base)
    bases = base_concepts(db)
    results = []
    for path, name in zip(files, names):
        target = base or concept_for_filename(name, bases)
        if target is None:
            results.append(
                ImportResult(
                    name,
                    None,
                    None,
                    "no base concept is named like this file; rename it (e.g. apple.png) or pick the concept",
                )
            )
            continue
        try:
            imported = _vetted_png(Path(path), name, max_pixels, max_bytes)
        except (NotLineArtError, InvalidInput, ValueError) as error:
            reason = str(error)  # each refusal names its file, as most reasons do already
            results.append(
                ImportResult(name, target, None, reason if reason.startswith(name) else f"{name}: {reason}")
            )
            continue
        png = imported.png
        known = db["sketches"].count_where(
            "base = ? and sha256 = ?", [target, hashlib.sha256(png).hexdigest()]
        )
        sketch_id = add_sketch(
            db, data_dir, target, png, source="imported", select=select, meta={"file": name}, actor=actor
        )
        results.append(
            ImportResult(name, target, sketch_id, "", known=bool(known), note=_scaled_note(imported))
        )
    return results


def import_sketch_folder(
    db: sqlite_utils.Database, data_dir: str | Path, folder: str | Path, **options
) -> list[ImportResult]:
    """`import_sketches` on every file of `folder` with a suffix in `IMPORT_SUFFIXES`,
    by name; each file's concept comes from its name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidInput(f"`folder` must be a folder, got {shown_path(folder)}")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMPORT_SUFFIXES)
    return import_sketches(db, data_dir, files, **options)


SMALL_SOURCE_SIDE = 256
"""A raster sketch smaller than this on its long side is scaled up 4 times or more to
`annotation.sketches.importing.LONG_SIDE`: its lines blur, and fills stop short of them."""


def _scaled_note(imported: ImportedSketch) -> str:
    """What the import result says of a small raster original (an outside tester's 40 x 40 px
    drawing became soft lines a fill left white halos beside), else ""."""
    side = imported.source_long_side
    if side is None or side >= SMALL_SOURCE_SIDE:
        return ""
    return (
        f"scaled up from {side} px on its long side to {max(imported.width, imported.height)}: its lines "
        "are soft and a fill may stop short of them; a larger original or an SVG colors cleanly"
    )


def _vetted_png(path: Path, name: str, max_pixels: int, max_bytes: int) -> ImportedSketch:
    suffix = Path(name).suffix.lower()
    if suffix not in IMPORT_SUFFIXES:
        raise InvalidInput(
            f"{name}: expected one of {', '.join(IMPORT_SUFFIXES)}, got {suffix or 'no suffix'}"
        )
    if suffix != ".svg":
        frames = getattr(
            decode_image(path, max_pixels=max_pixels, max_bytes=max_bytes, name=name), "n_frames", 1
        )
        if frames > 1:  # its first frame alone would be stored, without a word
            raise InvalidInput(f"{name} is animated ({frames} frames); a sketch is one still drawing")
    elif path.stat().st_size > max_bytes:
        raise InvalidInput(f"{name} is {path.stat().st_size} bytes; at most {max_bytes} allowed")
    local = path if path.suffix.lower() == suffix else _renamed(path, suffix)
    try:
        return import_sketch_file(local)
    except NotLineArtError as error:
        raise NotLineArtError(f"{name}: {error}") from None
    finally:
        if local != path:
            local.unlink(missing_ok=True)


def _renamed(path: Path, suffix: str) -> Path:
    """A copy of `path` with `suffix` (`import_sketch_file` reads the type from it)."""
    copy = path.with_name(path.name + ".import" + suffix)
    copy.write_bytes(path.read_bytes())
    return copy


def generate_candidates(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    base: str,
    pipeline,
    rng: np.random.Generator,
    *,
    n: int = CANDIDATES,
    guidance_scale: float = 7.5,
    steps: int = 50,
    resolution: int = 1024,
    guidance_param: str = "guidance_scale",
    model: str = "",
    call_kwargs: dict | None = None,
    actor: str = "admin",
) -> list[Candidate]:
    """Generate `n` sketch candidates for a base concept and store those that are line art.

    Steps: the paper's prompt (`annotation.sketches.importing.sketch_prompt`, Appendix B.2), one
    seed per candidate drawn from `rng`, one `evaluation.models.generation.generate` call, then
    `store_candidates`.

    Parameters
    ----------
    pipeline : diffusers.DiffusionPipeline
        Loaded by the caller (`evaluation.models.registry.load_pipeline`), on its device.
    rng : numpy.random.Generator
        Draws the seeds.
    n : int
        Candidates, >= 1 (paper: 5).
    guidance_scale, steps, resolution, guidance_param, call_kwargs
        As in `evaluation.models.generation.generate`.
    model : str
        The registry key, kept with each stored candidate.

    Returns
    -------
    list of Candidate
        In seed order; none is selected (see `select_sketch`).
    """
    from evaluation.models.generation import generate

    check_base(db, base)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInput(f"`n` must be a whole number >= 1, got {shown(n)}")
    prompt = sketch_prompt(base)
    seeds = [int(s) for s in rng.integers(0, 2**63 - 1, size=n)]
    output = generate(
        pipeline,
        [prompt] * n,
        seeds,
        guidance_scale,
        guidance_param=guidance_param,
        steps=steps,
        resolution=resolution,
        call_kwargs=call_kwargs,
    )
    meta = {"prompt": prompt, "model": model, "guidance_scale": float(guidance_scale), "steps": steps}
    return store_candidates(db, data_dir, base, output.images, seeds, meta=meta, actor=actor)


def store_candidates(
    db: sqlite_utils.Database,
    data_dir: str | Path,
    base: str,
    images: Sequence[np.ndarray],
    seeds: Sequence[int],
    *,
    meta: dict | None = None,
    actor: str = "admin",
) -> list[Candidate]:
    """Vet generated images as line art; store the ones that pass, unselected.

    Parameters
    ----------
    images : sequence of ndarray, each (H, W, 3), uint8
        sRGB [0, 255].
    seeds : sequence of int
        One per image (kept in the stored row's ``meta``).

    Returns
    -------
    list of Candidate
    """
    if len(seeds) != len(images):
        raise InvalidInput(f"`seeds` has {len(seeds)} entries but `images` has {len(images)}")
    candidates = []
    for image, seed in zip(images, seeds):
        try:
            check_line_art(image)
        except NotLineArtError as error:
            candidates.append(Candidate(image, seed, None, str(error)))
            continue
        png = encode_png(normalize_sketch(image))
        sketch_id = add_sketch(
            db,
            data_dir,
            base,
            png,
            source="generated",
            select=False,
            meta={**(meta or {}), "seed": seed},
            actor=actor,
        )
        candidates.append(Candidate(image, seed, sketch_id, ""))
    return candidates


def _selected_row(db, base: str) -> dict | None:
    rows = list(db["sketches"].rows_where("base = ? and selected = 1", [base], order_by="id desc", limit=1))
    return rows[0] if rows else None


def check_base(db: sqlite_utils.Database, base: str) -> None:
    """Raise unless `base` names a base concept of the store (`InvalidInput` for text that is
    not one, or a variant; `NotFound` for an unknown key)."""
    if not isinstance(base, str) or not base.strip():
        raise InvalidInput(f"`base` must name a base concept, got {shown(base)}")
    concept = get_concept(db, base)
    if concept["modifier_type"] != "original":
        raise InvalidInput(
            f"`base` must be a base concept such as {concept['base']!r}, got the variant {base!r}"
        )
