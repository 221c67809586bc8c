"""Import images made elsewhere as a run, to be masked and scored like generated ones.

A source is a folder or a ``.zip``. Each image is labelled with its model, concept, style,
guidance scale and seed, either

- by a ``manifest.csv`` at the source's top level with columns ``file, model, concept,
  style, cfg, seed`` (``file`` relative to the top level, ``/``-separated), or
- by its file name: ``<model>__<concept>__<style>__<cfg>__<seed>.png`` (fields separated
  by two underscores; the concept key as written, spaces included), e.g.
  ``dalle3__rotten apple__natural__7.5__42.png``.

Images that cannot be decoded, are too large, are unlabelled or are labelled wrongly are
reported by name and left out; the others become the items of a new run with status
``generated``, so that the segment and extract stages (`evaluation.pipeline.jobs.run_pipeline`)
finish the job. Model names need not be in the registry. Folders must lie inside one of
the allowed roots given by the caller, and zip entries must stay inside the archive
(no absolute paths, no ``..``): a source that breaks either rule is refused as a whole.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import sqlite_utils
from PIL import Image

from evaluation.concepts import Concept, key_meant
from evaluation.models.generation import MAX_GUIDANCE, MAX_SEED, STYLES, build_prompt
from evaluation.pipeline import runs
from evaluation.pipeline.planning import run_exists
from evaluation.pipeline.runs import check_run_name
from storage import transaction
from storage.files import MAX_BYTES, MAX_PIXELS, FileRefused, leaves_archive, open_image, put_png
from storage.shown import shown, shown_path
from storage.spreadsheet import decoded_csv, number_cell, separator_refusal, whole_cell

MANIFEST = "manifest.csv"
NAME_FIELDS = ("model", "concept", "style", "cfg", "seed")
MANIFEST_COLUMNS = ("file", *NAME_FIELDS)
SEPARATOR = "__"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
MAX_IMAGE_BYTES = MAX_BYTES
MAX_FILES = 200_000
MAX_MODEL_NAME = 80
"""The most characters of an imported model's name (it heads tables and legends)."""
_MODEL_NAME = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_MODEL_NAME - 1}}}$")


class ImportSourceError(ValueError):
    """The source as a whole is refused (outside the allowed roots, unsafe zip, no image...).

    ``rejected`` holds every file left out and why, when that is the reason (no usable image):
    the message names the first `SHOWN_REJECTED`, a table can show them all.
    """

    def __init__(self, message: str, rejected: Sequence[tuple[str, str]] = ()):
        super().__init__(message)
        self.rejected = tuple(rejected)


SHOWN_REJECTED = 5
"""The files left out that a refusal's message names (an import of 200,000 names them all in
`ImportSourceError.rejected`)."""


@dataclass(frozen=True)
class Label:
    """What one imported image shows: ``model, concept, style, cfg, seed``."""

    model: str
    concept: str
    style: str
    cfg: float
    seed: int


@dataclass(frozen=True)
class ImportReport:
    """The outcome of `import_images`.

    Attributes
    ----------
    run : str
    imported : int
        Images stored as items of `run`.
    rejected : tuple of (str, str)
        ``(file name, reason)`` for every file left out, in name order.
    """

    run: str
    imported: int
    rejected: tuple[tuple[str, str], ...]


Entry = tuple[str, Callable[[], bytes]]


def _inside(path: Path, roots: Sequence[str | Path]) -> bool:
    return any(path.is_relative_to(Path(root).resolve()) for root in roots)


