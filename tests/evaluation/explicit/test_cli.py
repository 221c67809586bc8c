"""``python -m evaluation explicit`` end to end on the tiny models, and its run records."""

import dataclasses
import hashlib
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evaluation.__main__ import main
from evaluation.color.synthetic import render
from evaluation.explicit.mode import ExplicitWork, create_explicit_run, score_explicit
from evaluation.explicit.prompts import build_prompts
from evaluation.explicit.rules import SCORINGS
from evaluation.explicit.tables import accuracy_table, image_verdicts
from evaluation.models.registry import get_model, load_registry
from evaluation.pipeline import runs
from evaluation.pipeline.stages import png_bytes, save_by_hash
from tests.evaluation.explicit.test_masking import BoxSam

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    assert main(["build-tiny", "--models-dir", str(root)]) == 0
    return root


def _explicit(tmp_path, models, *extra):
    return main(
        [
            *_explicit_argv(tmp_path, models),
            "--db",
            str(tmp_path / "db.sqlite"),
            "--data-dir",
            str(tmp_path / "data"),
            *extra,
        ]
    )


def _explicit_argv(tmp_path, models):
    """A small run's options, without --db and --data-dir."""
    return [
        "explicit",
        "--run",
        "x",
        "--model",
        "tiny-random",
        "--source",
        str(models / "tiny-random"),
        "--cfg",
        "2",
        "--tasks",
        "color_name,multi_object",
        "--systems",
        "iscc-nbs-l1",
        "--colors",
        "red,blue",
        "--objects",
        "car,apple",
        "--size",
        "1",
        "--samples",
        "1",
        "--detector",
        str(models / "tiny-grounding-dino"),
        "--sam",
        str(models / "tiny-sam"),
        "--box-threshold",
        "0",
        "--text-threshold",
        "0",
        "--presence-threshold",
        "0",
        "--device",
        "cpu",
    ]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_explicit_runs_end_to_end_and_resumes(tmp_path, models, capsys):
    assert _explicit(tmp_path, models, "--table", str(tmp_path / "table.csv")) == 0
    printed = capsys.readouterr().out
    assert "run 'x': 4 images over 1 model(s), 4 prompt(s)" in printed
    assert "4 new image(s) judged; 4 in run 'x'" in printed
    db = runs.connect(tmp_path / "db.sqlite")
    items = runs.items(db, "x")
    assert [i["status"] for i in items] == ["segmented"] * 4
    assert {i["style"] for i in items} == {"explicit"}
    results = runs.explicit_results(db, run="x")
    # 2 single-object + 2 two-object prompts, one image each, every rule set
    assert len(results) == (2 * 1 + 2 * 2) * len(SCORINGS)
    assert {r["scoring"] for r in results} == {"paper", "paper-mean", "released", "released-closest"}
    assert all(r["present"] == 1 and r["segment_status"] == "ok" for r in results)
    assert all(r["delta_e00"] is not None and r["correct"] in (0, 1) for r in results)
    assert {(r["task"], r["system"]) for r in results} == {
        ("color_name", "iscc-nbs-l1"),
        ("multi_object", "iscc-nbs-l1"),
    }
    table = pd.read_csv(tmp_path / "table.csv", index_col=0)
    assert list(table.index) == ["tiny-random"]
    assert list(table.columns) == ["color_name", "multi_object", "average", "unit", "rules", "run"]
    assert table[["unit", "rules", "run"]].values.tolist() == [["% of generated images", "paper", "x"]]
    accuracy = table[["color_name", "multi_object", "average"]]
    assert ((accuracy >= 0) & (accuracy <= 100)).all().all()

    assert _explicit(tmp_path, models) == 0
    again = capsys.readouterr().out
    assert "run 'x': 4 images over 1 model(s), 4 prompt(s)" in again
    assert "0 new image(s) judged; 4 in run 'x'" in again
    assert runs.explicit_results(db, run="x") == results

    # A resume takes the run as it was made: options of a new run are refused, not ignored.
    storage = ["--db", str(tmp_path / "db.sqlite"), "--data-dir", str(tmp_path / "data")]
    assert main(["explicit", "--run", "x", "--samples", "2", "--size", "5", *storage]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "--size, --samples describe a new run, but without --model run 'x' is resumed as it was made; "
            "leave them out to resume, or give --model and a new --run name"
        )
    )
    assert _explicit(tmp_path, models, "--size", "2") == 2  # with --model: what changed is named
    assert re.search(r"prompts\.size: 1 → 2\); choose another name", capsys.readouterr().err)
    assert runs.explicit_results(db, run="x") == results
    # `--run` alone resumes with the run's own masking (docs/explicit.md): the masker of the
    # defaults, whose weights this machine lacks, refused it.
    assert main(["explicit", "--run", "x", "--device", "cpu", *storage]) == 0, capsys.readouterr().err
    assert "0 new image(s) judged; 4 in run 'x'" in capsys.readouterr().out
    # A lost image is made again from its seed, the same bytes on a CPU (it was left lost).
    lost = tmp_path / "data" / items[0]["image_path"]
    lost.unlink()
    assert main(["explicit", "--run", "x", "--device", "cpu", *storage]) == 0, capsys.readouterr().err
    assert lost.is_file() and runs.items(db, "x") == items and runs.explicit_results(db, run="x") == results
    capsys.readouterr()
    # Another masking is refused for what it is, before the weights it names are looked for
    # (this machine lacks the default masker's: that refusal came first and misled).
    masking = runs.run_masking(db, "x")
    assert main(["explicit", "--run", "x", "--box-threshold", "0.5", "--device", "cpu", *storage]) == 2
    refused = capsys.readouterr().err
    assert (
        "the masking given now differs in ['box_threshold', 'detector', 'sam', 'text_threshold']" in refused
    )
    assert "weights" not in refused
    assert refused.strip().endswith(
        f"its options: --detector {models / 'tiny-grounding-dino'} --sam {models / 'tiny-sam'} "
        "--box-threshold 0 --text-threshold 0"
    ), refused
    assert runs.run_masking(db, "x") == masking


