"""Are a run's weights on this machine? Checked before a job is queued.

Nothing is downloaded while a run works: a text-to-image model, GroundingDINO or SAM
whose weights are neither in a local folder nor in the Hugging Face cache would fail
mid-run (offline: a raw connection error at the masking stage). `missing_weights` names
each such model and how to get it, so that the job is refused before it starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from huggingface_hub import try_to_load_from_cache

from evaluation.models.registry import ModelSpec, spec_from_dict
from storage.shown import SHOWN_CHARS, shown

NAME_MAX = 255
"""The most bytes of one name in a path (Linux's ``NAME_MAX``)."""


def _is_folder(source: str) -> bool:
    """Whether `source` names a folder (a path, or an existing directory) rather than a hub id."""
    return source.startswith(("./", "../", "/")) or Path(source).is_dir()


def _located(source: str, index_file: str, cache_dir: str | Path | None) -> str | None:
    """Where `source` (a hub id or a folder) has `index_file` on this machine, or None."""
    if _is_folder(source):
        found = Path(source) / index_file
        return str(found) if found.is_file() else None
    return _cached(source, index_file, cache_dir)


def _on_disk(source: str, index_file: str, cache_dir: str | Path | None) -> bool:
    """Whether `source` (a hub id or a folder) has `index_file` locally."""
    return _located(source, index_file, cache_dir) is not None


def _cached(source: str, index_file: str, cache_dir: str | Path | None) -> str | None:
    """The path of hub model `source`'s `index_file` in the Hugging Face cache, or None."""
    try:
        found = try_to_load_from_cache(source, index_file, cache_dir=cache_dir)
    except ValueError:  # not a valid repo id
        return None
    return found if isinstance(found, str) else None


#: Weight files diffusers and transformers load a component from (one file, shards with
#: their index, or a variant such as ``fp16`` of either).
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")


def components_without_weights(folder: str | Path) -> list[str]:
    """The components of the diffusers pipeline in `folder` that have no weights there.

    A component of ``model_index.json`` (``[library, class]``; ``null`` for one left out)
    whose folder holds a ``config.json`` is a model and needs a weight file
    (`WEIGHT_PATTERNS`); schedulers, tokenizers and image processors keep other files and
    need none. A component whose folder is missing is named too. Without this check a
    pipeline copied without its ``unet/`` weights was queued and failed in diffusers'
    ``OSError`` once the job ran.

    Parameters
    ----------
    folder : str or Path
        A pipeline folder holding ``model_index.json`` (a local model, or a snapshot of the
        Hugging Face cache).

    Returns
    -------
    list of str
        Component names, in the index's order; empty when every model component has weights
        (or the index cannot be read: loading names that problem itself).
    """
    return [
        name
        for name, part in _components(folder)
        if not part.is_dir() or _is_model(part) and not _has_weights(part)
    ]


def _components(folder: str | Path) -> list[tuple[str, Path]]:
    """``(name, folder)`` of each component of the diffusers pipeline in `folder` (none when its
    ``model_index.json`` cannot be read: loading names that problem itself)."""
    import json

    folder = Path(folder)
    try:
        index = json.loads((folder / "model_index.json").read_text())
    except (OSError, ValueError):
        return []
    return [
        (name, folder / name)
        for name, value in index.items()
        if not name.startswith("_") and isinstance(value, list) and None not in value
    ]


def _is_model(part: Path) -> bool:
    return (part / "config.json").is_file()


def _has_weights(folder: Path) -> bool:
    return any(next(folder.glob(p), None) for p in WEIGHT_PATTERNS)


def damaged_weights(folder: str | Path) -> list[str]:
    """The weight files in `folder` (not below it) that cannot be loaded, each with why.

    A ``.safetensors`` file must open (`safetensors.safe_open` reads its header and checks
    that the file holds every byte the header names: a download cut short does not), a
    sharded model's index must name shards that are there, and a ``.bin`` saved by
    ``torch.save`` (a zip) must end in its zip directory. Without this a half-copied
    model passed the check, the run was stored, and it failed at the stage that loaded it
    (outside probe 124: a truncated detector ended the command in a safetensors traceback).

    Returns
    -------
    list of str
        ``"<file> (<why>)"`` per damaged file, by name; empty when all can be loaded.
    """
    import json
    import zipfile

    from safetensors import SafetensorError, safe_open

    folder = Path(folder)
    damaged = []
    for path in sorted(folder.glob("*.safetensors")):
        if not path.is_file():
            damaged.append(f"{path.name} (a folder or another thing, not a file)")
            continue
        try:
            with safe_open(path, "np"):
                pass
        except (SafetensorError, OSError) as error:
            damaged.append(f"{path.name} (cut short or damaged: {error})")
    for index in sorted(folder.glob("*.index.json")):
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            damaged.append(f"{index.name} (no readable weight_map: {error!r})")
            continue
        gone = sorted(s for s in shards if not (folder / s).is_file())
        if gone:
            damaged.append(f"{index.name} (names shards that are not there: {', '.join(gone[:3])})")
    for path in sorted(folder.glob("*.bin")):
        with open(path, "rb") as f:
            is_zip = f.read(2) == b"PK"
        if is_zip and not zipfile.is_zipfile(path):
            damaged.append(f"{path.name} (cut short or damaged: no zip directory at its end)")
    return damaged


def _pipeline_damage(folder: Path) -> list[str]:
    """`damaged_weights` of each model component of the pipeline in `folder`, as
    ``<component>/<file> (<why>)``."""
    return [
        f"{name}/{found}"
        for name, part in _components(folder)
        if _is_model(part)
        for found in damaged_weights(part)
    ]


#: The way to a local copy `_how_to_get` offers by default.
LOCAL_FOLDER = (
    "point the registry (a text-to-image model) or the masking options (Masking on the Evaluate "
    "tab, or `--detector`, `--sam`) at a local folder"
)


def _how_to_get(source: str | None = None, local: str = LOCAL_FOLDER) -> str:
    """How to get hub model `source`, or each hub model named before (None); `local` says how
    to use a copy on this machine instead. A `source` longer than a refusal quotes
    (`storage.shown.SHOWN_CHARS`) is not spelled out in the command."""
    if source and len(source) > SHOWN_CHARS:
        what = "it on a machine with internet (`hf download` and its hub id"
    elif source:
        what = f"it on a machine with internet (`hf download {source}`"
    else:
        what = "each on a machine with internet (`hf download ID`"
    return (
        f"download {what}, after accepting its licence on the hub and `hf auth login` if it is "
        "gated) and copy that Hugging Face cache into this server's (its `HF_HOME`, by default "
        f"~/.cache/huggingface), or {local}"
    )


def missing_weights(
    models: Iterable[ModelSpec],
    detector: str | None = None,
    sam: str | None = None,
    *,
    sam_checkpoint: str = "",
    cache_dir: str | Path | None = None,
) -> list[str]:
    """One sentence per model whose weights are not available locally (empty: all are).

    Parameters
    ----------
    models : iterable of ModelSpec
        Text-to-image models; ``build = "tiny"`` ones are built on first use.
    detector, sam : str, optional
        GroundingDINO and SAM hub ids or folders (None: not needed, e.g. tiny masking,
        which builds its own).
    sam_checkpoint : str
        A ``segment-anything`` checkpoint file used instead of `sam`.
    cache_dir : str or Path, optional
        The Hugging Face hub cache (default: the one ``from_pretrained`` reads).
    """
    return [
        problem if source is None else f"{problem} is not on this machine: " + _how_to_get(source)
        for problem, source in _missing(models, detector, sam, sam_checkpoint, cache_dir)
    ]


def _missing(models, detector, sam, sam_checkpoint, cache_dir) -> list[tuple[str, str | None]]:
    """``(what, hub id)`` per model not in the hub cache (``what`` names it), ``(sentence,
    None)`` per other problem; `missing_weights` has the parameters."""
    problems: list[tuple[str, str | None]] = []
    for spec in models:
        # A tiny model is built where its folder is empty; one already built is checked as
        # any other (outside probe 124: one whose unet weights were gone was queued).
        if spec.build == "tiny" and not (
            spec.is_local and (spec.local_path() / "model_index.json").is_file()
        ):
            continue
        if spec.is_local:
            folder = spec.local_path()
            if not (folder / "model_index.json").is_file():
                problems.append(
                    (
                        f"model {spec.key!r}: no diffusers pipeline in {folder} (model_index.json is missing)",
                        None,
                    )
                )
            elif problem := _weights_problem(folder, files=True):
                problems.append(
                    (
                        f"model {spec.key!r}: the pipeline in {folder} {problem}; {_remedy(folder, spec.build)}",
                        None,
                    )
                )
        else:
            index = _cached(spec.source, "model_index.json", cache_dir)
            if index is None:
                problems.append((f"model {spec.key!r} ({spec.source})", spec.source))
            elif problem := _weights_problem(Path(index).parent):
                problems.append(
                    (f"model {spec.key!r} ({spec.source}: the cached copy {problem})", spec.source)
                )
    if detector is not None:
        problems.extend(_transformers_problems("GroundingDINO", detector, cache_dir))
    if sam_checkpoint:
        if not Path(sam_checkpoint).is_file():
            problems.append((f"the SAM checkpoint {sam_checkpoint} does not exist", None))
    elif sam is not None:
        problems.extend(_transformers_problems("SAM", sam, cache_dir))
    return problems


def _weights_problem(folder: Path, files: bool = False) -> str:
    """What is wrong with the weights of the pipeline in `folder`, components without weights
    and damaged files together (one was said at a time: outside probe 186), or ""; `files`
    also names where weight files were looked for."""
    said = []
    if parts := components_without_weights(folder):
        where = f" (no .safetensors or .bin file in {', '.join(p + '/' for p in parts)})" if files else ""
        said.append(f"has no weights for {', '.join(parts)}{where}")
    if damage := _pipeline_damage(folder):
        said.append(f"has weights that cannot be loaded: {'; '.join(damage)}")
    return ", and ".join(said)


def _remedy(folder: Path, build: str = "") -> str:
    """What mends a local model folder whose weights are missing or damaged: the tiny models
    are built here, not copied (outside probes 131 and 236 were told to copy one whole); a
    registry model with ``build = "tiny"`` (`build`) is built by the run that needs it."""
    from evaluation.models.tiny import BUILT_BY_BUILD_TINY

    if folder.name in BUILT_BY_BUILD_TINY:
        return f"build it again: python -m evaluation build-tiny --models-dir {folder.parent}"
    if build == "tiny":
        return (
            f"remove the folder {folder}: the next run builds it again, from the same seed (the same weights)"
        )
    return "copy the model's folder whole"


def _transformers_problems(what: str, source: str, cache_dir) -> list[tuple[str, str | None]]:
    """`_missing`'s entry for the transformers model `source` (a hub id or a folder) named
    `what`: none when its configuration and loadable weights are on this machine."""
    config = _located(source, "config.json", cache_dir)
    if config is None:
        return [_missing_model(what, source)]
    local = _is_folder(source)
    folder = Path(config).parent
    if not _has_weights(folder):
        problem = "has no weights (no .safetensors or .bin file)"
    elif damage := damaged_weights(folder):
        problem = f"has weights that cannot be loaded: {'; '.join(damage)}"
    else:
        return []
    if local:
        return [(f"{what}: the folder {source} {problem}; {_remedy(Path(source))}", None)]
    return [(f"{what} ({source}: the cached copy {problem})", source)]


def missing_transformers_model(
    model: str, *, what: str = "judge model", cache_dir: str | Path | None = None
) -> str:
    """Why the command line cannot load the transformers model `model` (a hub id or a folder;
    a judge, a presence VQA model), named `what`, or "": checked before anything is stored or
    rendered (from_pretrained would otherwise end the command in a traceback, offline, after
    the work before it ran)."""
    if _on_disk(model, "config.json", cache_dir) or (Path(model) / "config.json").is_file():
        return ""
    problem, source = _missing_model(f"{what} {shown(model)}", model)
    if source is None:
        return problem
    # Not `LOCAL_FOLDER`: the registry and the masking options are a text-to-image run's.
    local = "give the path of a folder on this machine that holds the model (its config.json and weights)"
    return f"{what} {shown(model)} is not on this machine: " + _how_to_get(source, local)


#: What each kind of transformers model must be, by the model types transformers maps to it.
MODEL_KINDS = {
    "image-text-to-text": ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "an image-text-to-text (VQA) model"),
    "contrastive": (
        "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES",
        "a CLIP-like contrastive model",
    ),
}