def _zip_entries(path: Path, shown_as: str) -> list[Entry]:
    try:
        with zipfile.ZipFile(path) as archive:
            infos = [info for info in archive.infolist() if not info.is_dir()]
    except (zipfile.BadZipFile, OSError) as error:
        raise ImportSourceError(f"{shown_path(shown_as)} cannot be read as a zip file: {error}") from None
    for info in infos:
        if leaves_archive(info.filename):
            raise ImportSourceError(
                f"zip entry {info.filename!r} would leave the archive folder; the zip is refused"
            )

    def reader(info: zipfile.ZipInfo) -> Callable[[], bytes]:
        def read() -> bytes:
            if info.file_size > MAX_IMAGE_BYTES:
                raise FileRefused(_too_large(info.file_size))
            with zipfile.ZipFile(path) as archive, archive.open(info) as f:
                return f.read(MAX_IMAGE_BYTES + 1)

        return read

    return [(info.filename, reader(info)) for info in infos]


def _too_large(size: int) -> str:
    return f"the file is {size:,} bytes; at most {MAX_IMAGE_BYTES:,} are read"


def _folder_entries(folder: Path) -> list[Entry]:
    def reader(file: Path) -> Callable[[], bytes]:
        def read() -> bytes:
            if not file.resolve().is_relative_to(folder):
                raise FileRefused("the file is a link to a file outside the import folder, which is not read")
            if file.stat().st_size > MAX_IMAGE_BYTES:
                raise FileRefused(_too_large(file.stat().st_size))
            return file.read_bytes()

        return read

    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return [(file.relative_to(folder).as_posix(), reader(file)) for file in files]


def open_source(source: str | Path, allowed_roots: Sequence[str | Path]) -> list[Entry]:
    """The files of a folder or zip as ``(name, read)`` pairs, names ``/``-separated.

    Raises
    ------
    ImportSourceError
        If `source` does not exist, lies outside every allowed root (after resolving
        links), is neither a folder nor a zip, holds an entry that would leave the
        archive, or holds more than `MAX_FILES` files. Messages name a source under a
        root from the root's folder name on (``'imports/batch'``), never the server's
        folders above it.
    """
    if not allowed_roots:
        raise ImportSourceError("no import folder is allowed on this server (`allowed_roots` is empty)")
    try:
        path, shown_as = Path(source).resolve(), _shown(source, allowed_roots)
        if not _inside(path, allowed_roots):
            roots = ", ".join(f"{Path(r).name}/" for r in allowed_roots)
            raise ImportSourceError(f"{shown_path(shown_as)} is outside the allowed import folders ({roots})")
        if path.is_dir():
            entries = _folder_entries(path)
        elif path.is_file():
            entries = _zip_entries(path, Path(source).name)
        else:
            raise ImportSourceError(f"{shown_path(shown_as)} must be an existing folder or .zip file")
    except (OSError, ValueError) as error:  # a name too long for the system, a NUL byte
        if isinstance(error, ImportSourceError):
            raise
        reason = getattr(error, "strerror", None) or str(error)
        raise ImportSourceError(f"the source {shown_path(source)} cannot be opened: {reason}") from None
    if len(entries) > MAX_FILES:
        raise ImportSourceError(
            f"{shown_path(shown_as)} holds {len(entries)} files; at most {MAX_FILES} are imported at once"
        )
    return entries


def _shown(source: str | Path, roots: Sequence[str | Path]) -> str:
    """`source` as messages name it: from an allowed root's name on (``imports/x/../y``),
    as written, so that no server folder above the roots is shown; else as given."""
    for root in roots:
        if Path(source).is_relative_to(root):
            return (Path(Path(root).name) / Path(source).relative_to(root)).as_posix()
    return str(source)


