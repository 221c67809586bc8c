"""What the tables of an explicit run say when the run is not complete: its state, and how
many of its images are judged per model (outside probe 231 saw a cancelled run's Table 4
drop a model and a task without a word)."""

import pandas as pd
import pytest

from evaluation.explicit.standing import RunStanding
from evaluation.explicit.tables import coverage_table
from evaluation.explicit.views import explicit_report, export_report, run_standing
from evaluation.pipeline import runs
from evaluation.pipeline.jobs import JobState
from tests.app.test_explicit import build_run

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
RUN = "part"
#: What `run_standing` says of the run `partly_judged` builds, after its state.
JUDGED = (
    "4 of 16 images judged (right 4 of 8, wrong 0 of 8); no image of task numeric is judged yet. "
    "The tables cover the judged images alone (the others are left out, not counted as wrong): "
)
RESUME = "resume the run on the Evaluate tab to judge the rest."
CLI = "(python -m evaluation explicit --run part)"


@pytest.fixture(scope="module")
def partly_judged(tmp_path_factory):
    """A run of two models (``right``, ``wrong``) over 8 prompts (color_name, numeric), all 16
    images generated and the first 4 judged (``right``'s color_name images): a stopped job."""
    folder = tmp_path_factory.mktemp("unfinished")
    build_run(folder / "db.sqlite", folder / "data", RUN, judged=4)
    db = runs.connect(folder / "db.sqlite")
    yield db
    db.close()


FILLS = "they fill as its job judges the rest."


@pytest.mark.parametrize(
    ("job", "state", "said", "rest"),
    [
        (None, "stopped", "stopped", RESUME),  # no job manager: the command line
        (JobState("idle"), "stopped", "stopped", RESUME),  # none has run since the server started
        (JobState("cancelled", message="resume to continue"), "cancelled", "cancelled", RESUME),
        (JobState("failed", message="RuntimeError: boom"), "failed", "failed: RuntimeError: boom", RESUME),
        (JobState("finished"), "finished", "its job finished", RESUME),
        (JobState("cancelling", "segment"), "cancelling", "cancelling", RESUME),
        (JobState("running", "segment"), "running", "running", FILLS),
        (JobState("queued"), "queued", "queued", FILLS),
    ],
)
def test_a_partly_judged_run_names_its_state_and_the_images_judged_per_model(
    partly_judged, job, state, said, rest
):
    standing = run_standing(partly_judged, RUN, job=job)
    assert standing == RunStanding(
        RUN,
        state,
        images={"right": 8, "wrong": 8},
        judged={"right": 4, "wrong": 0},
        unjudged={"task": ("numeric",), "system": ()},
        message="RuntimeError: boom" if state == "failed" else "",
    )
    assert not standing.complete
    assert standing.note() == f"Run 'part' is not complete ({said}): {JUDGED}{rest}"


def test_a_run_another_process_judges_reads_as_running_there(partly_judged):
    runs.claim_job(partly_judged, RUN, "another-host:1")
    try:
        standing = run_standing(partly_judged, RUN, job=JobState("idle"))
    finally:
        runs.release_job(partly_judged, RUN, "another-host:1")
    assert standing.state == "running in another process (another-host:1)"
    assert standing.note().endswith(f"{JUDGED}{FILLS}")
    assert run_standing(partly_judged, RUN).state == "stopped"  # released: no job holds it


def test_the_report_of_a_partly_judged_run_counts_every_model_and_the_images_not_judged(partly_judged):
    report = explicit_report(partly_judged, RUN, job=JobState("cancelled", message="resume to continue"))
    assert not report.complete and report.standing.state == "cancelled"
    # The model with nothing judged is in the coverage, and so are the images not judged yet.
    expected = pd.DataFrame(
        {"images": [4, 0], "scored": [4, 0], "not_scored": [0, 0], "correct": [4, 0], "not_judged": [4, 8]},
        index=pd.Index(["right", "wrong"], name="model"),
    )
    pd.testing.assert_frame_equal(report.tables["coverage"], expected)
    # Table 4 itself covers the judged images alone, as the note says.
    cells = [
        (system, task) for system in ("iscc-nbs-l2", "all systems") for task in ("color_name", "average")
    ]
    assert report.tables["table4"].to_dict("index") == {"right": dict.fromkeys(cells, 100.0)}