def wrong_model_kind(model: str, kind: str, *, what: str, cache_dir: str | Path | None = None) -> str:
    """Why the model `model` (on this machine: check `missing_transformers_model` first) is not
    of `kind` (a key of `MODEL_KINDS`), or "": its ``config.json``'s model type against the
    types transformers maps to that kind, read before the model is (loading a SAM as a VQA
    model ended a run in a list of a hundred class names, after its images)."""
    from transformers import AutoConfig
    from transformers.models.auto import modeling_auto

    table, described = MODEL_KINDS[kind]
    try:
        config = AutoConfig.from_pretrained(model, cache_dir=cache_dir, local_files_only=True)
    except (OSError, ValueError) as error:
        return f"{what} {model!r} has no configuration transformers can read ({error})"
    if config.model_type in getattr(modeling_auto, table):
        return ""
    return f"{what} {model!r} is a {config.model_type!r} model, not {described}"


def _missing_model(what: str, source: str) -> tuple[str, str | None]:
    """``(what, hub id)`` for a hub id not in the cache; ``(sentence, None)`` for a folder (a
    path: "hf download PATH" would be no advice)."""
    if source.startswith(("/", ".", "~")) or Path(source).exists():
        return (f"{what}: no model in the folder {source} (its config.json is missing)", None)
    return (f"{what} ({source})", source)


