"""The judge audit: pair-wise accuracy on hand-made decisions, the pixel checker and a
random judge on synthetic renders, splits, the failure matrix and its heatmap."""

import math

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from evaluation.analysis.figures import judge_failure_heatmap
from evaluation.color.naming import BASIC_TERMS
from evaluation.color.systems import load_system
from evaluation.judges.accuracy import (
    PAIR_COLUMNS,
    SUMMARY_COLUMNS,
    accuracy,
    failure_matrix,
    pairwise_accuracy,
    run_audit,
    summary,
)
from evaluation.judges.foils import foils
from evaluation.judges.judges import PixelJudge, RandomJudge, Verdicts
from evaluation.judges.probes import (
    PROTOTYPES,
    ProbeItem,
    Region,
    item_from_regions,
    items_from_manifest,
    synthetic_items,
)


def _pairs(match_accepted, foil_rejected, **columns):
    n = len(match_accepted)
    frame = {
        "judge": ["j"] * n,
        "kind": ["replacement"] * n,
        "true_term": ["red"] * n,
        "foil_term": ["blue"] * n,
        "relation": ["other"] * n,
        "match_accepted": match_accepted,
        "foil_rejected": foil_rejected,
    } | columns
    frame["pair_correct"] = [a and r for a, r in zip(frame["match_accepted"], frame["foil_rejected"])]
    return pd.DataFrame(frame)


def test_pairwise_accuracy_separates_judges_that_plain_accuracy_cannot():
    # The paper's Figure 4: both judges accept three matches and reject three foils of four
    # pairs; A spreads its right answers over the pairs, B keeps them together.
    judge_a = _pairs([True, True, True, False], [False, True, True, True])
    judge_b = _pairs([True, True, True, False], [True, True, True, False])
    assert accuracy(judge_a) == accuracy(judge_b) == 0.75
    assert pairwise_accuracy(judge_a) == 0.5 and pairwise_accuracy(judge_b) == 0.75
    assert math.isnan(pairwise_accuracy(judge_a.iloc[:0])) and math.isnan(accuracy(judge_a.iloc[:0]))


class TableJudge:
    """Answers from a hand-made table: text -> accepted (a yes/no judge) or score."""

    name = "table"
    chance = 0.25

    def __init__(self, table, *, scores=False):
        self.table, self.scores = table, scores

    def __call__(self, item, texts):
        values = np.array([self.table.get(t, 0 if self.scores else False) for t in texts])
        if self.scores:
            return Verdicts(values.astype(float), None)
        return Verdicts(values.astype(float), values.astype(bool))


def _item(item_id, description):
    image = np.zeros((4, 4, 3), dtype=np.uint8)
    region = Region(description.split()[-1], description.split()[1], np.ones((4, 4), dtype=bool))
    return ProbeItem(item_id, image, (region,), description, tuple(foils(description)), "hand")


def test_run_audit_scores_a_hand_made_decision_table():
    items = [_item("car", "a red car"), _item("cup", "a blue cup")]
    # The car: match accepted, every foil rejected but "an orange car" (adjacent to red).
    # The cup: match rejected, every foil rejected but "a green cup".
    judge = TableJudge({"a red car": True, "an orange car": True, "a green cup": True})
    pairs = run_audit(judge, items)
    assert list(pairs.columns) == list(PAIR_COLUMNS) and len(pairs) == 20
    assert pairs["pair_correct"].sum() == 9
    assert pairwise_accuracy(pairs) == 9 / 20
    assert accuracy(pairs) == (10 + 9 + 0 + 9) / 40
    wrong = pairs[pairs["item_id"] == "car"].set_index("foil_term")
    assert wrong.loc["orange", ["foil", "relation", "pair_correct"]].tolist() == [
        "an orange car",
        "adjacent",
        False,
    ]
    table = summary(pairs, {"table": 0.25})
    assert list(table.columns) == list(SUMMARY_COLUMNS)
    rows = table.set_index("split")
    assert list(rows.index) == ["all", "replacement", "adjacent", "complementary", "other"]
    assert rows.loc["all", "pairs"] == 20 and rows.loc["all", "chance"] == 0.25
    # Adjacent to red: orange, pink, brown; to blue: green, purple. Only the car's are right.
    assert rows.loc["adjacent", "pairs"] == 5 and rows.loc["adjacent", "pairwise_accuracy"] == 2 / 5
    matrix = failure_matrix(pairs)
    assert list(matrix.index) == list(matrix.columns) == list(BASIC_TERMS)
    assert matrix.loc["red", "orange"] == 1.0 and matrix.loc["red", "white"] == 0.0
    assert (matrix.loc["blue"].dropna() == 1.0).all() and matrix.loc["blue"].notna().sum() == 10
    assert matrix.loc["green"].isna().all() and np.isnan(np.diag(matrix.to_numpy())).all()