def test_the_export_of_a_partly_judged_run_does_not_look_complete(partly_judged, tmp_path):
    report = explicit_report(partly_judged, RUN)
    note = f"Run 'part' is not complete (stopped): {JUDGED}{RESUME}"
    paths = export_report(report, tmp_path)
    assert paths and all(p.name.rsplit("-", 1)[0].endswith("-unfinished") for p in paths)
    table4 = next(p for p in paths if p.name.startswith("part-paper-table4-") and p.suffix == ".csv")
    shown = pd.read_csv(table4, header=[0, 1], index_col=0)
    assert set(shown["note"].iloc[:, 0]) == {note}
    coverage = next(p for p in paths if p.name.startswith("part-paper-coverage-") and p.suffix == ".csv")
    assert pd.read_csv(coverage).to_dict("list") == {
        "model": ["right", "wrong"],
        "images": [4, 0],
        "scored": [4, 0],
        "not_scored": [0, 0],
        "correct": [4, 0],
        "not_judged": [4, 8],
        "unit": ["images"] * 2,
        "rules": ["paper"] * 2,
        "run": [RUN] * 2,
        "note": [note] * 2,
    }
    escaped = note.replace("'", "&#x27;")
    pages = [p.read_text(encoding="utf-8") for p in paths if p.suffix == ".html"]
    assert all(escaped in page for page in pages)  # each table's caption, each figure's page


def test_a_complete_run_says_nothing_more_and_its_tables_are_as_before(tmp_path):
    build_run(tmp_path / "db.sqlite", tmp_path / "data", "whole")
    db = runs.connect(tmp_path / "db.sqlite")
    try:
        # A job state left from before (a cancel that raced the end) does not make it unfinished.
        report = explicit_report(db, "whole", job=JobState("cancelled", message="resume to continue"))
    finally:
        db.close()
    assert report.complete and report.standing.state == "complete" and report.standing.note() == ""
    pd.testing.assert_frame_equal(report.tables["coverage"], coverage_table(report.images))
    paths = export_report(report, tmp_path / "exports")
    assert not any("unfinished" in p.name for p in paths)
    table4 = next(p for p in paths if p.name.startswith("whole-paper-table4-") and p.suffix == ".csv")
    assert table4.read_text().splitlines()[0].endswith(",unit,rules,run")


def test_the_command_line_prints_and_writes_what_the_tables_of_an_unfinished_run_cover(
    tmp_path, monkeypatch, capsys
):
    from evaluation.__main__ import main
    from evaluation.cli import explicit as command
    from evaluation.pipeline import jobs

    build_run(tmp_path / "db.sqlite", tmp_path / "data", RUN, judged=4)
    monkeypatch.setattr(command, "_score", lambda *args, **kwargs: 0)  # its score stage stops at once
    monkeypatch.setattr(jobs, "check_weights", lambda *args, **kwargs: None)  # no model is loaded
    table = tmp_path / "table.csv"
    places = [
        "--db",
        str(tmp_path / "db.sqlite"),
        "--data-dir",
        str(tmp_path / "data"),
        "--table",
        str(table),
    ]
    assert main(["explicit", "--run", RUN, "--segmenter", "tiny-random", "--device", "cpu", *places]) == 0
    note = f"Run 'part' is not complete (stopped): {JUDGED}{RESUME.replace('on the Evaluate tab', CLI)}"
    printed = capsys.readouterr().out.splitlines()
    assert printed[:7] == [
        "0 new image(s) judged; 4 in run 'part'",
        note,
        "images scored (the others failed the presence check or masking: they count as wrong):",
        "       images  scored  not_scored  correct  not_judged",
        "model                                                 ",
        "right       4       4           0        4           4",
        "wrong       0       0           0        0           8",
    ]
    assert pd.read_csv(table).to_dict("list") == {
        "model": ["right"],
        "color_name": [100.0],
        "average": [100.0],
        "unit": ["% of generated images"],
        "rules": ["paper"],
        "run": [RUN],
        "note": [note],
    }


def test_the_rule_set_comparison_of_an_unfinished_run_says_what_it_covers(partly_judged, tmp_path):
    """The robustness panel read as the whole run's (outside probe 231)."""
    from evaluation.explicit.views import rule_set_robustness

    report, text = rule_set_robustness(partly_judged, RUN, job=JobState("cancelled", message="resume"))
    assert text.startswith(f"Run 'part' is not complete (cancelled): {JUDGED}{RESUME}\n\n")
    assert not report.empty
    _, cli = rule_set_robustness(partly_judged, RUN, resume=CLI)
    assert cli.startswith(
        f"Run 'part' is not complete (stopped): {JUDGED}resume the run {CLI} to judge the rest."
    )
    build_run(tmp_path / "db.sqlite", tmp_path / "data", "whole")
    db = runs.connect(tmp_path / "db.sqlite")
    try:
        _, whole = rule_set_robustness(db, "whole")
    finally:
        db.close()
    assert "not complete" not in whole
