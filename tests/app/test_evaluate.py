"""The Evaluate tab through gradio_client on a launched app, with the tiny models on the CPU."""

import dataclasses
import re
import time
import zipfile

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError
from PIL import Image

from evaluation.analysis.reference import load_reference_csv
from evaluation.analysis.results import analyses
from evaluation.concepts import load_concepts
from evaluation.pipeline import removal, runs
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.research_data import (  # noqa: F401
    assert_every_endpoint_refuses,
    install_tiny,
    sign_in,
    solid,
    tiny_models,
    torch_one_thread,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.usefixtures("torch_one_thread"),
]
TINY = ["tiny-random", 0, 0]  # segmenter preset, box and text thresholds (random weights: keep every box)
POLLS = 300
SQL_FIRST_MASK = (
    "select mask_path from run_items where run = 'tiny-two' and mask_path is not null order by id limit 1"
)


def _selection(keys=("apple", "banana"), cfg="7.5", seeds=1):
    return [["tiny-random"], list(keys), [], [], "", 0, 0, ["natural"], cfg, seeds]


def _wait(client, token, run):
    """Poll the progress endpoint (as the page's timer does) until `run`'s job ends."""
    for _ in range(POLLS):
        html = client.predict(token, api_name="/evaluate_progress")
        row = re.search(rf"<tr><td>{re.escape(run)}</td>.*?</tr>", html).group(0)
        state = re.search(r"data-state='([^']*)'", row).group(1)
        if state not in ("queued", "running", "cancelling"):
            return state, row
        time.sleep(1.0)
    raise AssertionError(f"run {run!r} still {state} after {POLLS} polls")


def _table1_cell(html, model):
    row = re.search(rf"<tr><td>{re.escape(model)}</td>(.*?)</tr>", html).group(1)
    return [float(v) for v in re.findall(r"<td>(?:<[bu]>)?(-?[\d.]+|nan)", row)]


