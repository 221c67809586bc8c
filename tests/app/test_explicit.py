"""The Explicit colors tab through gradio_client on a launched app, over a small explicit run
built by the library: synthetic renders with exact masks (no model), scored by the score stage."""

import dataclasses
import hashlib
import html
import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gradio_client.exceptions import AppError
from numpy.testing import assert_array_equal
from PIL import Image

from evaluation.color.synthetic import render
from evaluation.color.systems import load_system
from evaluation.explicit import mode
from evaluation.explicit.mode import ExplicitWork, create_explicit_run, score_explicit
from evaluation.explicit.prompts import build_prompts
from evaluation.explicit.views import browser_view, stacked_systems
from evaluation.models.registry import get_model, load_registry
from evaluation.models.segmentation import Segmentation
from evaluation.pipeline import runs
from evaluation.pipeline.stages import png_bytes, save_by_hash
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.evaluation.explicit.test_masking import BoxSam
from tests.research_data import assert_every_endpoint_refuses, figure, sign_in

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
COLORS = ("red", "blue", "yellow", "green")
#: "wrong" renders every prompt of its model in the color two places on in COLORS (far apart).
SHIFTED = {c: COLORS[(i + 2) % len(COLORS)] for i, c in enumerate(COLORS)}
RUN = "syn"


def shown(update):
    """The value of an output the tab shows or hides (a Gradio update), None when hidden."""
    assert update["__type__"] == "update"
    return update["value"] if update["visible"] else None


def build_run(
    db_path: Path,
    data_dir: Path,
    run: str = RUN,
    *,
    tasks=("color_name", "numeric"),
    systems=("iscc-nbs-l2",),
    judged: int | None = None,
) -> None:
    """An explicit run of two models over the prompts of `tasks` in `systems` (by default 8 L2
    prompts: color_name, numeric), one image each: ``right`` renders the first target color,
    ``wrong`` the color `SHIFTED` names; masks are exact. With `judged`, the score stage stops
    after that many images (in its order: model, then item), as a cancelled job does."""
    db = runs.connect(db_path)
    prompts = build_prompts(
        tasks=list(tasks), systems=list(systems), colors=list(COLORS), objects=["car"], size=1
    )
    tiny = dataclasses.replace(get_model("tiny-random", load_registry()), cfg_scales=(2.0,))
    specs = [dataclasses.replace(tiny, key=key) for key in ("right", "wrong")]
    create_explicit_run(db, run, specs, prompts, samples=1, settings={"note": "synthetic"})
    masks = {}
    for item in runs.items(db, run):
        prompt = next(p for p in prompts if p.id == item["concept"])
        target, system = prompt.targets[0], load_system(prompt.system)
        shown = target if item["model"] == "right" else SHIFTED[target]
        image, mask = render(system.rgb[system.index(shown)], "sphere", size=96, seed=item["id"])
        path, digest = save_by_hash(data_dir, Path(f"runs/{run}/images"), png_bytes(image), ".png")
        runs.record_items(
            db, [{"id": item["id"], "status": "generated", "image_path": path, "image_sha256": digest}]
        )
        masks[digest] = mask

    def exact_mask(image, noun, negatives, box_threshold, text_threshold, *, detector, sam):
        mask = masks[hashlib.sha256(png_bytes(image)).hexdigest()]
        return Segmentation(status="ok", mask=mask, box=(0.0, 0.0, 96.0, 96.0), score=0.9)

    stored = {row["prompt_id"]: row for row in runs.explicit_prompts(db, run)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mode, "segment_object", exact_mask)
        work = ExplicitWork(None, BoxSam(), data_dir, stored)
        executor = None if judged is None else FirstBatches(judged)
        scored = score_explicit(db, run, work, batch_size=1, executor=executor)
        assert scored == (2 * len(prompts) if judged is None else judged)
    db.close()


