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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

from evaluation.models.generation import GenerationError, generate
from evaluation.models.tiny import TINY_RESOLUTION, one_cpu_thread, write_clip_vocab

PROMPT = "A natural photo of a rotten apple, centered composition."
PROTOCOL_STEPS = 50
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


def sdxl_random_pipeline(device: str, dtype) -> diffusers.StableDiffusionXLPipeline:  # noqa: F821
    """Full-size SDXL with random weights on `device` (weights initialised there)."""
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
    with torch.device(device):
        components = dict(
            unet=UNet2DConditionModel(**SDXL_UNET),
            vae=AutoencoderKL(**SDXL_VAE),
            text_encoder=CLIPTextModel(CLIPTextConfig(**CLIP_L, **ids)),
            text_encoder_2=CLIPTextModelWithProjection(CLIPTextConfig(**CLIP_BIG_G, **ids)),
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


def _time_call(pipe, batch: int, steps: int, resolution: int, guidance: float) -> tuple[float, bool]:
    start = time.perf_counter()
    try:
        generate(pipe, [PROMPT] * batch, list(range(batch)), guidance, steps=steps, resolution=resolution)
        finite = True
    except GenerationError:
        finite = False  # random fp16 weights may overflow; the work done is the same
    return time.perf_counter() - start, finite


def bench_generation(
    *, batch_sizes=(1, 4), steps=(2, 6), repeats: int = 5, device: str | None = None
) -> dict:
    """Measure images/s per batch size; returns a JSON-able dict (see `format_markdown`).

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
    """
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        pipe, resolution, guidance = sdxl_random_pipeline(device, torch.float16), 1024, 7.5
        model, device_name = "SDXL architecture, random weights, float16", torch.cuda.get_device_name(device)
    else:
        pipe, resolution, guidance = tiny_random_pipeline(), TINY_RESOLUTION, 7.5
        model, device_name = "tiny-random (0.2M-parameter UNet), float32", "CPU (1 thread)"
    rows = []
    # On a CPU, one thread: a tiny model gains nothing from more, and a shared machine's
    # load makes idle threads stall it (see evaluation.models.tiny.one_cpu_thread).
    with one_cpu_thread() if device == "cpu" else contextlib.nullcontext():
        for batch in batch_sizes:
            rows.append(_bench_batch(pipe, batch, steps, repeats, resolution, guidance))
    return {
        "device": device_name,
        "model": model,
        "resolution": resolution,
        "guidance": guidance,
        "steps_timed": list(steps),
        "repeats": repeats,
        "rows": rows,
    }


def _bench_batch(
    pipe, batch: int, steps: tuple[int, int], repeats: int, resolution: int, guidance: float
) -> dict:
    """Time one batch size at both step counts; derive per-step and fixed costs."""
    for s in steps:
        _time_call(pipe, batch, s, resolution, guidance)
    timed = {s: [_time_call(pipe, batch, s, resolution, guidance) for _ in range(repeats)] for s in steps}
    best = {s: min(t for t, _ in timed[s]) for s in steps}
    per_step = (best[steps[1]] - best[steps[0]]) / (steps[1] - steps[0])
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
    }


run = bench_generation


def format_markdown(result: dict) -> str:
    """A Markdown table of a `bench_generation` result."""
    lines = [
        f"Device: {result['device']}; model: {result['model']}; {result['resolution']}x{result['resolution']}, "
        f"CFG {result['guidance']}; steps timed {result['steps_timed']}, best of {result['repeats']}.",
        "",
        "| batch | s/step | fixed s/call | s/call at 50 steps | images/s at 50 steps | speed-up vs batch 1 |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    base = result["rows"][0]["images_per_s_50_steps"]
    for row in result["rows"]:
        lines.append(
            f"| {row['batch']} | {row['per_step_s']:.4f} | {row['fixed_s']:.3f} | {row['seconds_per_call_50_steps']:.2f} "
            f"| {row['images_per_s_50_steps']:.3f} | {row['images_per_s_50_steps'] / base:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: run the benchmark, print Markdown, optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="1,4", help="comma-separated (default: 1,4)")
    parser.add_argument("--steps", default="2,6", help="two step counts to time (default: 2,6)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per point (default: 5)")
    parser.add_argument("--device", default=None)
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
    )
    print(format_markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