def test_an_evaluation_of_the_tiny_model_runs_in_the_background_to_the_leaderboard(tmp_path, tiny_models):  # noqa: F811
    config = make_config(tmp_path)
    install_tiny(tiny_models, config.data_dir)
    with running_app(config) as (client, _):
        tokens = sign_in(client, ADMIN_PASSWORD, "researcher", "researcher")
        researcher = tokens["researcher"]
        plan = client.predict(researcher, *_selection(), api_name="/evaluate_preview")
        assert plan.startswith(
            "**2 images** (1 model × 2 concepts × 1 style × 1 guidance scale (7.5) × 1 seed)"
        )
        # "7,5" is two scales (commas separate them): the plan says which.
        two = client.predict(researcher, *_selection(cfg="7,5"), api_name="/evaluate_preview")
        assert two.startswith(
            "**4 images** (1 model × 2 concepts × 1 style × 2 guidance scales (5, 7) × 1 seed)"
        )
        # Typed as README writes them, in one entry of the box (it was one unknown concept).
        typed = client.predict(researcher, *_selection(keys=["apple, banana"]), api_name="/evaluate_preview")
        assert typed == plan
        message, picker = client.predict(
            researcher, "tiny-two", *_selection(), *TINY, api_name="/evaluate_start"
        )
        assert message == "Run **tiny-two**: 2 images, job queued." and picker["value"] == "tiny-two"
        # Resume pressed while the job runs, with another threshold: it recorded that masking as
        # the run's, then said "already running"; the job went on masking with its own (probe
        # 151). The test holds the database's write lock so that the job cannot end meanwhile.
        held = open_db(config.db_path)
        try:
            held.execute("BEGIN IMMEDIATE")
            html = client.predict(researcher, api_name="/evaluate_progress")
            assert re.search(r"<tr><td>tiny-two</td>.*?data-state='(queued|running)'", html)
            with pytest.raises(AppError, match=r"^run 'tiny-two' is already (queued|running) on this server"):
                client.predict(researcher, "tiny-two", "tiny-random", 0.5, 0, api_name="/evaluate_resume")
        finally:
            held.execute("ROLLBACK")
            held.close()
        state, row = _wait(client, researcher, "tiny-two")
        assert state == "complete"
        assert "2/2 images, 2 masked" in row and "2/2 distributions" in row and "value='1.0000'" in row
        board = client.predict(
            researcher, "uw71-ratings", "recommended", "ratio_of_means", api_name="/leaderboard_show"
        )
        with pytest.raises(AppError, match="run 'tiny-two' exists already; resume it"):
            client.predict(researcher, "tiny-two", *_selection(), *TINY, api_name="/evaluate_start")
        # Another process on this database (a second app server, the CLI) runs a job on it: an
        # outside tester's second app showed such a run as stopped and resumed it a second time.
        db = open_db(config.db_path)
        try:
            runs.claim_job(db, "tiny-two", "elsewhere:4242")
            html = client.predict(researcher, api_name="/evaluate_progress")
            assert "data-state='running in another process (elsewhere:4242)'" in html
            with pytest.raises(
                AppError,
                match=r"run 'tiny-two' has a job running in another process \(elsewhere:4242, last heard",
            ):
                client.predict(researcher, "tiny-two", *TINY, api_name="/evaluate_resume")
            with pytest.raises(  # its Cancel said the run "is idle" (outsider 73)
                AppError,
                match=r"run 'tiny-two' runs in another process \(elsewhere:4242\), not in this app: stop it there",
            ):
                client.predict(researcher, "tiny-two", api_name="/evaluate_cancel")
            runs.release_job(db, "tiny-two", "elsewhere:4242")
        finally:
            db.close()
        # Complete, every file in place: nothing to resume (outside probe 194: a job was queued).
        with pytest.raises(
            AppError,
            match=r"^run 'tiny-two' is complete, every file in its place: nothing to resume, and nothing changed$",
        ):
            client.predict(researcher, "tiny-two", *TINY, api_name="/evaluate_resume")
        # A mask the data folder lost is work: the resume makes it again.
        db = open_db(config.db_path)
        try:
            [mask] = [r["mask_path"] for r in db.query(SQL_FIRST_MASK)]
        finally:
            db.close()
        (config.data_dir / mask).unlink()
        # Masked: resuming with another threshold is refused, naming the run's own masking.
        with pytest.raises(
            AppError,
            match=r"run 'tiny-two' is masked with box_threshold=0.0, preset=tiny-random, "
            r"text_threshold=0.0; the masking given now differs in \['box_threshold'\]",
        ):
            client.predict(researcher, "tiny-two", "tiny-random", 0.5, 0, api_name="/evaluate_resume")
        said, html = client.predict(researcher, "tiny-two", *TINY, api_name="/evaluate_resume")  # its own
        # The Runs table comes with the answer: a resumed run's row said "cancelled" until the
        # next refresh (outside probe 173).
        assert said == "Run **tiny-two**: job queued."
        assert re.search(r"<tr><td>tiny-two</td>.*?data-state='(queued|running|complete)'", html)
        assert _wait(client, researcher, "tiny-two")[0] == "complete"
        assert (config.data_dir / mask).is_file()
    db = open_db(config.db_path)
    try:
        stored = runs.model_distributions(db, run="tiny-two")
        audit = [(r["action"], r["object_id"]) for r in db["audit"].rows_where("action = 'start_evaluation'")]
        resumes = [r["object_id"] for r in db["audit"].rows_where("action = 'resume_evaluation'")]
    finally:
        db.close()
    assert [(r["model"], r["concept"], r["cfg"]) for r in stored] == [
        ("tiny-random", "apple", 7.5),
        ("tiny-random", "banana", 7.5),
    ]
    assert audit == [("start_evaluation", "tiny-two")]
    assert resumes == ["tiny-two"]  # the last resume; the refused one left no trace
    expected = analyses(stored, load_reference_csv(), load_concepts())
    shown = _table1_cell(board[1], "tiny-random")
    want = expected.table1.values.loc["tiny-random"].to_numpy()
    assert shown == pytest.approx([round(v, 3) for v in want], abs=1e-3)
    assert "Guidance scale per model: tiny-random at 7.5." in board[0]