class FirstBatches:
    """An executor that runs the first `n` batches in this process, then stops."""

    def __init__(self, n: int):
        self.n = n

    def run(self, work, batches, on_result) -> None:
        for batch in itertools.islice(batches, self.n):
            on_result(work(batch))


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    config = make_config(tmp_path_factory.mktemp("explicit-app"))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    build_run(config.db_path, config.data_dir)
    db = runs.connect(config.db_path)  # and a run with nothing generated yet
    prompts = build_prompts(
        tasks=["color_name"], systems=["css3"], colors=["aquamarine"], objects=["car"], size=1
    )
    create_explicit_run(
        db, "empty", [get_model("tiny-random", load_registry())], prompts, samples=1, settings={}
    )
    db.close()
    with running_app(config) as (client, _):
        yield client, config, sign_in(client, ADMIN_PASSWORD, "researcher", "designer")


def test_show_gives_table4_coverage_figures_and_the_confusion(app):
    client, _, tokens = app
    out = client.predict(tokens["researcher"], RUN, "paper", "", api_name="/explicit_show")
    note, groups, bias_model, prompt = out[0], out[6], out[7]["value"], out[11]["value"]
    table4, coverage, category, basic, modifier, bias, confusion, pairs = map(shown, out[1:6] + out[8:11])
    assert note.startswith("Run **syn**, paper rules: 16 scored images in iscc-nbs-l2")
    # One block of rows per system, the mean over systems first, each average beside its model.
    assert table4["headers"] == ["color system", "model", "average", "color_name", "numeric"]
    assert table4["data"] == [
        [system, model, *[value] * 3]
        for system in ("all systems", "iscc-nbs-l2")
        for model, value in (("right", 100.0), ("wrong", 0.0))
    ]
    assert coverage["headers"] == ["model", "images", "scored", "not_scored", "correct"]
    assert coverage["data"] == [["right", 8, 8, 0, 8], ["wrong", 8, 8, 0, 0]]
    bars = figure(category)
    assert [trace.name for trace in bars.data] == ["right", "wrong"]
    assert [list(trace.y) for trace in bars.data] == [[100.0], [0.0]]
    assert figure(basic).data[0].x == ("basic",)  # red, blue, yellow, green are all basic
    assert modifier is None and groups == "Light / dark / ish needs color_name prompts in ISCC-NBS L3."
    assert bias_model == "right" and figure(bias).data[0].x == ("vehicles",)
    heat = figure(confusion)
    labels = ("blue (strong blue, blue)", "green (brilliant green, green)", "red (strong red, red)")
    assert heat.data[0].y == heat.data[0].x == (*labels, "yellow (strong yellow, yellow)")
    assert heat.data[0].z.tolist() == [[2, 2, 0, 0], [2, 2, 0, 0], [0, 0, 2, 2], [0, 0, 2, 2]]
    assert pairs["headers"] == ["asked for", "got", "objects"]
    # each asked color is got right twice by `right` (two tasks), and by `wrong` as SHIFTED says
    asked = {(row[0].split(" (")[0], row[1].split(" (")[0]): row[2] for row in pairs["data"]}
    assert asked == {**{(c, c): 2 for c in COLORS}, **{(c, SHIFTED[c]): 2 for c in COLORS}}
    assert prompt == "color_name/iscc-nbs-l2/blue/car"
    labels = {value: label for label, value in out[11]["choices"]}
    assert len(labels) == 8 and labels[prompt].endswith(" · color_name · iscc-nbs-l2 — 1/2 correct")
    assert "blue car" in labels[prompt]


def test_table4_is_shown_one_system_under_another_with_the_average_beside_the_model():
    columns = pd.MultiIndex.from_tuples(
        [
            ("iscc-nbs-l2", "color_name"),
            ("iscc-nbs-l2", "numeric"),
            ("iscc-nbs-l2", "average"),
            ("css3", "color_name"),
            ("css3", "average"),
            ("all systems", "color_name"),
            ("all systems", "numeric"),
            ("all systems", "average"),
        ],
        names=["system", "task"],
    )
    table = pd.DataFrame(
        [[100.0, 50.0, 75.0, 2 / 3 * 100, 2 / 3 * 100, 83.33, 50.0, 70.83], [0.0] * 8],
        index=pd.Index(["right", "wrong"], name="model"),
        columns=columns,
    )
    shown = stacked_systems(table)
    assert shown.columns.tolist() == ["color system", "model", "average", "color_name", "numeric"]
    expected = [
        ["all systems", "right", 70.83, 83.33, 50.0],
        ["all systems", "wrong", 0.0, 0.0, 0.0],
        ["iscc-nbs-l2", "right", 75.0, 100.0, 50.0],
        ["iscc-nbs-l2", "wrong", 0.0, 0.0, 0.0],
        ["css3", "right", 66.67, 66.67, np.nan],
        ["css3", "wrong", 0.0, 0.0, np.nan],
    ]
    pd.testing.assert_frame_equal(shown, pd.DataFrame(expected, columns=shown.columns))


