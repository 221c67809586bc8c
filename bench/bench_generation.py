"""Generation throughput: images per second at batch size 1 against batch size N.

On a GPU the model is Stable Diffusion XL at full size (UNet 2.6B, both text encoders,
VAE) built from its published configuration with random weights: no download, and the
compute does not depend on the weights. Images are 1024x1024 in float16, as in the
registry. On a CPU the model is the tiny random pipeline at 64x64 (labelled as such).

Each batch size is timed at two step counts; the difference gives the per-step time and
the intercept the fixed cost (text encoding, VAE decode, PNG-free conversion to uint8), so
the figure at the protocol's 50 steps is ``N / (fixed + 50 * per_step)``. Every call goes
through `evaluation.models.generation.generate`, the code path that runs use.

    python -m bench.bench_generation [--batch-sizes 1,4] [--steps 2,6] [--repeats 5]

or import `run` (alias of `bench_generation`) for a dict of the figures.

``--variants baseline,sdpa-off,channels-last,vae-slicing,vae-tiling,compile`` times the same
pipeline under each speed-up (see `VARIANTS`; ``a+b`` stacks two) on identical inputs, one
after the other, each undone before the next. Every variant also makes one reference call
(the first batch size, the first step count, the same seeds) whose images are compared with
the first variant's: the maximum and mean absolute difference in uint8 levels say whether a
variant gives the same images. A variant named twice (``baseline,...,baseline``) measures the
noise of the figures and of the images themselves. ``compile`` wraps the UNet in
``torch.compile``; its compilation happens in the first warm-up call, reported apart
(``first_call_s``) and never in the throughput.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evaluation.models.generation import GenerationError, generate
from evaluation.models.tiny import TINY_RESOLUTION, one_cpu_thread, write_clip_vocab

PROMPT = "A natural photo of a rotten apple, centered composition."
PROTOCOL_STEPS = 50
#: Speed-ups `apply_variant` knows (stack them with ``+``, e.g. ``compile+channels-last``):
#: ``baseline`` (the pipeline as loaded: diffusers' SDPA attention on torch 2),
#: ``sdpa-off`` (the classic `AttnProcessor` in UNet and VAE: attention as explicit matmuls
#: and softmax, what diffusers did before torch 2), ``channels-last`` (the UNet's weights in
#: NHWC memory format), ``vae-slicing`` (decode one image at a time), ``vae-tiling`` (decode in
#: overlapping tiles; only above the VAE's tile size, 1024 px for SDXL), ``compile``
#: (``torch.compile`` of the UNet, static shapes).
VARIANTS = ("baseline", "sdpa-off", "channels-last", "vae-slicing", "vae-tiling", "compile")
#: stabilityai/stable-diffusion-xl-base-1.0, unet/config.json (architecture fields).
SDXL_UNET = dict(
    sample_size=128,
    in_channels=4,
    out_channels=4,
    layers_per_block=2,
    block_out_channels=(320, 640, 1280),
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
    up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
    mid_block_type="UNetMidBlock2DCrossAttn",
    transformer_layers_per_block=(1, 2, 10),
    attention_head_dim=(5, 10, 20),
    cross_attention_dim=2048,
    use_linear_projection=True,
    addition_embed_type="text_time",
    addition_time_embed_dim=256,
    projection_class_embeddings_input_dim=2816,
    norm_num_groups=32,
    norm_eps=1e-5,
    flip_sin_to_cos=True,
    freq_shift=0,
)
#: vae/config.json of the same repository.
SDXL_VAE = dict(
    in_channels=3,
    out_channels=3,
    latent_channels=4,
    layers_per_block=2,
    block_out_channels=(128, 256, 512, 512),
    down_block_types=("DownEncoderBlock2D",) * 4,
    up_block_types=("UpDecoderBlock2D",) * 4,
    norm_num_groups=32,
    sample_size=1024,
    scaling_factor=0.13025,
    force_upcast=True,
)
#: text_encoder (CLIP ViT-L/14) and text_encoder_2 (OpenCLIP ViT-bigG/14) configurations.
CLIP_L = dict(
    hidden_size=768,
    intermediate_size=3072,
    num_attention_heads=12,
    num_hidden_layers=12,
    projection_dim=768,
    hidden_act="quick_gelu",
    vocab_size=49408,
    max_position_embeddings=77,
)
CLIP_BIG_G = dict(
    hidden_size=1280,
    intermediate_size=5120,
    num_attention_heads=20,
    num_hidden_layers=32,
    projection_dim=1280,
    hidden_act="gelu",
    vocab_size=49408,
    max_position_embeddings=77,
)


#: A miniature of the same architecture (same blocks, a few channels), for checks on a CPU.
SDXL_TINY_UNET = dict(
    SDXL_UNET,
    sample_size=32,
    layers_per_block=1,
    block_out_channels=(32, 64),
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
    up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
    transformer_layers_per_block=(1, 1),
    attention_head_dim=(2, 4),
    cross_attention_dim=64,
    addition_time_embed_dim=8,
    projection_class_embeddings_input_dim=80,  # 6 x 8 time features + text_encoder_2's 32
    norm_num_groups=8,
)
SDXL_TINY_VAE = dict(
    SDXL_VAE,
    block_out_channels=(16, 32),
    down_block_types=("DownEncoderBlock2D",) * 2,
    up_block_types=("UpDecoderBlock2D",) * 2,
    norm_num_groups=8,
    sample_size=64,
)
_TINY_CLIP = dict(intermediate_size=64, num_attention_heads=2, num_hidden_layers=2, projection_dim=32)


def sdxl_random_pipeline(device: str, dtype, *, tiny: bool = False) -> diffusers.StableDiffusionXLPipeline:  # noqa: F821
    """Full-size SDXL with random weights on `device` (weights initialised there).

    ``tiny=True``: the same architecture with a few channels (`SDXL_TINY_UNET`), 64x64 images
    and a VAE that halves the side, to check on a CPU what the full size does on a GPU.
    """
    import torch
    from diffusers import (
        AutoencoderKL,
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

    vocab = Path(tempfile.mkdtemp(prefix="bench-vocab-"))
    write_clip_vocab(vocab)
    tokenizer = CLIPTokenizer.from_pretrained(vocab)
    ids = dict(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    unet, vae, clip_l, clip_g = (
        (
            SDXL_TINY_UNET,
            SDXL_TINY_VAE,
            dict(CLIP_L, **_TINY_CLIP, hidden_size=32),
            dict(CLIP_BIG_G, **_TINY_CLIP, hidden_size=32),
        )
        if tiny
        else (SDXL_UNET, SDXL_VAE, CLIP_L, CLIP_BIG_G)
    )
    with torch.device(device):
        components = dict(
            unet=UNet2DConditionModel(**unet),
            vae=AutoencoderKL(**vae),
            text_encoder=CLIPTextModel(CLIPTextConfig(**clip_l, **ids)),
            text_encoder_2=CLIPTextModelWithProjection(CLIPTextConfig(**clip_g, **ids)),
        )
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        steps_offset=1,
        timestep_spacing="leading",
    )
    pipe = StableDiffusionXLPipeline(
        **components, tokenizer=tokenizer, tokenizer_2=tokenizer, scheduler=scheduler
    )
    pipe = pipe.to(device, dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tiny_random_pipeline() -> diffusers.StableDiffusionPipeline:  # noqa: F821
    """The registry's tiny-random model, built in a temporary folder and loaded like any model."""
    import warnings

    from evaluation.models.registry import load_pipeline, load_registry, with_source
    from evaluation.models.tiny import build_tiny_pipeline

    path = build_tiny_pipeline(Path(tempfile.mkdtemp(prefix="bench-tiny-")) / "tiny-random")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return load_pipeline(with_source(load_registry()["tiny-random"], path), device="cpu")