def served_judge_source(model: str, models_dir: str | Path, *, cache_dir: str | Path | None = None) -> str:
    """Where the app loads the judge model `model` from: a folder of `models_dir` by its name,
    or a hub id whose weights are in the Hugging Face cache.

    The app takes these two alone (deny by default): a path elsewhere on the server is
    refused before anything opens it, so a request cannot probe the server's folders or
    load a model an operator did not put in place. The command line loads any path.

    Raises
    ------
    ValueError
        For a path outside `models_dir`, and for a hub id not in the cache (with how to get it).
    """
    root = Path(models_dir).resolve()
    if any(len(part.encode("utf-8", "surrogatepass")) > NAME_MAX for part in PurePosixPath(model).parts):
        raise ValueError(  # the file system's own refusal (OSError) was a traceback in the log
            f"judge model {shown(model)}: a folder's or hub id's name has at most {NAME_MAX} bytes"
        )
    # A name alone, or a hub id's "org/name": any other spelling is a path, even one that
    # leads into the folder.
    if (
        model.startswith(("/", "~", "."))
        or "\\" in model
        or model.count("/") > 1
        or ".." in PurePosixPath(model).parts
    ):
        raise ValueError(_elsewhere(model, root))
    named = root / model
    if named.is_symlink() or named.is_dir():
        local = named.resolve()
        if not local.is_relative_to(root) or local == root:
            raise ValueError(
                f"judge model {shown(model)}: {root.name}/{model} is a link that leads out of the data "
                f"folder's {root.name}/; put the model's folder itself there"
            )
        if not (local / "config.json").is_file():
            raise ValueError(
                f"judge model {shown(model)}: the folder {root.name}/{model} holds no transformers model "
                "(its config.json is missing; a diffusers pipeline is not a judge)"
            )
        return str(local)
    # `from_pretrained` reads an existing folder before the hub: "org/name" may be one too.
    if Path(model).exists():
        raise ValueError(_elsewhere(model, root))
    if not _on_disk(model, "config.json", cache_dir):
        raise ValueError(
            f"judge model {shown(model)} is not on this machine: "
            + _how_to_get(
                model, f"put the model's folder in the data folder's {root.name}/ and give its name"
            )
        )
    return model


