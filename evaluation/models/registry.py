"""The model registry: which text-to-image pipelines a run can use, and how to load them.

The registry is `evaluation/models/models.toml` (read with the standard library's ``tomllib``).
Every model, hub id or local directory, is loaded through the same call,
``<PipelineClass>.from_pretrained(source, dtype=...)``.
"""

from __future__ import annotations

import importlib
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

from evaluation.concepts import ASSETS
from storage.shown import shown

PROJECT_ROOT = ASSETS.parent
REGISTRY_TOML = Path(__file__).resolve().parent / "models.toml"
DTYPES = ("float16", "bfloat16", "float32")
_REQUIRED = ("name", "pipeline", "source", "dtype", "steps", "resolution", "guidance_param", "cfg_scales")


class RegistryError(ValueError):
    """A registry entry is missing a field or holds a value of the wrong kind."""


@dataclass(frozen=True)
class ModelSpec:
    """One text-to-image model of the registry.

    Attributes
    ----------
    key : str
        The registry key, e.g. ``"sdxl"``; runs name models by it.
    name : str
        Display name, e.g. ``"Stable Diffusion XL"``.
    pipeline : str
        A diffusers class name, or ``"package.module:Class"`` for one outside diffusers.
    source : str
        Hub id (``"owner/name"``) or local directory (absolute, or starting with ``./``,
        taken from the project root).
    dtype : str
        Weight dtype on a GPU, one of `DTYPES`; a CPU always uses float32.
    steps : int
        Denoising steps per image.
    resolution : int
        Square output side in pixels, a multiple of 8.
    guidance_param : str
        The pipeline keyword that the CFG sweep sets, e.g. ``"guidance_scale"``.
    cfg_scales : tuple of float
        The guidance scales to sweep.
    batch_size : int
        Images per pipeline call on a GPU.
    call_kwargs, load_kwargs : Mapping
        Fixed extra keywords for the pipeline call and for ``from_pretrained``.
    params, requires, build : str
        Parameter count (display), extra requirements, and ``"tiny"`` for a model that
        the project builds itself.
    build_seed : int
        For a ``build = "tiny"`` model, the seed of its random weights
        (`evaluation.models.tiny.build_tiny_pipeline`): two tiny models that differ only in
        it are two different models.
    """

    key: str
    name: str
    pipeline: str
    source: str
    dtype: str
    steps: int
    resolution: int
    guidance_param: str
    cfg_scales: tuple[float, ...]
    batch_size: int = 1
    call_kwargs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    load_kwargs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    params: str = ""
    requires: str = ""
    build: str = ""
    build_seed: int = 0

    @property
    def is_local(self) -> bool:
        """Whether `source` names a directory rather than a hub id."""
        return self.source.startswith(("./", "../", "/"))

    def local_path(self) -> Path:
        """The directory `source` names; raises RegistryError for a hub id."""
        if not self.is_local:
            raise RegistryError(f"model {self.key!r}: source {self.source!r} is a hub id, not a directory")
        return (PROJECT_ROOT / self.source).resolve()


