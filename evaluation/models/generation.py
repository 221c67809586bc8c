"""Text-to-image generation for the benchmark: prompts, per-item seeds, and one entry point.

`generate` wraps any loaded diffusers pipeline (see `evaluation.models.registry.load_pipeline`):
the caller loads the pipeline once per run and passes it in, with an explicit device.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluation.concepts import Concept
from storage.shown import shown

#: Style keys (as stored in runs) and the words that the prompt uses for them (Appendix C.1).
STYLES = {"natural": "natural photo", "clipart": "clip-art cartoon"}
#: Appendix C.2: "A [Style] of a [Adjective] [Object], centered composition."
PROMPT_TEMPLATE = "A {style} of {article} {phrase}, centered composition."
MAX_SEED = 2**63 - 1
MAX_GUIDANCE = 100.0
"""The largest guidance scale accepted (a run's, an import's): the registry's sweeps end at
12, and far beyond that a model draws saturated noise; 1e308 is a typing slip."""
FIXED_CALL_ARGUMENTS = frozenset(
    {"prompt", "num_images_per_prompt", "generator", "height", "width", "num_inference_steps", "output_type"}
)
"""The pipeline call's arguments `generate` sets itself: a registry's ``call_kwargs`` may not
name them (one that did was stored as a run and ended in "got multiple values": outside probe 126)."""
MAX_RESOLUTION = 4096
"""The largest image side accepted, in pixels: the registry's models draw at 1,024, and one
20,000-pixel image held 9.5 GB of a shared machine's memory and went on growing (outside
probe 124)."""
MAX_STEPS = 1000
"""The most denoising steps accepted: the schedulers' training timesteps; the registry's take 2-50."""


class GenerationError(RuntimeError):
    """The pipeline returned unusable images (e.g. NaN from a half-precision overflow)."""


def indefinite_article(word: str) -> str:
    """``"an"`` before a word that starts with a vowel letter, else ``"a"``.

    The paper's template always says "a"; an original concept has no adjective, so the
    article stands before the noun ("an apple"). This spelling rule ignores pronunciation
    ("an unicorn", "a hour"); the concept list has no such case that matters for color.
    """
    return "an" if word[:1].lower() in "aeiou" else "a"


def build_prompt(concept: Concept, style: str) -> str:
    """The benchmark prompt for one concept in one style.

    Parameters
    ----------
    concept : Concept
        Its ``key`` is the modifier and noun ("rotten apple"), or the noun alone ("apple").
    style : str
        A key of `STYLES`.

    Returns
    -------
    str
        E.g. ``"A natural photo of a lonely cabin, centered composition."`` and, with no
        adjective, ``"A clip-art cartoon of an apple, centered composition."``.
    """
    if style not in STYLES:
        raise ValueError(f"`style` must be one of {sorted(STYLES)}, got {shown(style)}")
    phrase = concept.key
    return PROMPT_TEMPLATE.format(style=STYLES[style], article=indefinite_article(phrase), phrase=phrase)


def item_seed(model: str, concept: str, style: str, cfg: float, sample: int) -> int:
    """A seed that depends only on (model, concept, style, cfg, sample).

    The first 8 bytes of SHA-256 over ``"model|concept|style|repr(float(cfg))|sample"``,
    reduced to 63 bits: stable across processes, machines and Python versions (unlike
    ``hash``), and distinct for every item of a run with overwhelming probability.

    Returns
    -------
    int
        In [0, 2**63 - 1].
    """
    text = f"{model}|{concept}|{style}|{float(cfg)!r}|{int(sample)}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") & MAX_SEED


@dataclass(frozen=True)
class GenerationOutput:
    """Images of one pipeline call.

    Attributes
    ----------
    images : tuple of ndarray
        One (H, W, 3) sRGB uint8 [0, 255] array per prompt, in prompt order.
    prompts, seeds : tuple
        As passed in.
    guidance_scale : float
        The value given to the pipeline's guidance parameter.
    seconds : float
        Wall time of the call, for throughput bookkeeping.
    """

    images: tuple[np.ndarray, ...]
    prompts: tuple[str, ...]
    seeds: tuple[int, ...]
    guidance_scale: float
    seconds: float


def check_inputs(
    prompts: Sequence[str], seeds: Sequence[int], guidance_scale: float, steps: int, resolution: int
) -> None:
    """Validate `generate`'s arguments before any model work; raise ValueError naming the argument."""
    if isinstance(prompts, str) or not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError(f"`prompts` must be a non-empty list of non-empty strings, got {shown(prompts)}")
    if len(seeds) != len(prompts):
        raise ValueError(f"`seeds` must have one seed per prompt ({len(prompts)}), got {len(seeds)}")
    bad = [s for s in seeds if not isinstance(s, (int, np.integer)) or not 0 <= s <= MAX_SEED]
    if bad:
        raise ValueError(f"`seeds` must be integers in [0, 2**63 - 1], got {bad[:3]}")
    if not guidance_scale > 0:
        raise ValueError(f"`guidance_scale` must be positive, got {guidance_scale}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`steps` must be a positive integer, got {shown(steps)}")
    if not isinstance(resolution, int) or resolution < 8 or resolution % 8:
        raise ValueError(f"`resolution` has to be a positive multiple of 8 but is {resolution!r}")