def _apply_one(pipe, name: str, compile_mode: str | None) -> Callable[[], None]:
    """Apply one speed-up of `VARIANTS` to `pipe` in place; return what undoes it."""
    import torch

    if name == "baseline":
        return lambda: None
    if name == "sdpa-off":
        from diffusers.models.attention_processor import AttnProcessor

        saved = {part: dict(getattr(pipe, part).attn_processors) for part in ("unet", "vae")}
        for part in saved:
            getattr(pipe, part).set_attn_processor(AttnProcessor())

        def restore() -> None:
            for part, processors in saved.items():
                getattr(pipe, part).set_attn_processor(processors)

        return restore
    if name == "channels-last":
        pipe.unet.to(memory_format=torch.channels_last)
        return lambda: pipe.unet.to(memory_format=torch.contiguous_format)
    if name == "vae-slicing":
        pipe.vae.enable_slicing()
        return pipe.vae.disable_slicing
    if name == "vae-tiling":
        pipe.vae.enable_tiling()
        return pipe.vae.disable_tiling
    if name == "compile":
        original = pipe.unet
        pipe.unet = torch.compile(original, mode=compile_mode, dynamic=False)

        def undo() -> None:
            pipe.unet = original
            torch._dynamo.reset()

        return undo
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)} (stack with '+')")


