"""Tiny CLIP and tiny image-text-to-text judges, built offline, through the whole audit and
the ``judge-audit`` command."""

import numpy as np
import pandas as pd
import pytest

from evaluation.__main__ import main
from evaluation.judges.accuracy import PAIR_COLUMNS, run_audit, summary
from evaluation.judges.judges import ContrastiveJudge, YesNoJudge, parse_judge
from evaluation.judges.probes import synthetic_items
from evaluation.judges.report import write_audit
from evaluation.models.tiny import build_tiny_clip, build_tiny_vlm, one_cpu_thread


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("judges")
    with one_cpu_thread():
        return {"clip": build_tiny_clip(root / "clip"), "vlm": build_tiny_vlm(root / "vlm")}


@pytest.fixture(scope="module")
def items():
    return synthetic_items(3, rng=np.random.default_rng(0), size=32, two_objects=0.5)


def test_tiny_models_load_through_the_auto_classes(tiny):
    from transformers import AutoModel, AutoModelForImageTextToText, AutoProcessor

    assert type(AutoModel.from_pretrained(tiny["clip"])).__name__ == "CLIPModel"
    assert (
        type(AutoModelForImageTextToText.from_pretrained(tiny["vlm"])).__name__
        == "LlavaForConditionalGeneration"
    )
    tokenizer = AutoProcessor.from_pretrained(tiny["vlm"]).tokenizer
    assert tokenizer.unk_token_id not in tokenizer.encode("yes no red sphere", add_special_tokens=False)


def test_a_tiny_clip_runs_through_the_audit(tiny, items):
    with one_cpu_thread():
        judge = ContrastiveJudge.from_pretrained(str(tiny["clip"]), name="tiny-clip")
        pairs = run_audit(judge, items)
        again = run_audit(judge, items)
    assert list(pairs.columns) == list(PAIR_COLUMNS)
    assert len(pairs) == sum(len(i.foils) for i in items)
    assert (pairs["judge"] == "tiny-clip").all() and judge.chance == 0.5
    assert (pairs["pair_correct"] == (pairs["match_score"] > pairs["foil_score"])).all()
    pd.testing.assert_frame_equal(pairs, again)


def test_model_judges_take_the_dtype_they_are_given(tiny, items):
    import torch

    with one_cpu_thread():
        clip = ContrastiveJudge.from_pretrained(str(tiny["clip"]), dtype=torch.bfloat16)
        vlm = YesNoJudge.from_pretrained(str(tiny["vlm"]), dtype=torch.bfloat16)
        for judge in (clip, vlm):
            assert judge.model.dtype == torch.bfloat16 and judge.name.endswith(("clip", "vlm"))
            verdicts = judge(items[0], [items[0].description, items[0].foils[0].text])
            assert verdicts.scores.dtype == np.float64 and np.isfinite(verdicts.scores).all()


def test_a_tiny_image_text_to_text_model_runs_through_the_audit(tiny, items):
    with one_cpu_thread():
        judge = YesNoJudge.from_pretrained(str(tiny["vlm"]), name="tiny-vlm")
        pairs = run_audit(judge, items[:2])
    assert len(pairs) == sum(len(i.foils) for i in items[:2]) and judge.chance == 0.25
    assert (pairs["match_accepted"] == (pairs["match_score"] > 0)).all()
    assert (pairs["foil_rejected"] == (pairs["foil_score"] <= 0)).all()
    table = summary(pairs, {"tiny-vlm": judge.chance})
    assert table.loc[table["split"] == "all", "pairs"].item() == len(pairs)
    with pytest.raises(ValueError, match="`prompt` must contain"):
        YesNoJudge(judge.model, judge.processor, name="x", prompt="Is it?")


def test_write_audit_writes_csv_and_html(tmp_path, items):
    from evaluation.judges.judges import PixelJudge

    pairs = run_audit(PixelJudge(), items)
    paths = write_audit(pairs, tmp_path / "out", chance={"pixel": 0.25})
    assert [p.name for p in paths] == ["pairs.csv", "summary.csv", "failures-pixel.csv", "report.html"]
    failures = pd.read_csv(paths[2], index_col="true_term")
    assert failures.shape == (11, 11)
    page = paths[3].read_text(encoding="utf-8")
    assert page.count("<table") == 1 and "plotly" in page


def test_judge_audit_command_runs_the_tiny_models(tiny, tmp_path, capsys):
    out = tmp_path / "audit"
    argv = ["judge-audit", "--items", "2", "--size", "32", "--device", "cpu", "--out", str(out)]
    judges = ["pixel", "random", f"contrastive:{tiny['clip']}", f"yesno:{tiny['vlm']}"]
    with one_cpu_thread():
        assert main([*argv, *(x for j in judges for x in ("--judge", j))]) == 0
    assert "wrote pairs.csv" in capsys.readouterr().out
    table = pd.read_csv(out / "summary.csv")
    assert list(table["judge"].unique()) == judges
    assert table.set_index(["judge", "split"]).loc[("pixel", "all"), "pairwise_accuracy"] == 1.0
    assert len(list(out.glob("failures-*.csv"))) == 4 and (out / "report.html").is_file()


@pytest.mark.parametrize(
    ("spec", "message"),
    [("clip", "must start with one of"), ("contrastive", "take :MODEL"), ("pixel:x", "take :MODEL")],
)
def test_bad_judge_specs_are_one_line_errors(spec, message, tmp_path, capsys):
    assert main(["judge-audit", "--judge", spec, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert parse_judge("contrastive:openai/clip-vit-base-patch32") == (
        "contrastive",
        "openai/clip-vit-base-patch32",
    )


def test_audit_checks_every_spec_before_loading_and_reports_each_judge(tmp_path, items):
    from evaluation.judges.report import audit

    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="`specs` is empty"):
        audit([], items, tmp_path / "a", rng=rng)
    with pytest.raises(ValueError, match="`items` is empty"):
        audit(["pixel"], [], tmp_path / "a", rng=rng)
    with pytest.raises(ValueError, match="judge 'clip:x' must start with one of"):
        audit(["pixel", "clip:x"], items, tmp_path / "a", rng=rng)
    assert not (tmp_path / "a").exists()
    report = audit(["pixel", "random"], items, tmp_path / "b", rng=rng)
    assert list(report.matrices) == ["pixel", "random"] and list(report.summary["judge"].unique()) == [
        "pixel",
        "random",
    ]
    assert [p.name for p in report.paths][-1] == "report.html" and all(p.is_file() for p in report.paths)