def test_bias_of_another_model_and_the_prompt_browser(app):
    client, config, tokens = app
    token = tokens["researcher"]
    bias = figure(shown(client.predict(token, RUN, "paper", "wrong", api_name="/explicit_bias")))
    shares = {trace.text[0]: trace.y[0] for trace in bias.data}
    assert shares == pytest.approx(dict.fromkeys(COLORS, 25.0))
    note, gallery, swatches, metrics = client.predict(
        token, RUN, "paper", "color_name/iscc-nbs-l2/red/car", api_name="/explicit_prompt"
    )
    gallery, metrics = shown(gallery), shown(metrics)
    assert note.startswith("**") and "color_name · level" in note and "targets: red" in note
    assert [item["caption"] for item in gallery] == [
        "#1 right · sample 0 · car: correct",
        "#2 wrong · sample 0 · car: wrong",
    ]
    db = runs.connect(config.db_path)
    try:
        view = browser_view(db, config.data_dir, RUN, "color_name/iscc-nbs-l2/red/car")
    finally:
        db.close()
    for item, (overlay, _) in zip(gallery, view.overlays, strict=True):  # lossless: the outline as drawn
        assert_array_equal(np.asarray(Image.open(item["image"]).convert("RGB")), overlay)
    assert metrics["headers"][3:7] == ["object", "target", "dominant", "dominant name"]
    right, wrong = metrics["data"]
    assert right[5:7] == ["#b62740", "strong red, red"]
    assert right[-1] is True and wrong[-1] is False and right[4] == wrong[4] == "red"
    assert "target: red" in swatches and "#b92842" in swatches and "strong red, red" in swatches
    assert swatches.count("class='explicit-swatch dominant'") == 2


def test_export_writes_csv_and_html_under_exports(app):
    client, config, tokens = app
    files = client.predict(tokens["researcher"], RUN, "paper", "", api_name="/explicit_export")
    names = sorted(Path(f).name.rsplit("-", 1)[0] + Path(f).suffix for f in files)
    assert "syn-paper-table4.csv" in names and "syn-paper-table4.html" in names
    assert "syn-paper-confusion.html" in names and "syn-paper-bias-right.html" in names
    # The rows Table 4 is computed from, to recompute it (outsider 75 found them only in the
    # admin's `annotation export`): its cells are the images' share correct per system and task.
    images = pd.read_csv(next(f for f in files if Path(f).name.startswith("syn-paper-images-")))
    objects = pd.read_csv(next(f for f in files if Path(f).name.startswith("syn-paper-objects-")))
    assert len(objects) == images["objects"].sum() and set(objects["scoring"]) == {"paper"}
    # Their first column is a field the docs name, not pandas' row numbers (outsider 104).
    assert images.columns[0] == "run" and not any(c.startswith("Unnamed") for c in [*images, *objects])
    share = images.groupby(["model", "system", "task"])["correct"].mean().mul(100.0)
    table4 = next(f for f in files if Path(f).name.startswith("syn-paper-table4-") and f.endswith(".csv"))
    shown = pd.read_csv(table4, header=[0, 1], index_col=0)
    assert len(share) == 4
    for (model, system, task), value in share.items():
        assert shown.loc[model, (system, task)] == pytest.approx(value, abs=0.01)
    written = list((config.data_dir / "exports" / "explicit").iterdir())
    table4 = next(p for p in written if p.name.startswith("syn-paper-table4-") and p.suffix == ".csv")
    # Each row says its unit, rules and run (the file alone did not: outsider 116).
    assert table4.read_text().splitlines()[:2] == [
        "system,iscc-nbs-l2,iscc-nbs-l2,iscc-nbs-l2,all systems,all systems,all systems,unit,rules,run",
        "task,color_name,numeric,average,color_name,numeric,average,,,",
    ]
    assert {
        tuple(row[-3:]) for row in pd.read_csv(table4, header=[0, 1], index_col=0).itertuples(index=False)
    } == {("% of generated images", "paper", RUN)}
    # Each page says it in its caption, and no table carries pandas' row numbers (outside probe 131).
    pages = [p.read_text() for p in written if p.suffix == ".html"]
    bare = [page for page in pages if page.startswith("<table")]
    assert len(bare) >= 4 and all(
        page.startswith('<table border="1" class="dataframe">\n  <caption>') for page in bare
    )
    assert "<caption>% of generated images · rules paper · run syn</caption>" in next(
        p.read_text() for p in written if p.name.startswith("syn-paper-table4-") and p.suffix == ".html"
    )
    bias = next(p for p in written if p.name.startswith("syn-paper-bias-") and p.suffix == ".csv")
    assert bias.read_text().startswith("model,category,rank,color,share,unit,rules,run")
    assert set(pd.read_csv(bias)["unit"]) == {"fraction (0-1) of the model's scored objects of the category"}
    # The same export again is the same files: each figure page was a new 4.6 MB file (outsider 116).
    again = client.predict(tokens["researcher"], RUN, "paper", "", api_name="/explicit_export")
    assert sorted(again) == sorted(files) and len(list(table4.parent.iterdir())) == len(written)