def test_importing_a_folder_with_a_corrupt_image_scores_the_rest_and_names_it(tmp_path, tiny_models):  # noqa: F811
    config = make_config(tmp_path)
    install_tiny(tiny_models, config.data_dir)
    folder = config.data_dir / "imports" / "batch"
    folder.mkdir(parents=True)
    Image.fromarray(solid((200, 30, 30), 64)).save(folder / "ext-model__apple__natural__5__1.png")
    Image.fromarray(solid((230, 210, 40), 64)).save(folder / "ext-model__banana__natural__5__2.png")
    (folder / "ext-model__banana__natural__5__3.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    with running_app(config) as (client, _):
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        report, rejected, picker, _ = client.predict(
            researcher, "ext", None, "batch", *TINY, api_name="/evaluate_import"
        )
        assert report == "Run **ext**: 2 images imported, 1 left out; masking and scoring queued."
        assert [row[0] for row in rejected["data"]] == ["ext-model__banana__natural__5__3.png"]
        assert rejected["data"][0][1].startswith("the file is ")  # not an image, or corrupt: its words
        state, row = _wait(client, researcher, "ext")
        assert state == "complete" and "imported" in row and "2/2 distributions" in row
        board = client.predict(
            researcher, "uw71-ratings", "5", "ratio_of_means", api_name="/leaderboard_show"
        )
        assert "<td>ext-model</td>" in board[1]
        for folder_name in ("../../..", "/etc"):
            with pytest.raises(AppError, match="is outside the allowed import folders"):
                client.predict(researcher, "evil", None, folder_name, *TINY, api_name="/evaluate_import")
        archive = tmp_path / "evil.zip"
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr(
                "../ext-model__apple__natural__5__9.png",
                (folder / "ext-model__apple__natural__5__1.png").read_bytes(),
            )
        with pytest.raises(
            AppError, match="zip entry '../ext-model__apple__natural__5__9.png' would leave the archive"
        ):
            client.predict(
                researcher, "evil", handle_file(str(archive)), "", *TINY, api_name="/evaluate_import"
            )
        with pytest.raises(
            AppError, match=r"run 'ext' has no queued or running job to cancel \(its job finished\)"
        ):
            client.predict(researcher, "ext", api_name="/evaluate_cancel")
        with pytest.raises(AppError, match=r"^no run named 'nonexistent'; known runs, newest first: ext"):
            client.predict(researcher, "nonexistent", api_name="/evaluate_cancel")
        # Delete run: the first press says what the run holds, the second deletes it, rows and
        # files (a run started by mistake could not be taken back: outside probe 234).
        said, _, _ = client.predict(researcher, "ext", api_name="/evaluate_delete")
        assert re.fullmatch(
            r"Run \*\*ext\*\* holds 2 items, 2 distributions, \d+ score rows and 6 files \([\d.]+ kB\)\. "
            r"Click \*Delete run\* again to delete it for good \(the audit trail keeps who did\)\.",
            said,
        ), said
        assert (config.data_dir / "runs" / "ext").is_dir()
        said, html, picker = client.predict(researcher, "ext", api_name="/evaluate_delete")
        assert re.fullmatch(
            r"Run \*\*ext\*\* deleted: 2 items, 2 distributions, \d+ score rows; 6 files \([\d.]+ kB\) deleted\.",
            said,
        ), said
        assert html == "<p>No runs yet.</p>" and picker["value"] is None
        assert not (config.data_dir / "runs" / "ext").exists()
        assert (folder / "ext-model__apple__natural__5__1.png").is_file()  # what was imported from stays
        with pytest.raises(AppError, match=r"^no run named 'ext'; known runs, newest first: none$"):
            client.predict(researcher, "ext", api_name="/evaluate_delete")
        with pytest.raises(
            AppError, match="^There is no stored model distribution yet"
        ):  # its scores went too
            client.predict(researcher, "uw71-ratings", "5", "ratio_of_means", api_name="/leaderboard_show")
        # A run of the name made again elsewhere (the command line) is not the deleted one: not
        # started by its importer, and a second press meant for another "ext" deletes nothing
        # (outside probe 237: it deleted the run made in between, never described).
        cell = {
            "model": "m",
            "concept": "apple",
            "noun": "apple",
            "style": "natural",
            "cfg": 5.0,
            "sample": 0,
        }
        db = open_db(config.db_path)
        try:
            runs.create_run(db, "ext", [{**cell, "seed": 1, "prompt": "p"}], {"made": "elsewhere"})
            html = client.predict(researcher, api_name="/evaluate_progress")
            assert re.search(r"<tr><td>ext</td><td>generated</td><td>command line</td>", html), html
            said, _, _ = client.predict(researcher, "ext", api_name="/evaluate_delete")
            assert said.startswith("Run **ext** holds 1 item and 0 files")
            removal.delete_run(db, "ext", config.data_dir)
            runs.create_run(
                db,
                "ext",
                [{**cell, "seed": 2, "prompt": "p"}, {**cell, "sample": 1, "seed": 3, "prompt": "p"}],
                {"made": "again"},
            )
            said, _, _ = client.predict(researcher, "ext", api_name="/evaluate_delete")
            assert said.startswith(
                "Run **ext** was deleted and made again since the last press: it now holds 2 items and 0 files"
            )
            assert runs.run_row_counts(db, "ext")["run_items"] == 2
            said, _, _ = client.predict(researcher, "ext", api_name="/evaluate_delete")
            assert said.startswith("Run **ext** deleted: 2 items; 0 files")
        finally:
            db.close()
    db = open_db(config.db_path)
    try:
        assert not any(runs.run_row_counts(db, "ext").values())
        [deleted, *_] = db["audit"].rows_where("action = 'delete_evaluation_run'")
    finally:
        db.close()
    assert deleted["object_id"] == "ext" and '"run_items": 2' in deleted["details"]


def test_resume_and_import_with_nothing_chosen_say_so_before_the_missing_weights(tmp_path):
    # With no run chosen (or nothing to import) the answer was that GroundingDINO and SAM are
    # not on this machine: true, and not what the click lacked (outside probe 181).
    config = make_config(tmp_path)
    paper = ["paper", 0.35, 0.25]  # weights not on this machine
    with running_app(config) as (client, _):
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        with pytest.raises(AppError, match=r"^no run named ''; known runs, newest first: none$"):
            client.predict(researcher, "", *paper, api_name="/evaluate_resume")
        with pytest.raises(AppError, match=r"^`…or folder under imports/` is empty: name a folder"):
            client.predict(researcher, "", None, "", *paper, api_name="/evaluate_import")
        # Something to do, and no weights: that is said (the check itself is unchanged).
        (config.data_dir / "imports" / "batch").mkdir(parents=True)
        with pytest.raises(AppError, match=r"GroundingDINO .* not on this machine"):
            client.predict(researcher, "", None, "batch", *paper, api_name="/evaluate_import")


def test_evaluate_endpoints_refuse_other_roles_and_write_nothing(tmp_path):
    config = make_config(tmp_path)
    (config.data_dir / "imports" / "batch").mkdir(parents=True)
    Image.fromarray(solid((200, 30, 30))).save(
        config.data_dir / "imports" / "batch" / "m__apple__natural__5__1.png"
    )
    with running_app(config) as (client, _):
        tokens = sign_in(client, ADMIN_PASSWORD, "designer", "expert", "participant")
        calls = {
            "/evaluate_preview": _selection(),
            "/evaluate_start": ["r", *_selection(), *TINY],
            "/evaluate_progress": [],
            "/evaluate_cancel": ["r"],
            "/evaluate_resume": ["r", *TINY],
            "/evaluate_import": ["r", None, "batch", *TINY],
            "/evaluate_cluster": ["ray", ""],
            "/evaluate_delete": ["r"],
        }
        others = {who: tokens[who] for who in ("designer", "expert", "participant")}
        assert_every_endpoint_refuses(
            client, config, "/evaluate_", calls, {**others, "nobody": "", "forged": "f" * 43}
        )


#: The explicit mode's fields: mode, tasks, systems, subset, images per prompt, prompt seed,
#: guidance scales, colors, objects, presence threshold (random weights: every object present).
EXPLICIT = ["explicit", ["color_name"], ["iscc-nbs-l1"], "1", 1, 0, "", "red, blue", ["car", "apple"], 0]


def test_an_explicit_run_of_the_tiny_model_is_planned_started_and_scored(tmp_path, tiny_models):  # noqa: F811
    config = make_config(tmp_path)
    install_tiny(tiny_models, config.data_dir)
    with running_app(config) as (client, _):
        researcher = sign_in(client, ADMIN_PASSWORD, "researcher")["researcher"]
        plan = client.predict(researcher, *_selection(), *EXPLICIT, api_name="/evaluate_preview")
        assert re.match(
            r"\*\*2 images\*\* \(1 model × 2 prompts × 1 guidance scale \([\d.]+\) × 1 image per prompt\), "
            r"2 objects to mask and score, about \*\*",
            plan,
        ), plan
        with pytest.raises(
            AppError,
            match=r"^The run was not started: for a tiny test model, choose the tiny-random masking \(Masking on the Evaluate tab, or `--segmenter tiny-random` on the command line\)\. "
            r"Missing: GroundingDINO",
        ):
            client.predict(
                researcher,
                "x-paper",
                *_selection(),
                "paper",
                0,
                0,
                "in-process",
                "",
                *EXPLICIT,
                api_name="/evaluate_start",
            )
        with pytest.raises(AppError, match="`Images per prompt` must be a whole number, got 1.5"):
            bad = [*EXPLICIT[:4], 1.5, *EXPLICIT[5:]]
            client.predict(researcher, *_selection(), *bad, api_name="/evaluate_preview")
        # The library's field, given its label, still reads as a sentence (outside probe 182).
        with pytest.raises(
            AppError, match=r"^`Only these colors`: 'purpel' is in none of the systems \['iscc-nbs-l1'\]"
        ):
            bad = [*EXPLICIT[:7], "purpel", *EXPLICIT[8:]]
            client.predict(researcher, *_selection(), *bad, api_name="/evaluate_preview")
        message, picker = client.predict(
            researcher,
            "x-tiny",
            *_selection(),
            *TINY,
            "in-process",
            "",
            *EXPLICIT,
            api_name="/evaluate_start",
        )
        assert message == "Run **x-tiny**: 2 images, job queued." and picker["value"] == "x-tiny"
        state, row = _wait(client, researcher, "x-tiny")
        assert state == "complete"
        assert "2/2 images, 2 judged (2 masked), 0 failed" in row
        started_by = re.search(r"<td>explicit</td><td>([^<]*)</td>", row).group(1)
        assert "value='1.0000'" in row
        shown = client.predict(researcher, "x-tiny", "paper", "", api_name="/explicit_show")
        assert shown[0].startswith("Run **x-tiny**, paper rules: 2 scored images in iscc-nbs-l1")
        # A run whose every image failed says so, with the reason, on both tabs (it read as
        # still filling in).
        db = open_db(config.db_path)
        try:
            # Who started a run (outsider 73 could not tell): the researcher's pseudonym, from
            # the audit row of the start; a run made outside the app says "command line".
            audited = db.execute(
                "SELECT actor FROM audit WHERE action = 'start_evaluation' AND object_id = 'x-tiny'"
            ).fetchall()
            assert audited == [(started_by,)] and started_by != "command line"
            keys = ("model", "concept", "noun", "style", "cfg", "sample", "seed", "prompt")
            planned = [{k: r[k] for k in keys} for r in runs.items(db, "x-tiny")]
            runs.create_run(db, "x-failed", planned, runs.run_config(db, "x-tiny"))
            failed = [
                {"id": r["id"], "status": "failed", "error": "<b>NaN</b> pixels"}
                for r in runs.items(db, "x-failed")
            ]
            runs.record_items(db, failed)
        finally:
            db.close()
        row = re.search(
            r"<tr><td>x-failed</td>.*?</tr>", client.predict(researcher, api_name="/evaluate_progress")
        )
        assert "<td>explicit</td><td>command line</td>" in row.group(0)
        assert (
            "0/2 images, 0 judged (0 masked), 2 failed<br><small>failed: 2 × &lt;b&gt;NaN&lt;/b&gt; pixels</small>"
            in row.group(0)
        )
        note = client.predict(researcher, "x-failed", "paper", "", api_name="/explicit_show")[0]
        assert note.startswith("Run **x-failed** has no scored image: all 2 of its images failed (2 × ")
        assert "<b>" not in note and note.endswith(
            "resume the run on the Evaluate tab: failed images are tried again."
        )
    db = open_db(config.db_path)
    try:
        prompts = [(p["task"], p["system"], p["targets"]) for p in runs.explicit_prompts(db, "x-tiny")]
        audit = [r["object_id"] for r in db["audit"].rows_where("action = 'start_evaluation'")]
        stored = [r["name"] for r in runs.list_runs(db)]
    finally:
        db.close()
    assert prompts == [("color_name", "iscc-nbs-l1", ["blue"]), ("color_name", "iscc-nbs-l1", ["red"])]
    assert audit == ["x-tiny"] and stored == ["x-failed", "x-tiny"]


def test_an_explicit_plan_uses_the_typical_measured_time_and_suggests_a_quick_try_out(db, tmp_path):
    """A try-out whose first image took 7.8 s (the model warming up) does not make every image
    of the compact subset cost 7.8 s; a plan with every color and object says how to narrow it."""
    from app import evaluate
    from evaluation.models.registry import load_registry
    from evaluation.pipeline.planning import CPU_SECONDS_PER_OBJECT, DeviceInfo

    items = [
        {"model": "tiny-random", "concept": "apple", "noun": "apple", "style": "natural", "cfg": 7.5}
        | {"sample": i, "seed": i, "prompt": "an apple"}
        for i in range(3)
    ]
    runs.create_run(db, "try", items, {"test": "try"})
    runs.record_items(
        db,
        [
            {"id": item["id"], "status": "generated", "gen_seconds": s, "seg_seconds": 0.0}
            for item, s in zip(runs.items(db, "try"), (7.8, 0.4, 0.5))
        ],
    )
    device = DeviceInfo("cpu", "CPU")
    everything = evaluate.RunForm(
        models=["tiny-random"],
        x_tasks=["color_name"],
        x_systems=["iscc-nbs-l1"],
        x_size="compact",
        x_samples=1,
        x_seed=0,
        x_cfg="",
        x_colors="",
        x_objects=[],
        x_presence=0.3,
    )
    plan = evaluate._explicit_plan(db, load_registry(), device, everything)
    lines = plan.split("\n")
    # "try" is a concept run (no explicit prompts): its figure, one masking included, stands
    # for generation; scoring takes the device's default per object.
    assert re.fullmatch(
        r"- tiny-random: [\d,]+ images × 0\.45 s to generate \(measured here in concept runs, one "
        r"masking included: median per image, without loading the model or a run's first image\)",
        lines[1],
    )
    assert re.fullmatch(
        r"- scoring: [\d,]+ objects × " + re.escape(f"{CPU_SECONDS_PER_OBJECT:.2g}") + r" s \(default for "
        r"this device, see docs/explicit\.md\)",
        lines[2],
    )
    assert evaluate.QUICK_TRY in plan
    narrowed = dataclasses.replace(everything, x_colors="red", x_objects=["car"])
    plan = evaluate._explicit_plan(db, load_registry(), device, narrowed)
    assert plan.startswith("**1 images**") and evaluate.QUICK_TRY not in plan
    assert "Rounds are limited" not in plan
    three_rounds = dataclasses.replace(narrowed, x_size="3", x_objects=["car", "apple"])
    plan = evaluate._explicit_plan(db, load_registry(), device, three_rounds)
    assert plan.startswith("**2 images**")  # one color x two objects, not three rounds
    assert (
        "Rounds are limited by the 2 objects chosen: each color gets at most 2 prompts per task, not 3."
        in plan
    )


@pytest.mark.parametrize(
    "job, shown",
    [
        (("cancelled", "", "resume to continue"), "complete"),  # a Cancel that raced a Resume
        (("finished", "", ""), "complete"),
        (("failed", "", "RuntimeError: boom"), "failed — RuntimeError: boom"),
    ],
)
def test_a_run_with_every_item_done_reads_complete_whatever_ended_its_job(job, shown):
    """Outside probe 92: a Cancel racing a Resume of a finished run left it reading
    "cancelled — resume to continue" at 100 %."""
    from app.evaluate import _progress_html
    from evaluation.pipeline.jobs import JobState

    done = runs.RunProgress("r", items=2, generated=2, segmented=2, usable=2, failed=0, groups=2, extracted=2)
    html = _progress_html([({"name": "r", "kind": "eval"}, done, JobState(*job), {}, False, None, "R0001")])
    assert f"<td data-state='{shown.split(' — ')[0]}'>{shown}</td>" in html


def test_a_colors_box_of_commas_alone_is_refused_not_read_as_all():
    """Outsider 104: "," queued every color of the systems; the command line refuses it."""
    from app import evaluate

    assert evaluate._named_colors("") == evaluate._named_colors("  ") == ()
    assert evaluate._named_colors(" red , navy ,") == ("red", "navy")
    with pytest.raises(ValueError, match=r"^`colors` must name at least one color; none is chosen"):
        evaluate._named_colors(" , ,")


def test_the_runs_poll_leaves_what_cancel_and_resume_said():
    """The Runs table's poll shares the note under the Run row with *Cancel* and *Resume*:
    a poll that succeeded cleared their answer within `POLL_SECONDS` (outside probe 220 read
    no answer to either); it leaves the note to them."""
    from app.evaluate import EVENTS

    [poll] = [on for on in EVENTS if on.trigger == "timer.tick"]
    actions = [on for on in EVENTS if on.method in ("cancel", "resume")]
    assert len(actions) == 2 and {on.note for on in actions} == {poll.note} == {"progress_note"}
    assert not poll.clear_note