def _to_uint8(images: Any) -> tuple[np.ndarray, ...]:
    if len(images) and hasattr(images[0], "convert"):
        # Pipelines outside diffusers (OmniGen2) may return PIL images whatever output_type says.
        return tuple(np.asarray(img.convert("RGB"), dtype=np.uint8) for img in images)
    images = np.asarray(images, dtype=np.float32)
    if not np.isfinite(images).all():
        raise GenerationError(
            "the pipeline returned non-finite pixels (NaN/inf), typically a float16 overflow; "
            "load the model in bfloat16 or float32"
        )
    return tuple(np.rint(np.clip(img, 0.0, 1.0) * 255.0).astype(np.uint8) for img in images)


def generate(
    pipeline: Any,
    prompts: Sequence[str],
    seeds: Sequence[int],
    guidance_scale: float,
    *,
    guidance_param: str = "guidance_scale",
    steps: int = 50,
    resolution: int = 1024,
    call_kwargs: Mapping[str, Any] | None = None,
) -> GenerationOutput:
    """Generate one image per (prompt, seed) in a single pipeline call.

    Parameters
    ----------
    pipeline : diffusers.DiffusionPipeline
        Loaded once by the caller, already on its device and dtype.
    prompts : sequence of str, length N
        One prompt per image (repeat a prompt for several samples of it).
    seeds : sequence of int, length N
        One seed per image, in [0, 2**63 - 1] (see `item_seed`).
    guidance_scale : float
        Passed to the pipeline as `guidance_param`; > 0.
    guidance_param : str
        The pipeline's keyword for guidance, e.g. ``"guidance_scale"``, ``"true_cfg_scale"``.
    steps : int
        Denoising steps (paper: 50).
    resolution : int
        Square side in pixels, a multiple of 8 (paper: 1024).
    call_kwargs : Mapping, optional
        Fixed extra keywords of the model (e.g. Qwen-Image's ``negative_prompt``).

    Returns
    -------
    GenerationOutput
        N images, (resolution, resolution, 3) uint8.

    Raises
    ------
    ValueError
        On bad arguments, before the model runs.
    GenerationError
        If the pipeline returns non-finite pixels.

    Notes
    -----
    Each image's initial noise comes from its own CPU ``torch.Generator`` seeded with its
    seed (diffusers draws one latent per generator), so an image depends on its seed alone:
    not on its position in the batch, the batch size, or the device. GPU kernels are not
    bit-reproducible across batch sizes, so images agree to rounding there, exactly on a CPU.
    """
    # 1. Check inputs before any model work.
    check_inputs(prompts, seeds, guidance_scale, steps, resolution)
    import torch

    # 2. One generator per image, on the CPU so that seeds mean the same noise everywhere.
    generators = [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]

    # 3. Denoise all images of the batch in one call.
    start = time.perf_counter()
    kwargs = {**dict(call_kwargs or {}), guidance_param: float(guidance_scale)}
    with torch.inference_mode():
        result = pipeline(
            prompt=list(prompts),
            num_images_per_prompt=1,
            generator=generators,
            height=resolution,
            width=resolution,
            num_inference_steps=steps,
            output_type="np",
            **kwargs,
        )
    seconds = time.perf_counter() - start

    # 4. Decode to sRGB uint8 and package.
    return GenerationOutput(
        images=_to_uint8(result.images),
        prompts=tuple(prompts),
        seeds=tuple(int(s) for s in seeds),
        guidance_scale=float(guidance_scale),
        seconds=seconds,
    )