def test_the_accuracy_note_quotes_the_docs_section_it_names():
    """Every figure of the note on how far the scores hold is one the docs' section gives
    (outside probe 131 found the note's left behind a change of the section's)."""
    from app.explicit import TRUST

    docs = (Path(__file__).resolve().parents[2] / "docs" / "explicit.md").read_text(encoding="utf-8")
    start = docs.index("**Independent renders**")
    section = docs[start : docs.index("\n\n", start)]
    assert "“Independent renders”" in TRUST
    figures = re.findall(r"\d+\.\d+", TRUST)
    assert len(figures) == 3
    assert [f for f in figures if f"{f} %" not in section] == []


def test_bad_input_names_the_field(app):
    client, _, tokens = app
    token = tokens["researcher"]
    with pytest.raises(AppError, match="Pick an explicit-color run \\('empty', 'syn'\\); got 'nope'"):
        client.predict(token, "nope", "paper", "", api_name="/explicit_show")
    # A number where the page sends text ended in an AttributeError (outsider 116).
    with pytest.raises(AppError, match="Pick an explicit-color run \\('empty', 'syn'\\); got '5'"):
        client.predict(token, 5, "paper", "", api_name="/explicit_show")
    with pytest.raises(AppError, match="`confusion system` must be one with scored images"):
        client.predict(token, RUN, "paper", "css3", api_name="/explicit_show")
    with pytest.raises(AppError, match="`prompt` must be a prompt id of run 'syn'"):
        client.predict(token, RUN, "paper", "no/such", api_name="/explicit_prompt")
    with pytest.raises(AppError, match="`model` must be one with scored objects"):
        client.predict(token, RUN, "paper", "ghost", api_name="/explicit_bias")


def test_a_run_with_nothing_scored_shows_notes_not_empty_tables(app):
    client, _, tokens = app
    token = tokens["researcher"]
    out = client.predict(token, "empty", "paper", "", api_name="/explicit_show")
    # First what the run lacks (no job of it has run in this server: stopped), then the note.
    standing, note = html.unescape(out[0]).split("  \n", 1)
    assert standing == (
        "⚠️ Run 'empty' is not complete (stopped): 0 of 7 images judged (tiny-random 0 of 7); no image "
        "of task color_name or system css3 is judged yet. The tables cover the judged images alone "
        "(the others are left out, not counted as wrong): resume the run on the Evaluate tab to judge the rest."
    )
    assert note.startswith("Run **empty** has no scored image yet under the paper rules: the tables fill")
    # The coverage alone shows: its model, with all its images not judged yet.
    coverage = shown(out[2])
    assert coverage["data"] == [["tiny-random", 0, 0, 0, 0, 7]] and coverage["headers"][-1] == "not_judged"
    assert [shown(update) for update in [out[1], *out[3:6], *out[8:11]]] == [None] * 7
    assert out[11]["value"] == "color_name/css3/aquamarine/car"
    assert out[11]["choices"][0][0].endswith(" · color_name · css3 — not judged yet")
    with pytest.raises(AppError, match="run 'empty' has no scored image yet: nothing to export"):
        client.predict(token, "empty", "paper", "", api_name="/explicit_export")
    note, gallery, swatches, metrics = client.predict(
        token, "empty", "paper", "color_name/css3/aquamarine/car", api_name="/explicit_prompt"
    )
    assert note.endswith("No image of this prompt is judged yet: it fills as the run's job scores it.")
    assert "targets: aquamarine" in note and shown(gallery) is None and shown(metrics) is None
    assert swatches == ""