def _check_entry(key: str, entry: Mapping[str, Any]) -> None:
    missing = [name for name in _REQUIRED if name not in entry]
    if missing:
        raise RegistryError(f"model {key!r} lacks required field(s) {missing}")
    if entry["dtype"] not in DTYPES:
        raise RegistryError(f"model {key!r}: dtype must be one of {DTYPES}, got {shown(entry['dtype'])}")
    from evaluation.models.generation import MAX_RESOLUTION, MAX_STEPS

    for name, most in (("steps", MAX_STEPS), ("resolution", MAX_RESOLUTION), ("batch_size", None)):
        value = entry.get(name, 1)
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < 1
            or most is not None
            and value > most
        ):
            upto = f" of at most {most:,}" if most is not None else ""
            raise RegistryError(f"model {key!r}: {name} must be a positive integer{upto}, got {shown(value)}")
    seed = entry.get("build_seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RegistryError(f"model {key!r}: build_seed must be a whole number >= 0, got {shown(seed)}")
    if entry["resolution"] % 8:
        raise RegistryError(f"model {key!r}: resolution must be a multiple of 8, got {entry['resolution']}")
    from evaluation.models.generation import FIXED_CALL_ARGUMENTS

    call = entry.get("call_kwargs", {})
    clash = sorted(
        (set(call) if isinstance(call, dict) else set())
        & (FIXED_CALL_ARGUMENTS | {entry.get("guidance_param")})
    )
    if clash:
        raise RegistryError(
            f"model {key!r}: call_kwargs may not set {clash} (the run sets them: steps, resolution and "
            "the guidance scale are fields of their own)"
        )
    scales = entry["cfg_scales"]
    if not scales or not all(isinstance(s, (int, float)) and s > 0 for s in scales):
        raise RegistryError(
            f"model {key!r}: cfg_scales must be a non-empty list of positive numbers, got {shown(scales)}"
        )


def load_registry(path: str | Path = REGISTRY_TOML) -> dict[str, ModelSpec]:
    """Read the model registry.

    Parameters
    ----------
    path : str or Path
        A TOML file with one ``[models.<key>]`` table per model (see `models.toml`).

    Returns
    -------
    dict of str to ModelSpec
        In file order.

    Raises
    ------
    RegistryError
        If an entry lacks a field or a value is out of range; the message names the model.
    """
    with open(path, "rb") as f:
        try:
            tables = tomllib.load(f).get("models", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise RegistryError(f"registry {str(path)!r} is not valid TOML: {error}") from None
    specs = {}
    for key, entry in tables.items():
        _check_entry(key, entry)
        fields = dict(entry)
        fields["cfg_scales"] = tuple(float(s) for s in entry["cfg_scales"])
        for name in ("call_kwargs", "load_kwargs"):
            fields[name] = MappingProxyType(dict(entry.get(name, {})))
        specs[key] = ModelSpec(key=key, **fields)
    return specs


def get_model(key: str, registry: Mapping[str, ModelSpec] | None = None) -> ModelSpec:
    """Look a model up by key, with a message listing the known keys if it is absent."""
    registry = load_registry() if registry is None else registry
    if key not in registry:
        # `--model a,b` read as one key (outside probe 228): --concepts and --cfg take lists.
        listed = [part.strip() for part in key.split(",") if part.strip()] if isinstance(key, str) else []
        hint = (
            f" (one model per --model: --model {' --model '.join(listed)})"
            if "," in str(key) and listed
            else ""
        )
        raise RegistryError(f"unknown model {key!r}{hint}; the registry has {sorted(registry)}")
    return registry[key]


def pipeline_class(spec: ModelSpec) -> type:
    """Import the pipeline class that `spec.pipeline` names."""
    module_name, _, class_name = spec.pipeline.rpartition(":")
    try:
        module = importlib.import_module(module_name or "diffusers")
    except ImportError as exc:
        raise RegistryError(
            f"model {spec.key!r} needs module {module_name!r} ({spec.requires or 'not installed'}): {exc}"
        ) from exc
    if not hasattr(module, class_name):
        raise RegistryError(f"model {spec.key!r}: {module.__name__} has no pipeline class {class_name!r}")
    return getattr(module, class_name)


def torch_dtype(spec: ModelSpec, device: str) -> torch.dtype:  # noqa: F821
    """The dtype to load `spec` with on `device`: the registry's on a GPU, float32 on a CPU."""
    import torch

    return torch.float32 if str(device).startswith("cpu") else getattr(torch, spec.dtype)


def load_pipeline(spec: ModelSpec, *, device: str, dtype: torch.dtype | None = None):  # noqa: F821
    """Load `spec`'s pipeline once, onto `device`, through ``from_pretrained``.

    Parameters
    ----------
    spec : ModelSpec
        The model. A ``build = "tiny"`` model that is not on disk yet is built first.
    device : str
        ``"cuda"``, ``"cuda:1"``, ``"cpu"``, ...
    dtype : torch.dtype, optional
        Overrides `torch_dtype(spec, device)`.

    Returns
    -------
    diffusers.DiffusionPipeline
        On `device`, progress bar disabled (runs report their own progress).
    """
    if str(device).startswith("cpu") and spec.build != "tiny":  # a tiny test model is quick anywhere
        warnings.warn(
            f"loading {spec.key!r} on the CPU in float32: generation works but is slow "
            "(minutes per image at 1024x1024 for the full-size models)",
            RuntimeWarning,
            stacklevel=2,
        )
    source = spec.source
    if spec.is_local:
        path = spec.local_path()
        if spec.build == "tiny" and not (path / "model_index.json").exists():
            from evaluation.models.tiny import build_tiny_pipeline

            build_tiny_pipeline(path, seed=spec.build_seed)
        source = str(path)
    dtype = torch_dtype(spec, device) if dtype is None else dtype
    pipe = pipeline_class(spec).from_pretrained(source, dtype=dtype, **spec.load_kwargs)
    pipe = pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def with_source(spec: ModelSpec, source: str | Path) -> ModelSpec:
    """A copy of `spec` loading from another hub id or directory."""
    source = str(source)
    if Path(source).is_absolute() or Path(source).exists():
        source = str(Path(source).resolve())
    return replace(spec, source=source)


#: The checkout's data folder's models, where a tiny model loads from for a run whose data
#: folder is an object store (a URI): what the registry's ``./data/models/<key>`` names.
DEFAULT_MODELS_DIR = PROJECT_ROOT / "data" / "models"


def in_data_folder(spec: ModelSpec) -> ModelSpec:
    """`spec` (a ``build = "tiny"`` model) loading from the data folder's ``models/<key>``,
    recorded so: ``source = "models/<key>"``, which `tiny_in` resolves against the data folder
    of the process that loads it. A run records no path of the machine it was made on, so a
    data folder moved or restored elsewhere resumes with the same command line."""
    return replace(spec, source=f"models/{spec.key}")


def tiny_in(spec: ModelSpec, models_dir: str | Path) -> ModelSpec:
    """`spec`, loading from ``models_dir/<key>`` when it is a tiny model of a data folder's
    ``models``: recorded as ``models/<key>`` (`in_data_folder`), or, by runs made before
    2026-12-02, as the absolute folder it was built in.

    A data folder moved or restored elsewhere builds the model again in its own ``models``
    (the same `build_seed`, so the same weights), not in the old place. A tiny model given
    another folder (``--source``) keeps it.
    """
    if spec.build != "tiny" or PurePosixPath(spec.source).parts[-2:] != ("models", spec.key):
        return spec
    return replace(spec, source=str(Path(models_dir).resolve() / spec.key))


def spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    """A JSON-able dict of `spec` (for a run's stored configuration)."""
    out = {}
    for name in spec.__dataclass_fields__:
        value = getattr(spec, name)
        out[name] = (
            dict(value) if isinstance(value, Mapping) else list(value) if isinstance(value, tuple) else value
        )
    return out


def spec_from_dict(fields: Mapping[str, Any]) -> ModelSpec:
    """The inverse of `spec_to_dict`."""
    fields = dict(fields)
    fields["cfg_scales"] = tuple(float(s) for s in fields["cfg_scales"])
    for name in ("call_kwargs", "load_kwargs"):
        fields[name] = MappingProxyType(dict(fields.get(name, {})))
    return ModelSpec(**fields)
