"""Weights that are not on this machine are named before a job starts (issue 14.2)."""

import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gradio_client.exceptions import AppError
from huggingface_hub import try_to_load_from_cache
from huggingface_hub.constants import HF_HUB_CACHE

from app.common import MAX_MESSAGE_CHARS
from evaluation.__main__ import main
from evaluation.models.availability import components_without_weights, missing_weights, weights_refusal
from evaluation.models.registry import load_registry, spec_to_dict, with_source
from evaluation.models.segmentation import DEFAULT_DETECTOR, DEFAULT_SAM
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.research_data import sign_in, tiny_models  # noqa: F401 -- a fixture

ROOT = Path(__file__).resolve().parents[3]


def _cached_repo(cache: Path, repo: str, filename: str) -> None:
    """Lay out `repo` in a hub cache the way ``from_pretrained`` leaves it."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0" * 40)
    snapshot = folder / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / filename).write_text("{}")


def test_each_missing_model_is_named_with_how_to_get_it(tmp_path):
    registry = load_registry()
    sdxl, tiny = registry["sdxl"], registry["tiny-random"]
    problems = missing_weights([sdxl, tiny], DEFAULT_DETECTOR, DEFAULT_SAM, cache_dir=tmp_path)
    assert len(problems) == 3, problems  # the tiny model is built on first use
    assert problems[0].startswith(f"model 'sdxl' ({sdxl.source}) is not on this machine")
    assert f"`hf download {sdxl.source}`" in problems[0]
    assert problems[1].startswith(f"GroundingDINO ({DEFAULT_DETECTOR})")
    assert problems[2].startswith(f"SAM ({DEFAULT_SAM})")
    # A folder is named as a folder: "hf download /a/path" is no advice.
    (tmp_path / "nodet").mkdir()
    problems = missing_weights([], str(tmp_path / "nodet"), str(tmp_path / "nosam"), cache_dir=tmp_path)
    assert problems == [
        f"GroundingDINO: no model in the folder {tmp_path / 'nodet'} (its config.json is missing)",
        f"SAM: no model in the folder {tmp_path / 'nosam'} (its config.json is missing)",
    ]


def _weights(folder: Path, name: str = "model.safetensors") -> Path:
    """A small, whole safetensors file in `folder`, as a model's weights."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file({"w": np.arange(4096, dtype=np.float32)}, folder / name)
    return folder / name