def test_a_contrastive_judge_is_right_when_the_match_outscores_the_foil():
    judge = TableJudge({"a red car": 2.0, "an orange car": 3.0, "a pink car": 2.0}, scores=True)
    pairs = run_audit(judge, [_item("car", "a red car")]).set_index("foil_term")
    assert pairs["pair_correct"].sum() == 8  # orange outscores it; pink ties: both wrong
    assert pairs.loc["pink", ["match_accepted", "foil_rejected"]].tolist() == [False, False]
    assert pairs.loc["white", ["match_accepted", "foil_rejected", "match_score"]].tolist() == [
        True,
        True,
        2.0,
    ]


def test_the_pixel_checker_passes_the_synthetic_renders():
    items = synthetic_items(120, rng=np.random.default_rng(0))
    assert {len(i.regions) for i in items} == {1, 2}
    assert {r.term for i in items for r in i.regions} == set(BASIC_TERMS)
    pairs = run_audit(PixelJudge(), items)
    rows = summary(pairs).set_index("split")
    assert rows.loc["all", "pairwise_accuracy"] >= 0.95
    assert rows.loc["swap", "pairs"] > 20 and rows.loc["swap", "pairwise_accuracy"] >= 0.95
    assert pairs["match_accepted"].mean() >= 0.95


def test_a_random_judge_lands_near_chance():
    n_items = 600
    items = synthetic_items(n_items, rng=np.random.default_rng(1), size=32, two_objects=0.3)
    pairs = run_audit(RandomJudge(np.random.default_rng(2)), items)
    # The pairs of one item share its match decision, so count items, not pairs, as the
    # binomial's trials: a wider, conservative tolerance of four standard deviations.
    tolerance = 4 * math.sqrt(0.25 * 0.75 / n_items)
    assert abs(pairwise_accuracy(pairs) - 0.25) < tolerance
    assert abs(accuracy(pairs) - 0.5) < 4 * math.sqrt(0.25 / n_items)


def test_prototypes_are_named_by_their_term():
    from evaluation.color.naming import name_srgb

    system = load_system("iscc-nbs-l3")
    for term, names in PROTOTYPES.items():
        assert name_srgb(system.rgb[[system.index(n) for n in names]]).basic.tolist() == [term] * len(names)


def test_items_from_regions_read_true_colors_from_the_paint():
    image = np.zeros((8, 8, 3), dtype=np.uint8)
    image[:, :4] = (213, 28, 60)
    image[:, 4:] = (23, 52, 89)
    left = np.zeros((8, 8), dtype=bool)
    left[:, :4] = True
    item = item_from_regions("c1", image, [("apple", left), ("leaf", ~left)], source="coloring")
    assert item.description == "a red apple and a blue leaf"
    assert [r.term for r in item.regions] == ["red", "blue"] and len(item.foils) == 21
    assert run_audit(PixelJudge(), [item])["pair_correct"].all()
    with pytest.raises(ValueError, match="region 'apple' of item 'c2' is 50% .*below `min_share`"):
        item_from_regions("c2", image, [("apple", np.ones((8, 8), dtype=bool))], source="coloring")
    with pytest.raises(ValueError, match="`image` must be uint8"):
        item_from_regions("c3", image.astype(float), [("apple", left)], source="coloring")
    with pytest.raises(ValueError, match="mask of 'apple'"):
        item_from_regions("c4", image, [("apple", np.zeros((8, 8), dtype=bool))], source="coloring")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`n` must be a positive integer"):
        synthetic_items(0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="`two_objects`"):
        synthetic_items(1, rng=np.random.default_rng(0), two_objects=2)
    with pytest.raises(ValueError, match="`items` is empty"):
        run_audit(PixelJudge(), [])
    with pytest.raises(ValueError, match="`kind`"):
        failure_matrix(_pairs([True], [True]), kind="both")
    two = pd.concat([_pairs([True], [True]), _pairs([True], [True], judge=["k"])])
    with pytest.raises(ValueError, match="`pairs` must hold one judge"):
        failure_matrix(two)