def test_a_data_dir_that_is_a_file_or_cannot_be_written_is_refused_before_the_run_is_stored(
    tmp_path, models, capsys
):
    """Found after the run and its items were stored, in an error naming a sub-folder."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    storage = ["--db", str(tmp_path / "db.sqlite"), "--data-dir"]
    explicit = _explicit_argv(tmp_path, models)
    assert main([*explicit, *storage, str(afile / "data")]) == 2
    assert re.search(
        r"--data-dir '.*afile/data' lies under the plain file '.*afile'; give a folder",
        capsys.readouterr().err,
    )
    assert main([*explicit, *storage, "/proc/data"]) == 2
    assert re.search(
        r"--data-dir '/proc/data': nothing can be written in '/proc' \(.*\); give a folder",
        capsys.readouterr().err,
    )
    assert not (tmp_path / "db.sqlite").exists()
    # A mistyped color: refused, and no database made either
    assert main([*explicit, "--colors", "red,bleu", *storage, str(tmp_path / "data")]) == 2
    assert "`colors`: 'bleu' is in none of the systems" in capsys.readouterr().err
    assert not (tmp_path / "db.sqlite").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--presence", "novqa", r"the --presence VQA model '.*novqa': no model in the folder"),
        ("--table", "nodir/table.csv", r"--table '.*nodir/table\.csv': its folder '.*nodir' does not exist"),
        ("--table", ".", r"--table '.*': is a folder; give a file name"),
        ("--table", "/proc/t.csv", r"--table '/proc/t\.csv': nothing can be written in its folder '/proc'"),
    ],
)
def test_a_bad_presence_model_or_table_path_is_refused_before_the_run_is_stored(
    tmp_path, models, capsys, option, value, message
):
    """They were found after every image was generated and scored, leaving the run."""
    assert _explicit(tmp_path, models, option, str(tmp_path / value)) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "db.sqlite").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "option, value", [("--text-threshold", "7"), ("--box-threshold", "-1"), ("--box-threshold", "nan")]
)
def test_a_threshold_out_of_range_with_a_detector_and_sam_is_refused_before_the_run(
    tmp_path, models, capsys, option, value
):
    """With --detector/--sam (not a preset) it was refused at the segment stage, the run
    stored and every image made (outside probe 131); argparse now refuses it, naming the
    option typed."""
    with pytest.raises(SystemExit) as exit:
        _explicit(tmp_path, models, option, value)
    assert exit.value.code == 2
    assert f"argument {option}: must be a number from 0 to 1, got {value!r}" in capsys.readouterr().err
    assert not (tmp_path / "db.sqlite").exists() and not (tmp_path / "data").exists()


def test_a_presence_model_that_cannot_answer_questions_is_refused_before_the_run(tmp_path, models, capsys):
    """A SAM given as the VQA model was loaded after the images, in a hundred class names."""
    assert _explicit(tmp_path, models, "--presence", str(models / "tiny-sam")) == 2
    assert (
        f"the --presence model '{models / 'tiny-sam'}' is a 'sam' model, not an image-text-to-text (VQA) model; "
        "or give --presence detection" in capsys.readouterr().err
    )
    assert not (tmp_path / "db.sqlite").exists()


def test_a_concept_run_is_refused_by_explicit(tmp_path, models, capsys):
    db = runs.connect(tmp_path / "db.sqlite")
    runs.create_run(db, "plain", [], {"models": {}})
    argv = [
        "explicit",
        "--run",
        "plain",
        "--db",
        str(tmp_path / "db.sqlite"),
        "--data-dir",
        str(tmp_path / "d"),
    ]
    assert main(argv) == 2
    assert "not an explicit-color run" in capsys.readouterr().err


@pytest.fixture
def synthetic_run(tmp_path, monkeypatch):
    """An explicit run whose images are synthetic renders of each prompt's target color, with
    the masking patched to their exact masks; returns (db, work)."""
    from evaluation.color.systems import load_system
    from evaluation.explicit import mode
    from evaluation.models.segmentation import Segmentation

    db = runs.connect(tmp_path / "db.sqlite")
    prompts = build_prompts(tasks=["color_name", "numeric"], systems=["iscc-nbs-l2"], objects=["car"], size=1)
    spec = dataclasses.replace(get_model("tiny-random", load_registry()), cfg_scales=(2.0,))
    create_explicit_run(db, "syn", [spec], prompts, samples=1, settings={"note": "synthetic"})
    masks = {}
    for item in runs.items(db, "syn"):
        prompt = next(p for p in prompts if p.id == item["concept"])
        system = load_system(prompt.system)
        image, mask = render(system.rgb[system.index(prompt.targets[0])], "sphere", size=96, seed=item["id"])
        path, digest = save_by_hash(tmp_path, Path("runs/syn/images"), png_bytes(image), ".png")
        runs.record_items(
            db, [{"id": item["id"], "status": "generated", "image_path": path, "image_sha256": digest}]
        )
        masks[digest] = mask

    def exact_mask(image, noun, negatives, box_threshold, text_threshold, *, detector, sam):
        mask = masks[hashlib.sha256(png_bytes(image)).hexdigest()]
        return Segmentation(status="ok", mask=mask, box=(0.0, 0.0, 96.0, 96.0), score=0.9)

    monkeypatch.setattr(mode, "segment_object", exact_mask)
    stored = {row["prompt_id"]: row for row in runs.explicit_prompts(db, "syn")}
    return db, ExplicitWork(None, BoxSam(), tmp_path, stored)  # detection is patched out


def test_score_stage_on_synthetic_images_calls_the_right_color_correct(synthetic_run):
    """The stage must call every render of its target correct, and the tables say 100%."""
    db, work = synthetic_run
    assert score_explicit(db, "syn", work) == 58
    images = image_verdicts(runs.explicit_results(db, run="syn"))
    assert len(images) == 58 and images["scored"].all() and images["correct"].all()
    table = accuracy_table(images)
    assert table.to_dict("index") == {
        "tiny-random": {"color_name": 100.0, "numeric": 100.0, "average": 100.0}
    }
    assert score_explicit(db, "syn", work) == 0


def test_robustness_command_compares_an_explicit_runs_rule_sets(synthetic_run, tmp_path, capsys):
    """Every rule set is stored per object; the command reports each against the default."""
    db, work = synthetic_run
    score_explicit(db, "syn", work)
    db_path = db.conn.execute("pragma database_list").fetchone()[2]
    argv = ["robustness", "--db", db_path, "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]
    assert main([*argv, "--explicit-run", "syn"]) == 0
    printed = capsys.readouterr().out
    # One system: no ranking to change, and the line says so rather than "no ranking changes".
    assert (
        "- explicit_rules paper → paper-mean: not compared (fewer than two models have a value under "
        "both): accuracy (from the stored verdicts)" in printed
    )
    written = pd.read_csv(tmp_path / "out" / "explicit-robustness.csv")
    assert written["alternative"].tolist() == ["paper-mean", "released", "released-closest"]
    assert set(written["metric"]) == {"accuracy"}
    assert set(zip(written["largest_change_unit"], written["run"])) == {("percentage points", "syn")}
    assert main([*argv, "--explicit-run", "nothing"]) == 2
    assert "explicit-color run" in capsys.readouterr().err


def test_prompt_view_shows_the_dominant_color_beside_the_target_and_candidates(synthetic_run):
    from evaluation.explicit.browser import prompt_view

    db, work = synthetic_run
    assert prompt_view(db, "syn", "color_name/iscc-nbs-l2/red/car") == []
    score_explicit(db, "syn", work)
    views = prompt_view(db, "syn", "color_name/iscc-nbs-l2/red/car")
    assert len(views) == 1 and views[0].scored and views[0].correct
    assert views[0].model == "tiny-random" and views[0].image_path.startswith("runs/syn/images/")
    (red,) = views[0].objects
    assert red.object == "car" and red.target == "red" and red.present and red.segment_status == "ok"
    assert red.candidates == (  # iscc_nbs_l2.csv: (185, 40, 66), (122, 44, 38), (186, 43, 119), (215, 71, 42)
        ("red", "#b92842"),
        ("reddish brown", "#7a2c26"),
        ("purplish red", "#ba2b77"),
        ("reddish orange", "#d7472a"),
    )
    assert red.mask_path.startswith("runs/syn/masks/") and red.verdicts == {
        "chroma_pass": True,
        "e00_pass": True,
        "hue_pass": True,
        "correct": True,
    }
    assert red.metrics["delta_e00"] < 5.0 and red.dominant_hex.startswith("#")
    dominant = np.array([int(red.dominant_hex[i : i + 2], 16) for i in (1, 3, 5)])
    assert np.abs(dominant - [0xB9, 0x28, 0x42]).max() < 20
    with pytest.raises(ValueError, match="`scoring`"):
        prompt_view(db, "syn", "color_name/iscc-nbs-l2/red/car", scoring="blender")


def test_lazy_work_pickles_without_its_models(tmp_path, models):
    """What a Ray executor ships to its workers: the specs, not the loaded detector and SAM."""
    import pickle

    from evaluation.explicit.mode import LazyExplicitWork
    from evaluation.pipeline.jobs import SegmenterSpec

    spec = SegmenterSpec(str(models / "tiny-grounding-dino"), str(models / "tiny-sam"), 0.0, 0.0)
    work = LazyExplicitWork(spec, tmp_path, {}, device="cpu", presence_threshold=0.0)
    assert work([]) == [] and work._work is not None and work._work.presence_threshold == 0.0
    shipped = pickle.loads(pickle.dumps(work))
    assert shipped._work is None
    assert (shipped.segmenter, shipped.device, shipped.presence, shipped.options) == (
        spec,
        "cpu",
        "detection",
        {"presence_threshold": 0.0},
    )
    assert len(pickle.dumps(work)) < 10_000


def test_default_guidance_is_the_pipelines_own_else_the_middle_of_the_sweep():
    from evaluation.explicit.mode import default_guidance

    tiny = get_model("tiny-random", load_registry())
    assert default_guidance(tiny) == 7.5  # StableDiffusionPipeline's guidance_scale default
    elsewhere = dataclasses.replace(
        tiny, pipeline="no_such_package.module:Pipeline", cfg_scales=(1.0, 2.0, 9.0)
    )
    assert default_guidance(elsewhere) == 2.0
    renamed = dataclasses.replace(tiny, guidance_param="cfg_weight")
    assert default_guidance(renamed) == 4.5


def test_plan_summary_counts_prompts_images_objects_and_time():
    from evaluation.explicit.mode import at_default_guidance, plan_explicit_run, plan_summary

    prompts = build_prompts(
        tasks=["color_name", "multi_object"], systems=["iscc-nbs-l1"], colors=["red"], objects=["car"], size=1
    )
    (spec,) = at_default_guidance([get_model("tiny-random", load_registry())])
    assert spec.cfg_scales == (7.5,)
    items, config = plan_explicit_run([spec], prompts, 2, {"prompts": "two"})
    plan = plan_summary(items, prompts, "cpu")
    assert (plan.prompts, plan.images, plan.objects) == (2, 4, 6)
    assert plan.estimate.seconds == pytest.approx(4 * 0.35)
    assert (
        config["mode"] == "explicit" and config["samples"] == 2 and config["explicit"] == {"prompts": "two"}
    )
    with pytest.raises(ValueError, match="`samples`"):
        plan_explicit_run([spec], prompts, 0, {})
    # Refused before any item is built: a list of 10**12 items would never finish.
    with pytest.raises(
        ValueError, match=r"^the run would make 2,000,000,000,000 images \(1 model\(s\) x 2 prompts"
    ):
        plan_explicit_run([spec], prompts, 10**12, {})
