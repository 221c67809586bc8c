"""Generation: prompts, seeds, the model registry and the tiny random pipeline (CPU, offline)."""

import hashlib
import importlib.util
import warnings
from dataclasses import replace

import diffusers
import numpy as np
import pytest
import torch

from evaluation.concepts import Concept, load_concepts
from evaluation.models.generation import (
    GenerationError,
    build_prompt,
    generate,
    indefinite_article,
    item_seed,
)
from evaluation.models.registry import (
    RegistryError,
    load_pipeline,
    load_registry,
    pipeline_class,
    with_source,
)
from evaluation.models.tiny import TINY_RESOLUTION, build_tiny_pipeline

PAPER_MODELS = {"sdxl", "sd3", "sd35", "flux-dev", "sana15", "qwen-image", "omnigen2"}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_pipe(tmp_path_factory):
    path = build_tiny_pipeline(tmp_path_factory.mktemp("models") / "tiny-random")
    spec = with_source(load_registry()["tiny-random"], path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return load_pipeline(spec, device="cpu")


def _concept(key):
    return next(c for c in load_concepts() if c.key == key)


def test_prompt_follows_the_paper_template_with_the_modifier():
    assert (
        build_prompt(_concept("lonely cabin"), "natural")
        == "A natural photo of a lonely cabin, centered composition."
    )
    assert (
        build_prompt(_concept("rotten apple"), "clipart")
        == "A clip-art cartoon of a rotten apple, centered composition."
    )


def test_prompt_of_an_original_concept_puts_the_article_before_the_noun():
    assert build_prompt(_concept("apple"), "natural") == "A natural photo of an apple, centered composition."
    assert (
        build_prompt(_concept("cabin"), "clipart") == "A clip-art cartoon of a cabin, centered composition."
    )
    assert [indefinite_article(w) for w in ("egg", "Owl", "tree", "umbrella")] == ["an", "an", "a", "an"]


def test_prompt_rejects_an_unknown_style():
    with pytest.raises(ValueError, match=r"`style` must be one of \['clipart', 'natural'\], got 'photo'"):
        build_prompt(_concept("apple"), "photo")


def test_item_seed_is_sha256_of_the_item_fields():
    expected = int.from_bytes(hashlib.sha256(b"sdxl|rotten apple|clipart|7.5|3").digest()[:8], "big") & (
        2**63 - 1
    )
    assert item_seed("sdxl", "rotten apple", "clipart", 7.5, 3) == expected
    assert item_seed("sdxl", "apple", "natural", 7, 0) == item_seed("sdxl", "apple", "natural", 7.0, 0)


def test_item_seeds_differ_over_a_grid():
    grid = [
        (m, c, s, g, k)
        for m in ("sdxl", "sd3")
        for c in ("apple", "rotten apple")
        for s in ("natural", "clipart")
        for g in (3.0, 4.5, 6.0)
        for k in range(5)
    ]
    seeds = {item_seed(*item) for item in grid}
    assert len(seeds) == len(grid)
    assert all(0 <= s < 2**63 for s in seeds)


def test_registry_holds_the_papers_seven_models_at_protocol_defaults():
    registry = load_registry()
    assert PAPER_MODELS | {"tiny-random", "tiny-random-b"} == set(registry)
    for key in PAPER_MODELS:
        spec = registry[key]
        assert (spec.steps, spec.resolution, len(spec.cfg_scales)) == (50, 1024, 7), key
        assert spec.dtype in ("float16", "bfloat16"), key
        assert list(spec.cfg_scales) == sorted(set(spec.cfg_scales)), key
    assert registry["sdxl"].source == "stabilityai/stable-diffusion-xl-base-1.0"
    assert registry["qwen-image"].guidance_param == "true_cfg_scale"
    assert registry["qwen-image"].call_kwargs == {"negative_prompt": " "}


def test_registry_pipeline_classes_exist_in_diffusers_except_omnigen2():
    registry = load_registry()
    for key in PAPER_MODELS - {"omnigen2"} | {"tiny-random"}:
        assert pipeline_class(registry[key]) is getattr(diffusers, registry[key].pipeline)
    assert not hasattr(diffusers, "OmniGen2Pipeline")
    if importlib.util.find_spec("omnigen2") is not None:
        pytest.skip("the OmniGen2 package is installed here")
    with pytest.raises(
        RegistryError, match="model 'omnigen2' needs module 'omnigen2.pipelines.omnigen2.pipeline_omnigen2'"
    ):
        pipeline_class(registry["omnigen2"])


def test_registry_rejects_an_entry_with_a_bad_dtype(tmp_path):
    toml = tmp_path / "models.toml"
    toml.write_text(
        '[models.x]\nname="X"\npipeline="StableDiffusionPipeline"\nsource="a/b"\ndtype="half"\n'
        'steps=2\nresolution=64\nguidance_param="guidance_scale"\ncfg_scales=[1.0]\n'
    )
    with pytest.raises(
        RegistryError,
        match=r"model 'x': dtype must be one of \('float16', 'bfloat16', 'float32'\), got 'half'",
    ):
        load_registry(toml)
    toml.write_text('[models.y]\nname="Y"\n')
    with pytest.raises(RegistryError, match=r"model 'y' lacks required field\(s\) \['pipeline', 'source'"):
        load_registry(toml)
    # An argument the run sets itself, in call_kwargs, was stored as a run and crashed (outside probe 126).
    toml.write_text(
        '[models.c]\nname="C"\npipeline="StableDiffusionPipeline"\nsource="a/b"\ndtype="float32"\n'
        'steps=2\nresolution=64\nguidance_param="guidance_scale"\ncfg_scales=[1.0]\n'
        "call_kwargs = { height = 20000, guidance_scale = 3.0, eta = 0.5 }\n"
    )
    with pytest.raises(
        RegistryError, match=r"^model 'c': call_kwargs may not set \['guidance_scale', 'height'\]"
    ):
        load_registry(toml)
    # A side or a step count no model takes is refused as the command line's options are.
    for field, value, most in (("resolution", 20000, "4,096"), ("steps", 10**9, "1,000")):
        entry = {"steps": 2, "resolution": 64, field: value}
        toml.write_text(
            '[models.z]\nname="Z"\npipeline="StableDiffusionPipeline"\nsource="a/b"\ndtype="float32"\n'
            f'steps={entry["steps"]}\nresolution={entry["resolution"]}\nguidance_param="guidance_scale"\ncfg_scales=[1.0]\n'
        )
        with pytest.raises(
            RegistryError,
            match=rf"^model 'z': {field} must be a positive integer of at most {most}, got {value}$",
        ):
            load_registry(toml)


def test_tiny_pipeline_loads_back_through_from_pretrained_and_warns_on_cpu(tmp_path):
    path = build_tiny_pipeline(tmp_path / "tiny")
    assert sorted(p.name for p in path.iterdir()) == [
        "model_index.json",
        "scheduler",
        "text_encoder",
        "tokenizer",
        "unet",
        "vae",
    ]
    spec = with_source(load_registry()["tiny-random"], path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a tiny test model is quick anywhere: no warning
        load_pipeline(spec, device="cpu")
    # A full-size model on the CPU is slow, and says so (here the same folder, not marked tiny).
    with pytest.warns(RuntimeWarning, match="on the CPU in float32"):
        pipe = load_pipeline(replace(spec, build=""), device="cpu")
    assert isinstance(pipe, diffusers.StableDiffusionPipeline)
    assert pipe.unet.dtype.is_floating_point and str(pipe.unet.dtype) == "torch.float32"
    assert pipe.tokenizer("an apple").input_ids[1:-1] == pipe.tokenizer.convert_tokens_to_ids(
        ["a", "n</w>", "a", "p", "p", "l", "e</w>"]
    )


def test_tiny_pipeline_is_built_on_first_use(tmp_path):
    spec = replace(load_registry()["tiny-random"], source=str(tmp_path / "missing"))
    pipe = load_pipeline(spec, device="cpu")
    assert (tmp_path / "missing" / "model_index.json").is_file()
    assert isinstance(pipe, diffusers.StableDiffusionPipeline)


def test_same_seed_gives_identical_images(tiny_pipe):
    prompts = ["A natural photo of an apple, centered composition."] * 2
    first = generate(tiny_pipe, prompts, [11, 12], 7.5, steps=2, resolution=TINY_RESOLUTION)
    again = generate(tiny_pipe, prompts, [11, 12], 7.5, steps=2, resolution=TINY_RESOLUTION)
    assert [img.shape for img in first.images] == [(64, 64, 3)] * 2
    assert all(img.dtype == np.uint8 for img in first.images)
    np.testing.assert_array_equal(first.images[0], again.images[0])
    np.testing.assert_array_equal(first.images[1], again.images[1])
    assert np.abs(first.images[0].astype(int) - first.images[1].astype(int)).mean() > 1.0


def test_an_image_depends_on_its_seed_not_on_its_batch(tiny_pipe):
    prompt = "A clip-art cartoon of a rotten apple, centered composition."
    batch = generate(
        tiny_pipe, [prompt, "other words", prompt], [5, 6, 7], 4.0, steps=2, resolution=TINY_RESOLUTION
    )
    alone = generate(tiny_pipe, [prompt], [7], 4.0, steps=2, resolution=TINY_RESOLUTION)
    np.testing.assert_allclose(batch.images[2], alone.images[0], atol=1)


def test_generate_checks_inputs_before_touching_the_pipeline():
    cases = [
        (
            dict(prompts="a cat", seeds=[1]),
            "`prompts` must be a non-empty list of non-empty strings, got 'a cat'",
        ),
        (dict(prompts=["a"], seeds=[1, 2]), r"`seeds` must have one seed per prompt \(1\), got 2"),
        (dict(prompts=["a"], seeds=[-1]), r"`seeds` must be integers in \[0, 2\*\*63 - 1\], got \[-1\]"),
        (
            dict(prompts=["a"], seeds=[1], resolution=500),
            "`resolution` has to be a positive multiple of 8 but is 500",
        ),
        (dict(prompts=["a"], seeds=[1], guidance_scale=0.0), "`guidance_scale` must be positive, got 0.0"),
    ]
    for kwargs, message in cases:
        kwargs.setdefault("guidance_scale", 5.0)
        with pytest.raises(ValueError, match=message):
            generate(None, **kwargs)


def test_generate_reports_non_finite_pixels(tmp_path):
    spec = with_source(load_registry()["tiny-random"], build_tiny_pipeline(tmp_path / "t"))
    broken = load_pipeline(spec, device="cpu")
    broken.vae.decoder.conv_out.bias.data.fill_(float("nan"))
    with pytest.raises(GenerationError, match="non-finite pixels"):
        generate(broken, ["a"], [1], 5.0, steps=2, resolution=TINY_RESOLUTION)


def test_concept_dataclass_is_what_prompts_use():
    custom = Concept(
        key="cozy cabin",
        base="cabin",
        base_id=1,
        category="building",
        modifier_type="emotional",
        modifier="cozy",
    )
    assert build_prompt(custom, "natural") == "A natural photo of a cozy cabin, centered composition."


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_generation_runs_in_half_precision_and_repeats_its_seeds(tmp_path):
    spec = with_source(load_registry()["tiny-random"], build_tiny_pipeline(tmp_path / "tiny"))
    pipe = load_pipeline(spec, device="cuda")
    assert pipe.unet.dtype == torch.float16 and pipe.device.type == "cuda"
    prompts = ["A natural photo of an apple, centered composition."] * 3
    batch = generate(pipe, prompts, [1, 2, 3], 7.5, steps=2, resolution=TINY_RESOLUTION)
    again = generate(pipe, prompts[:1], [3], 7.5, steps=2, resolution=TINY_RESOLUTION)
    assert [img.shape for img in batch.images] == [(64, 64, 3)] * 3
    np.testing.assert_allclose(batch.images[2], again.images[0], atol=2)