def _cut(path: Path) -> None:
    """`path` cut to half its bytes, as a download or copy stopped half-way leaves it."""
    data = path.read_bytes()
    path.unlink()  # a hub cache's file is a link to its blob: write a file of its own
    path.write_bytes(data[: len(data) // 2])


def test_weights_in_the_hub_cache_or_a_local_folder_count_as_present(tmp_path):
    sdxl = load_registry()["sdxl"]
    cache = tmp_path / "hub"
    _cached_repo(cache, sdxl.source, "model_index.json")
    _cached_repo(cache, DEFAULT_DETECTOR, "config.json")
    [detector_snapshot] = cache.glob("models--IDEA-Research*/snapshots/*")
    sam = tmp_path / "sam"
    sam.mkdir()
    problems = missing_weights([sdxl], DEFAULT_DETECTOR, str(sam), cache_dir=cache)
    assert problems[1] == f"SAM: no model in the folder {sam} (its config.json is missing)"
    (sam / "config.json").write_text("{}")
    # A configuration without weights is no model (a download stopped after config.json).
    assert missing_weights([sdxl], DEFAULT_DETECTOR, str(sam), cache_dir=cache) == [
        f"GroundingDINO ({DEFAULT_DETECTOR}: the cached copy has no weights (no .safetensors or .bin file)) "
        f"is not on this machine: download it on a machine with internet (`hf download {DEFAULT_DETECTOR}`"
        + problems[0].split(f"`hf download {DEFAULT_DETECTOR}`", 1)[1],
        f"SAM: the folder {sam} has no weights (no .safetensors or .bin file); copy the model's folder whole",
    ]
    _weights(detector_snapshot)
    _weights(sam)
    assert missing_weights([sdxl], DEFAULT_DETECTOR, str(sam), cache_dir=cache) == []
    empty = with_source(sdxl, str(tmp_path / "nowhere"))
    [problem] = missing_weights([empty], cache_dir=cache)
    assert "no diffusers pipeline in" in problem and "model_index.json is missing" in problem
    assert missing_weights([], None, None, sam_checkpoint=str(tmp_path / "sam.pth")) == [
        f"the SAM checkpoint {tmp_path / 'sam.pth'} does not exist"
    ]


@pytest.mark.skipif(
    isinstance(try_to_load_from_cache(DEFAULT_DETECTOR, "config.json"), str),
    reason="GroundingDINO is in this machine's hub cache",
)
def test_a_tiny_model_with_the_papers_masking_is_refused_before_a_row_is_written(tmp_path):
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        selection = [["tiny-random"], ["apple"], [], [], "", 0, 0, ["natural"], "7.5", 1]
        with pytest.raises(
            AppError,
            match=rf"^The run was not started: for a tiny test model, choose the tiny-random masking \(Masking on the Evaluate tab, or `--segmenter tiny-random` on the command line\)\. "
            rf"Missing: GroundingDINO \({DEFAULT_DETECTOR}\), SAM \({DEFAULT_SAM}\) are not on this machine: "
            r"download each .*`hf download ID`",
        ):
            client.predict(
                researcher, "tiny-paper", *selection, "paper", 0.3, 0.25, api_name="/evaluate_start"
            )
    db = open_db(config.db_path)
    try:
        assert db.execute("select count(*) from runs").fetchone()[0] == 0
    finally:
        db.close()


def test_a_ray_preflight_probe_checks_the_weights_from_plain_values_without_the_pipeline(tmp_path):
    """`weights_request` is what a Ray preflight probe receives (`evaluation.pipeline.ray_preflight`):
    unpickled in a fresh process it imports neither the pipeline nor POT, and the reasons found
    there are the ones `check_weights` raises on the head."""
    from evaluation.models.registry import spec_to_dict
    from evaluation.pipeline.jobs import JobError, SegmenterSpec, check_weights, weights_request

    model = with_source(load_registry()["sdxl"], str(tmp_path / "no-model"))
    config = {"models": {model.key: spec_to_dict(model)}}
    masking = SegmenterSpec(detector=str(tmp_path / "no-detector"), sam=str(tmp_path / "no-sam"))
    code = (
        "import pickle, sys\n"
        "from evaluation.models.availability import weights_refusal\n"
        f"print(weights_refusal(*pickle.loads({pickle.dumps(weights_request(config, masking))!r})))\n"
        "print(sorted(m for m in ('evaluation.pipeline.jobs', 'ot', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    refusal, imported = done.stdout.strip().splitlines()
    assert imported == "[]"
    with pytest.raises(JobError) as refused:
        check_weights(config, masking)
    assert str(refused.value) == f"The run was not started: {refusal}."
    assert refusal.startswith("model 'sdxl': no diffusers pipeline in ")
    assert f"GroundingDINO: no model in the folder {tmp_path / 'no-detector'}" in refusal
    assert f"SAM: no model in the folder {tmp_path / 'no-sam'}" in refusal
    assert weights_request(config, SegmenterSpec(tiny_dir=str(tmp_path)))[1] is None  # builds its own
    with pytest.raises(
        JobError, match=r"^The run was not started: model 'sdxl': no diffusers pipeline in [^;]*\.$"
    ):
        check_weights(config, SegmenterSpec(tiny_dir=str(tmp_path)))


def test_a_run_of_every_model_without_any_weights_is_refused_in_full_within_what_the_app_shows():
    # Each model used to carry its own how-to, and the app cut the refusal in the middle of them.
    registry = load_registry()
    hub = [spec for spec in registry.values() if spec.build != "tiny"]
    ids = [spec.source for spec in hub] + [DEFAULT_DETECTOR, DEFAULT_SAM]
    if any(
        isinstance(try_to_load_from_cache(i, n), str)
        for i in ids
        for n in ("model_index.json", "config.json")
    ):
        pytest.skip("a model is in this machine's hub cache")
    refusal = weights_refusal([spec_to_dict(spec) for spec in hub], (DEFAULT_DETECTOR, DEFAULT_SAM, ""))
    assert len(f"The run was not started: {refusal}.") <= MAX_MESSAGE_CHARS
    assert all(f"({i})" in refusal for i in ids)
    assert refusal.endswith(
        "are not on this machine: download each on a machine with internet (`hf download ID`, after "
        "accepting its licence on the hub and `hf auth login` if it is gated) and copy that Hugging Face "
        "cache into this server's (its `HF_HOME`, by default ~/.cache/huggingface), or point the registry "
        "(a text-to-image model) or the masking options (Masking on the Evaluate tab, or `--detector`, "
        "`--sam`) at a local folder"
    )
    assert str(HF_HUB_CACHE) not in refusal  # the app shows it to researchers: no server path


def _lab_registry(path: Path, source: Path) -> Path:
    """A registry with one local model, `source`, as a lab adds its own (the tiny architecture)."""
    path.write_text(
        '[models.our-lab-sd]\nname = "Our lab SD"\nparams = "0.2M"\n'
        'pipeline = "StableDiffusionPipeline"\n'
        f'source = "{source}"\ndtype = "float16"\nsteps = 2\nresolution = 64\n'
        'guidance_param = "guidance_scale"\ncfg_scales = [7.5]\nbatch_size = 8\nrequires = ""\n'
    )
    return path


def test_a_pipeline_copied_without_its_unet_weights_is_named_before_a_row_is_written(
    tmp_path,
    capsys,
    tiny_models,  # noqa: F811
):
    """An outside lab's model folder lacked ``unet/*.safetensors``: the run was stored and
    queued, then failed in diffusers' "no file named diffusion_pytorch_model.bin"."""
    whole = tiny_models / "tiny-random"
    assert components_without_weights(whole) == []  # the scheduler and tokenizer need none
    broken = tmp_path / "our-lab-sd"
    shutil.copytree(whole, broken)
    for weights in (broken / "unet").glob("*.safetensors"):
        weights.unlink()
    shutil.rmtree(broken / "vae")
    [encoder] = (broken / "text_encoder").glob("*.safetensors")
    _cut(encoder)
    assert components_without_weights(broken) == ["unet", "vae"]
    registry = _lab_registry(tmp_path / "models.toml", broken)
    argv = ["run", "--run", "r", "--model", "our-lab-sd", "--registry", str(registry), "--concepts", "apple"]
    argv += ["--samples", "1", "--cfg", "7.5", "--styles", "natural", "--segmenter", "tiny-random"]
    argv += ["--device", "cpu", "--db", str(tmp_path / "db.sqlite"), "--data-dir", str(tmp_path / "data")]
    assert main(argv) == 2
    # The damaged file is named with the missing parts, not only once they are mended
    # (outside probe 186).
    assert re.search(
        f"model 'our-lab-sd': the pipeline in {re.escape(str(broken))} has no weights for unet, vae "
        r"\(no \.safetensors or \.bin file in unet/, vae/\), and has weights that cannot be loaded: "
        rf"text_encoder/{encoder.name} \(cut short or damaged: [^)]*\); copy the model's folder whole",
        capsys.readouterr().err,
    )
    assert not (tmp_path / "db.sqlite").exists()  # nor the new database it had made (outside probe 208)
    # The same cut short in the hub cache (a download stopped after its index).
    sdxl = load_registry()["sdxl"]
    cache = tmp_path / "hub"
    _cached_repo(cache, sdxl.source, "model_index.json")
    [snapshot] = cache.glob("models--*/snapshots/*")
    (snapshot / "model_index.json").unlink()
    shutil.copytree(broken, snapshot, dirs_exist_ok=True)
    [problem] = missing_weights([sdxl], cache_dir=cache)
    assert re.match(
        re.escape(f"model 'sdxl' ({sdxl.source}: the cached copy has no weights for unet, vae, and has ")
        + rf"weights that cannot be loaded: text_encoder/{encoder.name} \(cut short or damaged: [^)]*\)\) is "
        + re.escape(
            f"not on this machine: download it on a machine with internet (`hf download {sdxl.source}`"
        ),
        problem,
    ), problem


def test_weights_cut_short_or_missing_in_a_built_tiny_model_or_masker_are_named_before_a_row_is_written(
    tmp_path,
    capsys,
    tiny_models,  # noqa: F811
):
    """Outside probe 124: a tiny model whose unet weights were gone, a tiny SAM without its
    weights and a detector cut short were queued (the app) or stored (the command line), and
    failed at the stage that loaded them, the last in a safetensors traceback."""
    from evaluation.models.availability import damaged_weights
    from evaluation.pipeline.jobs import JobError, check_weights, segmenter_preset

    models = tmp_path / "data" / "models"
    shutil.copytree(tiny_models, models)
    assert [damaged_weights(p) for p in sorted(models.rglob("*")) if p.is_dir()] == [[]] * len(
        [p for p in models.rglob("*") if p.is_dir()]
    )
    argv = ["run", "--run", "r", "--model", "tiny-random", "--concepts", "apple", "--samples", "1"]
    argv += ["--cfg", "7.5", "--styles", "natural", "--segmenter", "tiny-random", "--device", "cpu"]
    argv += ["--db", str(tmp_path / "db.sqlite"), "--data-dir", str(tmp_path / "data")]
    [unet] = (models / "tiny-random" / "unet").glob("*.safetensors")
    _cut(unet)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        f"model 'tiny-random': the pipeline in {models / 'tiny-random'} has weights that cannot be loaded: "
        f"unet/{unet.name} (cut short or damaged: "
    ) in err
    # Built here, not copied: the remedy is to build them again (outside probe 131).
    assert f"; build it again: python -m evaluation build-tiny --models-dir {models}" in err
    shutil.rmtree(models / "tiny-random")  # built again where it is empty: no refusal for it
    # tiny-random-b is built by the run that needs it, not by build-tiny: its remedy says so
    # (outside probe 236 was told to copy its folder whole).
    from evaluation.models.registry import load_registry
    from evaluation.models.tiny import build_tiny_pipeline

    build_tiny_pipeline(models / "tiny-random-b", seed=load_registry()["tiny-random-b"].build_seed)
    for weights in (models / "tiny-random-b" / "unet").glob("*.safetensors"):
        weights.unlink()
    assert main([*argv[:4], "tiny-random-b", *argv[5:]]) == 2
    assert (
        f"; remove the folder {models / 'tiny-random-b'}: the next run builds it again, from the same seed "
        "(the same weights)"
    ) in capsys.readouterr().err
    [sam] = (models / "tiny-sam").glob("*.safetensors")
    sam.unlink()
    tiny = segmenter_preset("tiny-random", models)
    with pytest.raises(
        JobError,
        match=rf"SAM: the folder {models / 'tiny-sam'} has no weights \(no \.safetensors.*build-tiny",
    ):
        check_weights(None, tiny)
    assert main(["build-tiny", "--models-dir", str(models)]) == 0  # ... which mends them
    capsys.readouterr()
    shutil.copytree(tiny_models / "tiny-sam", models / "tiny-sam", dirs_exist_ok=True)
    check_weights(None, tiny)
    [detector] = (models / "tiny-grounding-dino").glob("*.safetensors")
    _cut(detector)
    at = argv.index("--segmenter")
    given = [*argv[:at], *argv[at + 2 :], "--detector", str(models / "tiny-grounding-dino")]
    given += ["--sam", str(models / "tiny-sam")]
    assert main(given) == 2
    err = capsys.readouterr().err
    assert (
        f"GroundingDINO: the folder {models / 'tiny-grounding-dino'} has weights that cannot be loaded: "
        in err
    )
    assert "Traceback" not in err
    assert not (tmp_path / "db.sqlite").exists()  # nor the new database it had made (outside probe 208)
    # A sharded model's index naming a shard that is not there, and a torch zip cut short.
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "model.safetensors.index.json").write_text(
        '{"weight_map": {"w": "model-00001-of-00002.safetensors"}}'
    )
    torch_zip = tmp_path / "shards" / "pytorch_model.bin"
    import torch

    torch.save({"w": torch.zeros(64)}, torch_zip)
    _cut(torch_zip)
    assert damaged_weights(tmp_path / "shards") == [
        "model.safetensors.index.json (names shards that are not there: model-00001-of-00002.safetensors)",
        "pytorch_model.bin (cut short or damaged: no zip directory at its end)",
    ]