def _elsewhere(model: str, root: Path) -> str:
    return (
        f"judge model {shown(model)}: the app loads a judge from a hub id in the Hugging Face cache or "
        f"from a folder in the data folder's {root.name}/ named by its name alone, not from another "
        "path on the server"
    )


def judge_model_refusal(kind: str, model: str, *, what: str, cache_dir: str | Path | None = None) -> str:
    """Why the model of a ``contrastive`` or ``yesno`` judge (`kind`) cannot be used: not on
    this machine (`missing_transformers_model`) or of another kind (`wrong_model_kind`: a
    CLIP as a yes/no judge ended in transformers' list of a hundred class names); "" when
    it can. `what` names it in the second sentence (the first says "judge model")."""
    return missing_transformers_model(model, cache_dir=cache_dir) or wrong_model_kind(
        model,
        "contrastive" if kind == "contrastive" else "image-text-to-text",
        what=what,
        cache_dir=cache_dir,
    )


def weights_refusal(models: Iterable[Mapping[str, Any]], masking: tuple[str, str, str] | None) -> str:
    """Why a run whose weights are not on this machine is refused (what to do first, then each
    missing model, ``"; "``-separated); ``""`` when they all are here.

    Takes plain values (`evaluation.pipeline.jobs.weights_request` makes them from a run's
    configuration and masking), so that a Ray preflight probe checks a node without
    importing the pipeline.

    Parameters
    ----------
    models : iterable of mapping
        The run's text-to-image models as `evaluation.models.registry.spec_to_dict` writes them.
    masking : tuple of str, or None
        ``(detector, sam, sam_checkpoint)`` of the masking models; None when nothing is
        masked or the tiny masking (which builds its own) is used.
    """
    specs = [spec_from_dict(fields) for fields in models]
    detector, sam, checkpoint = masking if masking is not None else (None, None, "")
    found = _missing(specs, detector, sam, checkpoint, None)
    if not found:
        return ""
    # What to do comes first, and the how-to once for all the hub models: the app cuts a
    # refusal at `app.common.MAX_MESSAGE_CHARS`.
    hint = ""
    masking_hub = {source for _, source in found if source is not None} & {detector, sam}
    if masking_hub and specs and all(s.build == "tiny" for s in specs):
        hint = (
            "for a tiny test model, choose the tiny-random masking (Masking on the Evaluate tab, or "
            "`--segmenter tiny-random` on the command line). Missing: "
        )
    hub = [what for what, source in found if source is not None]
    others = [what for what, source in found if source is None]
    sources = [source for _, source in found if source is not None]
    if len(sources) == 1:
        others.append(f"{hub[0]} is not on this machine: " + _how_to_get(sources[0]))
    elif sources:
        others.append(f"{', '.join(hub)} are not on this machine: " + _how_to_get())
    return hint + "; ".join(others)