def test_failure_heatmap_shows_the_matrix_and_marks_wheel_relations():
    pairs = run_audit(TableJudge({"a red car": True, "an orange car": True}), [_item("car", "a red car")])
    matrix = failure_matrix(pairs)
    fig = judge_failure_heatmap(matrix, title="table")
    heat = fig.data[0]
    assert_allclose(np.asarray(heat.z, float), matrix.to_numpy(), equal_nan=True)
    assert list(heat.x) == list(heat.y) == list(BASIC_TERMS)
    red, orange, blue, yellow = (BASIC_TERMS.index(t) for t in ("red", "orange", "blue", "yellow"))
    assert heat.text[red][orange] == "~" and heat.text[blue][yellow] == "⚡" and heat.text[red][blue] == ""
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    with pytest.raises(ValueError, match="`matrix` must be a square"):
        judge_failure_heatmap(matrix.iloc[:3])


def _manifest(tmp_path):
    from PIL import Image

    image = np.zeros((8, 8, 3), dtype=np.uint8)
    image[:, :4] = (213, 28, 60)
    image[:, 4:] = (23, 52, 89)
    left = np.zeros((8, 8), dtype=np.uint8)
    left[:, :4] = 255
    Image.fromarray(image).save(tmp_path / "c1.png")
    Image.fromarray(left).save(tmp_path / "c1-apple.png")
    Image.fromarray(255 - left).save(tmp_path / "c1-leaf.png")
    Image.fromarray(np.full((8, 8), 255, dtype=np.uint8)).save(tmp_path / "all.png")
    rows = [
        "item_id,image,mask,noun,source",
        "c1,c1.png,c1-apple.png,apple,coloring",
        "c1,c1.png,c1-leaf.png,maple leaf,coloring",
        "c2,c1.png,all.png,apple,coloring",
        "c3,missing.png,all.png,apple,coloring",
        "c4,c1.png,c1-apple.png,apple,coloring",
        "c4,c1.png,c1-leaf.png,apple,coloring",
    ]
    (tmp_path / "items.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return tmp_path / "items.csv"


def test_items_from_a_manifest_of_pngs(tmp_path):
    items, refused = items_from_manifest(_manifest(tmp_path))
    assert [i.item_id for i in items] == ["c1"] and items[0].source == "coloring"
    assert items[0].description == "a red apple and a blue maple leaf"
    assert run_audit(PixelJudge(), items)["pair_correct"].all()
    reasons = dict(refused)
    assert list(reasons) == ["c2", "c3", "c4"]
    assert "below `min_share`" in reasons["c2"] and "missing.png" in reasons["c3"]
    assert reasons["c4"] == "two regions share a noun"
    (tmp_path / "bad.csv").write_text("item_id,image\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must have columns item_id, image, mask, noun; lacks"):
        items_from_manifest(tmp_path / "bad.csv")


def test_judge_audit_command_probes_manifest_items_alone(tmp_path, capsys):
    from evaluation.__main__ import main

    argv = ["judge-audit", "--judge", "pixel", "--items", "0", "--out", str(tmp_path / "out")]
    assert main([*argv, "--items-from", str(_manifest(tmp_path))]) == 0
    printed = capsys.readouterr().out
    assert (
        "1 item(s) from" in printed
        and "3 refused" in printed
        and "refused c4: two regions share a noun" in printed
    )
    pairs = pd.read_csv(tmp_path / "out" / "pairs.csv")
    assert len(pairs) == 21 and set(pairs["item_id"]) == {"c1"} and pairs["pair_correct"].all()
    assert main(["judge-audit", "--judge", "pixel", "--items", "0", "--out", str(tmp_path / "x")]) == 2
    assert "--items must be at least 1" in capsys.readouterr().err


def test_a_judge_model_not_on_the_machine_is_named_before_anything_runs(tmp_path, capsys):
    """Offline, `from_pretrained` ended the audit in a traceback, after the judges before it."""
    from evaluation.__main__ import main

    out = tmp_path / "out"
    for model, message in (
        (  # it ended by pointing at the registry and the masking options, a run's, not a judge's
            "openai/no-such-clip",
            "judge model 'openai/no-such-clip' is not on this machine: download it on a machine with "
            "internet (`hf download openai/no-such-clip`, after accepting its licence on the hub and `hf auth "
            "login` if it is gated) and copy that Hugging Face cache into this server's (its `HF_HOME`, by "
            "default ~/.cache/huggingface), or give the path of a folder on this machine that holds the model "
            "(its config.json and weights)\n",
        ),
        (str(tmp_path / "noclip"), f"judge model '{tmp_path / 'noclip'}': no model in the folder"),
    ):
        argv = ["judge-audit", "--judge", "pixel", "--judge", f"contrastive:{model}", "--items", "2"]
        assert main([*argv, "--out", str(out), "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert not out.exists()


def _pixel_audit(folder, *extra: str, device: str = "cpu") -> list[str]:
    """``judge-audit`` of the pixel judge on two items into ``folder/out``, with `extra`."""
    return [
        "judge-audit",
        "--judge",
        "pixel",
        *extra,
        "--items",
        "2",
        "--out",
        str(folder / "out"),
        "--device",
        device,
    ]


@pytest.fixture(scope="module")
def tiny_judges(tmp_path_factory):
    from evaluation.models.tiny import build_tiny_clip, build_tiny_vlm

    root = tmp_path_factory.mktemp("judges")
    return {"clip": build_tiny_clip(root / "clip"), "vlm": build_tiny_vlm(root / "vlm")}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--size", "100000"], "--size must be 32 to 1024 pixels per shape, got 100000"),
        (["--size", "0"], "--size must be 32 to 1024 pixels per shape, got 0"),
        (["--two-objects", "1.5"], "--two-objects must lie in [0, 1], got 1.5"),
        (["--two-objects", "nan"], "--two-objects must lie in [0, 1], got nan"),
        (["--judge", "pixel"], "--judge 'pixel' is given twice: each judge once"),
        (
            ["--judge", "contrastive:{vlm}"],
            "--judge contrastive: the model '{vlm}' is a 'llava' model, not a CLIP-like",
        ),
        (
            ["--judge", "yesno:{clip}"],
            "--judge yesno: the model '{clip}' is a 'clip' model, not an image-text-to-text",
        ),
    ],
    ids=["size-huge", "size-zero", "two-objects", "two-objects-nan", "twice", "vlm-as-clip", "clip-as-vlm"],
)
def test_judge_audit_options_are_refused_naming_them_before_anything_is_rendered(
    tmp_path, capsys, tiny_judges, extra, message
):
    """An outside tester's --size 100000 ended in a 224 GiB allocation's traceback, a VLM as a
    contrastive judge in a processor's error, and a judge given twice counted its rows twice."""
    from evaluation.__main__ import main

    extra = [e.format(**{k: str(v) for k, v in tiny_judges.items()}) for e in extra]
    message = message.format(**{k: str(v) for k, v in tiny_judges.items()})
    assert main(_pixel_audit(tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "option, typed, said",
    [
        ("--size", "\u0661\u0662\u0668", "a whole number"),
        ("--items", "\u0662", "a whole number"),
        ("--two-objects", "\u0660.\u0665", "a number"),
    ],
)
def test_judge_audit_numbers_are_read_with_ascii_digits(tmp_path, capsys, option, typed, said):
    """``int`` and ``float`` read Arabic-Indic digits: ``--size ١٢٨`` was 128."""
    from evaluation.__main__ import main

    with pytest.raises(SystemExit) as stopped:
        main(_pixel_audit(tmp_path, option, typed))
    assert stopped.value.code == 2
    assert f"argument {option}: must be {said}, got {typed!r}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_device_this_machine_lacks_is_refused_before_any_model_loads(tmp_path, capsys):
    import torch

    from evaluation.__main__ import main

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert main(_pixel_audit(tmp_path, device="cuda")) == 2
    assert (
        "--device cuda: torch sees no CUDA device on this machine; use --device cpu or auto"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()