def parse_label(model: str, concept: str, style: str, cfg: str, seed: str, known: set[str]) -> Label:
    """Check and convert one image's label fields; raises ValueError naming the bad field."""
    if not _MODEL_NAME.fullmatch(model):
        raise ValueError(
            f"model {shown(model)} must be 1 to {MAX_MODEL_NAME} letters, digits, '.', '_' or '-' "
            "(ASCII letters a-z, A-Z and digits 0-9 only), starting with a letter or digit"
        )
    if concept not in known:
        meant = key_meant(concept, known)
        raise ValueError(
            f"concept {shown(concept)} is not in the concept list" + (f"; write {meant!r}" if meant else "")
        )
    if style not in STYLES:
        raise ValueError(f"style {style!r} must be one of {sorted(STYLES)}")
    try:
        cfg_value = number_cell(cfg)
    except ValueError:
        raise ValueError(f"cfg {shown(cfg)} must be a number") from None
    if not 0 < cfg_value <= MAX_GUIDANCE:  # NaN too
        raise ValueError(f"cfg must be in (0, {MAX_GUIDANCE:g}], got {shown(cfg)}")
    try:
        seed_value = whole_cell(seed)
    except ValueError:
        raise ValueError(f"seed {shown(seed)} must be a whole number") from None
    if not 0 <= seed_value <= MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**63 - 1], got {shown(seed)}")
    return Label(model, concept, style, cfg_value, seed_value)


def _labels_from_names(names: Sequence[str], known: set[str]) -> Iterator[tuple[str, Label | str]]:
    for name in names:
        fields = PurePosixPath(name).stem.split(SEPARATOR)
        if len(fields) != 5:
            yield name, f"name must be {SEPARATOR.join(NAME_FIELDS)}, or be listed in {MANIFEST}"
            continue
        try:
            yield name, parse_label(*fields, known)
        except ValueError as error:
            yield name, str(error)


def _manifest_text(read: Callable[[], bytes]) -> str:
    """The manifest's text; ImportSourceError naming it when it is too large or not UTF-8
    (`storage.spreadsheet.decoded_csv`: the line, and what to do)."""
    try:
        data = read()
    except ValueError as error:
        raise ImportSourceError(f"{MANIFEST} is too large: {error}") from None
    try:
        return decoded_csv(data, MANIFEST)
    except ValueError as error:
        raise ImportSourceError(str(error)) from None