@pytest.fixture(scope="module")
def partial_app(tmp_path_factory):
    """The app over run `RUN` stopped after its first 4 images were judged (``right``'s
    color_name images): 12 of its 16 images generated and not judged."""
    config = make_config(tmp_path_factory.mktemp("explicit-partial-app"))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    build_run(config.db_path, config.data_dir, judged=4)
    with running_app(config) as (client, _):
        yield client, sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]


def test_show_of_a_partly_judged_run_says_it_is_not_complete_and_what_is_judged(partial_app):
    """Outside probe 231: a cancelled run's Table 4 showed one model and one task, with no word
    that the run was unfinished or that most of its images were not judged."""
    client, token = partial_app
    out = client.predict(token, RUN, "paper", "", api_name="/explicit_show")
    standing, note = html.unescape(out[0]).split("  \n", 1)
    assert standing == (
        "⚠️ Run 'syn' is not complete (stopped): 4 of 16 images judged (right 4 of 8, wrong 0 of 8); "
        "no image of task numeric is judged yet. The tables cover the judged images alone (the others "
        "are left out, not counted as wrong): resume the run on the Evaluate tab to judge the rest."
    )
    assert note.startswith("Run **syn**, paper rules: 4 scored images in iscc-nbs-l2")
    table4, coverage = shown(out[1]), shown(out[2])
    assert table4["data"] == [["all systems", "right", 100.0, 100.0], ["iscc-nbs-l2", "right", 100.0, 100.0]]
    # The model with nothing judged yet is counted, not left out.
    assert coverage["headers"] == ["model", "images", "scored", "not_scored", "correct", "not_judged"]
    assert coverage["data"] == [["right", 4, 4, 0, 4, 4], ["wrong", 0, 0, 0, 0, 8]]
    files = client.predict(token, RUN, "paper", "", api_name="/explicit_export")
    assert files and all(Path(f).name.rsplit("-", 1)[0].endswith("-unfinished") for f in files)


def test_other_roles_are_refused_and_nothing_is_written(app):
    client, config, tokens = app
    calls = {
        "/explicit_show": [RUN, "paper", ""],
        "/explicit_bias": [RUN, "paper", "right"],
        "/explicit_export": [RUN, "paper", ""],
        "/explicit_prompt": [RUN, "paper", "color_name/iscc-nbs-l2/red/car"],
        "/explicit_robustness": [RUN],
    }
    assert_every_endpoint_refuses(
        client, config, "/explicit_", calls, {"designer": tokens["designer"], "nobody": ""}
    )


def test_the_research_tabs_results_are_read_out(tmp_path):
    """The line each action of the Explicit colors and Leaderboards tabs writes is a polite
    live region (outsider 75: after *Show* a screen reader heard nothing of Table 4)."""
    from app import build_app
    from app.common import LIVE
    from tests.app_server import make_config

    demo = build_app(make_config(tmp_path))
    live = {
        c["props"].get("elem_id")
        for c in demo.config["components"]
        if LIVE in (c["props"].get("elem_classes") or [])
    }
    assert {
        "explicit_note",
        "explicit_prompt_note",
        "explicit_robust_note",
        "leaderboard_note",
        "leaderboard_robust_note",
        "leaderboard_stability_note",
        "evaluate_plan",  # made live by the twenty-sixth session
        # What the Admin, Sketches and Expert tabs say of an action (outsider 83: closing or
        # reopening an account was not read out).
        "admin_new_link_message",
        "admin_review_message",
        "admin_revoke_message",
        "admin_pilot_message",
        "sketches_message",
        "sketches_generated",
        "expert_grid_message",
        "expert_ranking_message",
        "expert_admin_message",
        "crowd_make_note",  # a made study link (outsider 84)
        "crowd_links_note",
    } <= live