def check_variant(variant: str) -> list[str]:
    """The names stacked in `variant`; raises ValueError for one not in `VARIANTS`."""
    parts = variant.split("+")
    unknown = [p for p in parts if p not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)} (stack with '+')")
    return parts


def apply_variant(pipe, variant: str, compile_mode: str | None = None) -> Callable[[], None]:
    """Apply `variant` (names of `VARIANTS` joined by ``+``) to `pipe`; return its undo.

    ``compile`` is applied last, whatever the order given, so that it compiles the module
    the other speed-ups changed.
    """
    parts = check_variant(variant)
    undos = [_apply_one(pipe, p, compile_mode) for p in sorted(parts, key=lambda p: p == "compile")]

    def undo() -> None:
        for step in reversed(undos):
            step()

    return undo


def _time_call(pipe, batch: int, steps: int, resolution: int, guidance: float) -> tuple[float, bool]:
    _sync()
    start = time.perf_counter()
    try:
        generate(pipe, [PROMPT] * batch, list(range(batch)), guidance, steps=steps, resolution=resolution)
        finite = True
    except GenerationError:
        finite = False  # random fp16 weights may overflow; the work done is the same
    _sync()
    return time.perf_counter() - start, finite


def _sync() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _reference_images(pipe, batch: int, steps: int, resolution: int, guidance: float):
    """The uint8 images of one call (seeds 0..batch-1), or None if they are not finite."""
    import numpy as np

    try:
        out = generate(
            pipe, [PROMPT] * batch, list(range(batch)), guidance, steps=steps, resolution=resolution
        )
    except GenerationError:
        return None
    return np.stack(out.images)