def _labels_from_manifest(
    text: str, names: Sequence[str], known: set[str], rejected: list
) -> Iterator[tuple[str, Label | str]]:
    """Each image's label from the manifest's rows; rows that name no image of the source,
    and files listed more than once, are added to `rejected`."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        table = [(reader.line_num, row) for row in reader]
    except csv.Error as error:
        raise ImportSourceError(f"{MANIFEST} is not readable CSV: {error}") from None
    if table and (why := separator_refusal(table[0][1], MANIFEST)):
        raise ImportSourceError(why)
    # Column names are read as a person means them: `File`, ` Model ` and `CFG` name the columns.
    header = [cell.strip().lower() for cell in table[0][1]] if table else []
    rows, misshapen = [], {}
    for line, row in table[1:]:
        if not any(cell.strip() for cell in row):
            continue
        rows.append(dict(zip(header, row + [""] * (len(header) - len(row)))))
        # A row of more cells than columns was cut to fit, so an unquoted comma in a concept
        # ("rotten, apple") labelled the image "rotten"; one of fewer read its columns as empty.
        extra = any(cell.strip() for cell in row[len(header) :])
        short = [c for c in MANIFEST_COLUMNS if c in header and header.index(c) >= len(row)]
        if extra or short:
            misshapen[rows[-1]["file"].strip()] = (
                f"line {line} of {MANIFEST} has {len(row)} cells for its {len(header)} columns"
                + (" (a value holding a comma must be in double quotes)" if extra else f", none for {short}")
                + "; it is not imported"
            )
    missing = [column for column in MANIFEST_COLUMNS if column not in header]
    twice = sorted({column for column in header if column and header.count(column) > 1})
    why = ""
    if missing:
        why = (
            f"it lacks {missing} (its first row: {[cell[:40] for cell in table[0][1][:10]] if table else []})"
        )
    elif twice:
        why = f"it names {twice} twice"
    elif not rows:
        why = "it has no row after the column names"
    if why:
        raise ImportSourceError(
            f"{MANIFEST} must have the columns {list(MANIFEST_COLUMNS)} and at least one row: {why}"
        )
    listed: dict[str, Label | str] = {}
    times = Counter((row["file"] or "").strip() for row in rows)
    for row in rows:
        file = (row["file"] or "").strip()
        if times[file] > 1:
            listed[file] = f"listed {times[file]} times in {MANIFEST}; list it once"
            continue
        if file in misshapen:
            listed[file] = misshapen[file]
            continue
        try:
            listed[file] = parse_label(*((row[c] or "").strip() for c in MANIFEST_COLUMNS[1:]), known)
        except ValueError as error:
            listed[file] = str(error)
    rejected += [
        (f"{MANIFEST}: {shown(file)}", "listed, but the source holds no image of this name")
        for file in sorted(set(listed) - set(names))
    ]
    for name in names:
        yield name, listed.get(name, f"not listed in {MANIFEST}")


def _decode(data: bytes) -> np.ndarray:
    """`data` decoded within the import caps (`storage.files.open_image`), as (H, W, 3) uint8;
    transparency is laid on white (dropping the alpha would show whatever color the
    transparent pixels hold, often black, and that would count as the image's colors)."""
    image = open_image(data, max_pixels=MAX_PIXELS, max_bytes=MAX_IMAGE_BYTES, name="the file")
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    return np.asarray(image.convert("RGB"), dtype=np.uint8)


def _read_images(entries: Sequence[Entry], known: set[str], data_dir: Path, run: str) -> tuple[dict, list]:
    """Label, decode and store each image; returns ({Label: (path, sha)}, rejected)."""
    counts = Counter(name for name, _ in entries)
    rejected = [
        (name, f"the source holds {n} files of this name; none of them is imported")
        for name, n in sorted(counts.items())
        if n > 1
    ]
    readers = {name: read for name, read in entries if counts[name] == 1}
    images = sorted(n for n in readers if n.lower().endswith(IMAGE_SUFFIXES))
    rejected += [
        (
            n,
            f"a {MANIFEST} is read at the top level of the source only, not in "
            f"{shown(str(PurePosixPath(n).parent) + '/')} (zip the folder's contents, not the folder)"
            if PurePosixPath(n).name == MANIFEST
            else f"not an image file ({', '.join(IMAGE_SUFFIXES)})",
        )
        for n in sorted(readers)
        if n not in images and n != MANIFEST
    ]
    if MANIFEST in readers:
        labelled = list(_labels_from_manifest(_manifest_text(readers[MANIFEST]), images, known, rejected))
    else:
        labelled = list(_labels_from_names(images, known))
    # Files that share a label are all left out, as files that share a name are: which
    # of them is the model's image cannot be known.
    sharing = defaultdict(list)
    for name, label in labelled:
        if not isinstance(label, str):
            sharing[label].append(name)
    stored: dict[Label, tuple[str, str]] = {}
    for name, label in labelled:
        if isinstance(label, str):
            rejected.append((name, label))
        elif len(sharing[label]) > 1:
            others = ", ".join(shown(other) for other in sharing[label] if other != name)
            rejected.append(
                (
                    name,
                    f"{others} {'has' if len(sharing[label]) == 2 else 'have'} the same model, concept, "
                    "style, cfg and seed; none of them is imported",
                )
            )
        else:
            try:
                file = put_png(data_dir, _decode(readers[name]()), folder=f"runs/{run}/images")
                stored[label] = (file.path, file.sha256)
            # What is wrong with it, in its words: too large, not an image, a link out of the folder
            except FileRefused as error:
                rejected.append((name, str(error)))
            except Exception as error:  # noqa: BLE001 - PIL raises many kinds for corrupt files
                rejected.append((name, f"corrupt or unreadable image: {error}"))
    return stored, sorted(rejected)


def _items(stored: dict[Label, tuple[str, str]], concepts: dict[str, Concept]) -> list[dict]:
    cells: dict[tuple, list[Label]] = defaultdict(list)
    for label in stored:
        cells[(label.model, label.concept, label.style, label.cfg)].append(label)
    items = []
    for labels in cells.values():
        for sample, label in enumerate(sorted(labels, key=lambda lab: lab.seed)):
            concept = concepts[label.concept]
            items.append(
                {
                    "model": label.model,
                    "concept": label.concept,
                    "noun": concept.base,
                    "style": label.style,
                    "cfg": label.cfg,
                    "sample": sample,
                    "seed": label.seed,
                    "prompt": build_prompt(concept, label.style),
                }
            )
    return items


def import_images(
    db: sqlite_utils.Database,
    run: str,
    source: str | Path,
    data_dir: str | Path,
    concepts: Sequence[Concept],
    *,
    allowed_roots: Sequence[str | Path],
) -> ImportReport:
    """Store the labelled images of a folder or zip as a new run whose items are ``generated``.

    Parameters
    ----------
    db : sqlite_utils.Database
        With the evaluation schema.
    run : str
        A new run name (see `evaluation.pipeline.runs.create_run`).
    source : str or Path
        A folder or ``.zip``; see the module notes for labels.
    data_dir : str or Path
        Images go to ``data_dir/runs/<run>/images/`` as PNG named by their SHA-256
        (`storage.files.put_png`).
    concepts : sequence of Concept
        The concept list that labels must name.
    allowed_roots : sequence of path
        Folders a source must lie in.

    Returns
    -------
    ImportReport
        Corrupt, unlabelled, mislabelled and duplicate files are listed in ``rejected``.

    Raises
    ------
    ImportSourceError
        If the source is refused as a whole or holds no usable image (nothing is stored).
    evaluation.pipeline.runs.RunError
        If the run name is taken or malformed.
    """
    data_dir = Path(data_dir)
    check_run_name(run)
    if run_exists(db, run):
        raise runs.RunError(f"run {run!r} exists already; choose another name for the import")
    runs.refuse_near_name(db, run)  # before its files: on some systems that run's folder
    entries = open_source(source, allowed_roots)
    by_key = {c.key: c for c in concepts}
    stored, rejected = _read_images(entries, set(by_key), data_dir, run)
    if not stored:
        listed = "; ".join(f"{n}: {why}" for n, why in rejected[:SHOWN_REJECTED]) or "it holds no file"
        more = f"; and {len(rejected) - SHOWN_REJECTED:,} more" if len(rejected) > SHOWN_REJECTED else ""
        raise ImportSourceError(f"no usable image in {Path(source).name!r}: {listed}{more}", rejected)
    try:
        _store_run(db, run, source, entries, stored, by_key)
    except BaseException:
        # Nothing of a refused import stays: its run folder is new, so its files are its own.
        for path, _ in stored.values():
            (data_dir / path).unlink(missing_ok=True)
        raise
    return ImportReport(run, len(stored), tuple(rejected))


def _store_run(db, run: str, source, entries, stored: dict, by_key: dict) -> None:
    """The run's row and items, in one transaction, for the images `stored` holds."""
    items = _items(stored, by_key)
    config = {
        "imported": {"source": Path(source).name, "files": len(entries)},
        "concepts": sorted({i["concept"] for i in items}),
        "styles": sorted({i["style"] for i in items}),
    }
    with transaction(db):
        runs.create_run(db, run, items, config)
        ids = {
            (r["model"], r["concept"], r["style"], r["cfg"], r["seed"]): r["id"] for r in runs.items(db, run)
        }
        runs.record_items(
            db,
            [
                {
                    "id": ids[(lab.model, lab.concept, lab.style, lab.cfg, lab.seed)],
                    "status": "generated",
                    "image_path": path,
                    "image_sha256": digest,
                }
                for lab, (path, digest) in stored.items()
            ],
        )