def bench_generation(
    *,
    batch_sizes=(1, 4),
    steps=(2, 6),
    repeats: int = 5,
    device: str | None = None,
    variants=("baseline",),
    compile_mode: str | None = None,
    model: str = "auto",
    progress: bool = False,
) -> dict:
    """Measure images/s per batch size (and per variant); returns a JSON-able dict.

    Parameters
    ----------
    batch_sizes : sequence of int
        Images per pipeline call to compare (1 against N).
    steps : pair of int
        The two step counts timed per batch size (their difference isolates per-step cost).
    repeats : int
        Timed calls per (batch, steps); the fastest is kept (the least disturbed by other
        load, as ``timeit`` advises). Two untimed warm-up calls first.
    device : str, optional
        ``"cuda"`` or ``"cpu"``; default: cuda when available.
    variants : sequence of str
        Speed-ups to time one after the other (`VARIANTS`, ``+`` stacks); the first is the
        reference of the speed ratios and image differences. Default: the pipeline as loaded.
    compile_mode : str, optional
        ``mode`` of ``torch.compile`` for the ``compile`` variant (None: torch's default).
    model : str
        ``"auto"`` (full-size SDXL on a GPU, the registry's tiny-random on a CPU),
        ``"sdxl"`` or ``"sdxl-tiny"`` (`sdxl_random_pipeline` with ``tiny=True``: the SDXL
        code path on a CPU in seconds).
    progress : bool
        Print each row to stderr as JSON when it is measured.
    """
    import torch

    for variant in variants:
        check_variant(variant)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = device.startswith("cuda")
    if model == "sdxl-tiny":
        pipe, resolution, guidance = sdxl_random_pipeline(device, torch.float32, tiny=True), 64, 7.5
        label = "SDXL architecture at a few channels (sdxl-tiny), random weights, float32"
    elif model == "sdxl" or (model == "auto" and on_gpu):
        pipe, resolution, guidance = sdxl_random_pipeline(device, torch.float16), 1024, 7.5
        label = "SDXL architecture, random weights, float16"
    elif model == "auto":
        pipe, resolution, guidance = tiny_random_pipeline(), TINY_RESOLUTION, 7.5
        label = "tiny-random (0.2M-parameter UNet), float32"
    else:
        raise ValueError(f"`model` must be 'auto', 'sdxl' or 'sdxl-tiny', got {model!r}")
    device_name = torch.cuda.get_device_name(device) if on_gpu else "CPU (1 thread)"
    rows, reference = [], None
    # On a CPU, one thread: a tiny model gains nothing from more, and a shared machine's
    # load makes idle threads stall it (see evaluation.models.tiny.one_cpu_thread).
    with one_cpu_thread() if device == "cpu" else contextlib.nullcontext():
        for variant in variants:
            undo = apply_variant(pipe, variant, compile_mode)
            try:
                if on_gpu:
                    torch.cuda.reset_peak_memory_stats(device)
                for batch in batch_sizes:
                    row = _bench_batch(pipe, batch, steps, repeats, resolution, guidance)
                    row["variant"] = variant
                    if on_gpu:
                        row["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
                    rows.append(row)
                    if progress:  # each row as it comes, so that a cut-off run keeps them
                        print("row", json.dumps(row), file=sys.stderr, flush=True)
                images = _reference_images(pipe, batch_sizes[0], steps[0], resolution, guidance)
            finally:
                undo()
            if reference is None:
                reference = images
            diff = _image_difference(reference, images)
            for row in rows:
                if row["variant"] == variant and "max_abs_diff" not in row:
                    row.update(diff)
    return {
        "device": device_name,
        "model": label,
        "resolution": resolution,
        "guidance": guidance,
        "steps_timed": list(steps),
        "repeats": repeats,
        "variants": list(variants),
        "compile_mode": compile_mode,
        "torch": torch.__version__,
        "rows": rows,
    }


def _image_difference(reference, images) -> dict:
    """Max and mean absolute difference in uint8 levels (None where either is not finite)."""
    import numpy as np

    if reference is None or images is None:
        return {"max_abs_diff": None, "mean_abs_diff": None}
    delta = np.abs(reference.astype(np.int16) - images.astype(np.int16))
    return {"max_abs_diff": int(delta.max()), "mean_abs_diff": float(delta.mean())}


def _bench_batch(
    pipe, batch: int, steps: tuple[int, int], repeats: int, resolution: int, guidance: float
) -> dict:
    """Time one batch size at both step counts; derive per-step and fixed costs."""
    first = [_time_call(pipe, batch, s, resolution, guidance)[0] for s in steps]
    timed = {s: [_time_call(pipe, batch, s, resolution, guidance) for _ in range(repeats)] for s in steps}
    best = {s: min(t for t, _ in timed[s]) for s in steps}
    per_step = (best[steps[1]] - best[steps[0]]) / (steps[1] - steps[0])
    if per_step <= 0:  # noise larger than the steps' cost (a busy CPU): no extrapolation
        per_step = math.nan
    fixed = best[steps[0]] - per_step * steps[0]
    seconds_50 = fixed + PROTOCOL_STEPS * per_step
    return {
        "batch": batch,
        "seconds": {str(s): best[s] for s in steps},
        "per_step_s": per_step,
        "fixed_s": fixed,
        "seconds_per_call_50_steps": seconds_50,
        "images_per_s_50_steps": batch / seconds_50,
        "finite_pixels": all(ok for s in steps for _, ok in timed[s]),
        # The first (warm-up) call's extra time over the best call: compilation, autotuning.
        "first_call_s": first[0],
        "first_call_extra_s": first[0] - best[steps[0]],
    }


run = bench_generation


def format_markdown(result: dict) -> str:
    """A Markdown table of a `bench_generation` result (a variant column when several)."""
    header = (
        f"Device: {result['device']}; model: {result['model']}; {result['resolution']}x{result['resolution']}, "
        f"CFG {result['guidance']}; steps timed {result['steps_timed']}, best of {result['repeats']}."
    )
    if len(result.get("variants", ["baseline"])) == 1:
        lines = [
            header,
            "",
            "| batch | s/step | fixed s/call | s/call at 50 steps | images/s at 50 steps | speed-up vs batch 1 |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        base = result["rows"][0]["images_per_s_50_steps"]
        for row in result["rows"]:
            lines.append(
                f"| {row['batch']} | {row['per_step_s']:.4f} | {row['fixed_s']:.3f} "
                f"| {row['seconds_per_call_50_steps']:.2f} "
                f"| {row['images_per_s_50_steps']:.3f} | {row['images_per_s_50_steps'] / base:.2f}x |"
            )
        return "\n".join(lines)
    lines = [
        header
        + f" torch {result.get('torch', '?')}; compile mode {result.get('compile_mode') or 'default'}.",
        "",
        "| variant | batch | s/step | fixed s/call | images/s at 50 steps | vs first variant | first call s "
        "| peak GiB | max / mean abs diff vs first variant (uint8) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    first = result["variants"][0]
    base: dict[int, float] = {}
    for r in result["rows"]:  # the first variant's first occurrence
        if r["variant"] == first:
            base.setdefault(r["batch"], r["images_per_s_50_steps"])
    seen: set[tuple[str, int]] = set()
    for row in result["rows"]:
        name = row["variant"] + (" (again)" if (row["variant"], row["batch"]) in seen else "")
        seen.add((row["variant"], row["batch"]))
        ratio = row["images_per_s_50_steps"] / base[row["batch"]] if row["batch"] in base else float("nan")
        diff = (
            "not finite"
            if row.get("max_abs_diff") is None
            else f"{row['max_abs_diff']} / {row['mean_abs_diff']:.3f}"
        )
        peak = f"{row['peak_memory_gib']:.1f}" if "peak_memory_gib" in row else "-"
        lines.append(
            f"| {name} | {row['batch']} | {row['per_step_s']:.4f} | {row['fixed_s']:.3f} "
            f"| {row['images_per_s_50_steps']:.3f} | {ratio:.3f}x | {row['first_call_s']:.1f} | {peak} | {diff} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: run the benchmark, print Markdown, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="1,4", help="comma-separated (default: 1,4)")
    parser.add_argument("--steps", default="2,6", help="two step counts to time (default: 2,6)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per point (default: 5)")
    parser.add_argument("--device", default=None)
    parser.add_argument(
        "--variants",
        default="baseline",
        help=f"comma-separated speed-ups to compare, '+' stacks ({', '.join(VARIANTS)}; default: baseline)",
    )
    parser.add_argument(
        "--compile-mode", default=None, help="torch.compile mode for 'compile' (default: torch's)"
    )
    parser.add_argument("--model", default="auto", choices=("auto", "sdxl", "sdxl-tiny"))
    parser.add_argument("--json", type=Path, default=None, help="also write the raw result here")
    args = parser.parse_args(argv)
    steps = tuple(int(s) for s in args.steps.split(","))
    if len(steps) != 2 or steps[0] >= steps[1]:
        parser.error(f"--steps must be two increasing integers, got {args.steps!r}")
    result = bench_generation(
        batch_sizes=tuple(int(b) for b in args.batch_sizes.split(",")),
        steps=steps,
        repeats=args.repeats,
        device=args.device,
        variants=tuple(v.strip() for v in args.variants.split(",") if v.strip()),
        compile_mode=args.compile_mode,
        model=args.model,
        progress=True,
    )
    print(format_markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
