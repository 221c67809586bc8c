"""The Coloring tab through gradio_client: onboarding, coloring, submitting, redoing, roles."""

import html
import json
import re
from pathlib import Path

import httpx
import numpy as np
import pytest
from gradio_client.exceptions import AppError
from numpy.testing import assert_allclose
from PIL import Image
from scipy import ndimage
from skimage.measure import label

from annotation.coloring.fill import (
    blank_color_layer,
    border_region,
    canvas_value,
    flood_fill,
    line_mask,
    parse_canvas_value,
)
from annotation.coloring.store import get_coloring, load_pixels
from annotation.coloring.tasks import layer_of_coloring
from annotation.people.onboarding import CONSENT_FILE, read_text
from annotation.qc.review import open_reviews
from annotation.sketches.library import get_sketch, load_sketch
from app import designer
from evaluation.color.colorspace import srgb_to_lab
from evaluation.color.palette import nearest_uw71
from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.qc_data import actor

VIEW = ("notice", "header", "previous", "canvas", "task", "message")
# Colors at 8x8x8 RGB bin centres, each far from a UW-71 boundary, in pairs per sketch.
PAIRS = [((208, 48, 48), (48, 112, 208)), ((240, 208, 48), (80, 144, 48)), ((112, 80, 48), (176, 176, 176))]
ENDPOINTS = (
    ("/designer_state", ()),
    ("/designer_consent", (True,)),
    ("/designer_instructions_read", ()),
    ("/designer_continue", ()),
    ("/designer_submit", ('{"task_id": "x:1:1", "color_layer": "", "elapsed_s": 0}',)),
    ("/designer_submissions", ()),
    ("/designer_redo", (1,)),
)
TABLES = ("consents", "tasks", "colorings", "coloring_distributions", "audit", "annotators")


class Study:
    """A running app with an admin session; helpers that act through the public API."""

    def __init__(self, client, config, demo=None):
        self.client, self.config, self.demo = client, config, demo
        self.admin = client.predict(ADMIN_PASSWORD, api_name="/login_admin")[0]

    def person(self, role: str = "designer") -> tuple[int, str]:
        row = self.client.predict(self.admin, role, 1, "yes", 7, api_name="/admin_create_invites")["data"][0]
        return row[0], self.client.predict(row[3], api_name="/login_invite")[0]

    def view(self, api: str, token: str, *args) -> dict:
        return dict(zip(VIEW, self.client.predict(token, *args, api_name=api)))

    def onboarded(self, token: str) -> dict:
        """Consent and instructions done: the first practice task's view."""
        self.view("/designer_consent", token, True)
        return self.view("/designer_instructions_read", token)

    def sketch(self, task: dict) -> np.ndarray:
        db = open_db(self.config.db_path)
        try:
            return load_sketch(self.config.data_dir, get_sketch(db, task["sketch_id"]))
        finally:
            db.close()

    def submit(self, token: str, view: dict, colors, elapsed: float = 42.5) -> tuple[dict, dict]:
        """Fill the largest regions of the view's sketch with `colors`; submit. The next
        view and the filled layer."""
        task = json.loads(view["task"])
        layer = paint(self.sketch(task), colors)
        return (self.view("/designer_submit", token, canvas_value(task["canvas_key"], layer, elapsed)), layer)

    def rows(self, table: str, where: str = "1", params=()) -> list[dict]:
        db = open_db(self.config.db_path)
        try:
            return list(db[table].rows_where(where, list(params), order_by="rowid"))
        finally:
            db.close()

    def coloring(self, coloring_id: int) -> dict:
        db = open_db(self.config.db_path)
        try:
            return get_coloring(db, coloring_id)
        finally:
            db.close()

    def counts(self) -> dict:
        return {t: len(self.rows(t)) for t in TABLES}


@pytest.fixture
def study(tmp_path):
    config = make_config(tmp_path, batch_size=3)
    with running_app(config) as (client, _):
        yield Study(client, config)


@pytest.fixture
def quick_study(tmp_path):
    """Practice approved automatically."""
    config = make_config(tmp_path, batch_size=3, auto_approve_practice=True)
    with running_app(config) as (client, demo):
        yield Study(client, config, demo)


def interior_points(sketch: np.ndarray, n: int) -> list[tuple[int, int]]:
    """The deepest point of each of the `n` largest regions between the lines, (x, y)."""
    regions = label(~line_mask(sketch), connectivity=1)
    sizes = np.bincount(regions.ravel())
    sizes[0] = 0
    points = []
    for region in np.argsort(-sizes)[:n]:
        depth = ndimage.distance_transform_edt(regions == region)
        y, x = np.unravel_index(np.argmax(depth), depth.shape)
        points.append((int(x), int(y)))
    return points


def paint(sketch: np.ndarray, colors) -> np.ndarray:
    """A color layer with one bucket fill per color, in the largest regions."""
    layer = blank_color_layer(sketch.shape)
    for point, rgb in zip(interior_points(sketch, len(colors)), colors):
        layer = flood_fill(layer, sketch, point, rgb)
    return layer


def finish_practice(study: Study, token: str, view: dict) -> dict:
    for _ in range(3):
        view, _ = study.submit(token, view, [(176, 176, 176)])
    return view


def two_colorings(study: Study) -> tuple[str, dict, dict]:
    """A new designer's session token and their first two main colorings' rows."""
    _, token = study.person()
    view = finish_practice(study, token, study.onboarded(token))
    for colors in PAIRS[:2]:
        view, _ = study.submit(token, view, colors)
    return token, *study.rows("colorings", "practice = 0")


def test_a_designer_onboards_and_three_colorings_put_their_mass_on_the_nearest_bins(study):
    designer_id, token = study.person()
    before = study.view("/designer_state", token)
    # An API client reads where the designer stands (the page shows the consent box).
    assert before["task"] == "" and before["message"] == designer.CONSENT_FIRST
    with pytest.raises(AppError, match="Tick the box to agree"):
        study.client.predict(token, False, api_name="/designer_consent")
    assert study.view("/designer_consent", token, True)["message"] == designer.READ_FIRST
    [consent] = study.rows("consents")
    assert (consent["annotator_id"], consent["agreed"], consent["form_sha256"]) == (
        designer_id,
        1,
        read_text(CONSENT_FILE)[1],
    )
    view = study.view("/designer_instructions_read", token)
    assert (json.loads(view["task"])["kind"], json.loads(view["task"])["concept"]) == ("practice", "banana")
    assert "Practice · 0 of 3 done" in view["header"]
    view = finish_practice(study, token, view)
    assert "your three practice drawings are in" in view["notice"] and view["task"] == ""
    assert study.view("/designer_continue", token)["task"] == ""

    study.client.predict(study.admin, designer_id, "approve", "fine", api_name="/admin_review_practice")
    view = study.view("/designer_continue", token)
    assert "Batch 1 · 0 of 3 done" in view["header"]
    expected = []
    for i, colors in enumerate(PAIRS):
        task = json.loads(view["task"])
        assert task["kind"] == "batch" and f"Batch 1 · {i} of 3 done" in view["header"]
        assert f'<h2 class="dz-concept" tabindex="-1">{task["concept"]}</h2>' in view["header"]  # a heading
        view, layer = study.submit(token, view, colors, elapsed=30.0 + i)
        assert view["message"].startswith(f"Saved your coloring of **{task['concept']}**")
        sketch = study.sketch(task)
        shares = [np.all(layer[~line_mask(sketch)][:, :3] == c, axis=1).sum() for c in colors]
        expected.append((task["concept"], colors, np.array(shares) / sum(shares)))
    assert "Batch 1 is done: you colored 3 of 3." in view["notice"]

    colorings = study.rows("colorings", "practice = 0")
    assert [c["concept_key"] for c in colorings] == [e[0] for e in expected]
    for coloring, (_, colors, shares), i in zip(colorings, expected, range(3)):
        p = study.coloring(coloring["id"])["p"]
        bins = nearest_uw71(srgb_to_lab(np.array(colors) / 255.0))
        assert set(np.flatnonzero(p)) == set(bins.tolist())
        assert_allclose(p[bins], shares, atol=0.03)
        assert coloring["seconds_spent"] == 30.0 + i


def test_a_designer_sent_back_to_the_practice_reads_why(study):
    """They were back at "Practice · 0 of 3 done" told nothing (outside probe 117). The reason
    is shown inert: its Markdown image loaded from another host (outside probe 120)."""
    designer_id, token = study.person()
    finish_practice(study, token, study.onboarded(token))
    why = "colour <b>inside</b> the lines ![p](http://127.0.0.1:9/p.png) [j](javascript:alert(8))"
    study.client.predict(study.admin, designer_id, "redo", why, api_name="/admin_review_practice")
    view = study.view("/designer_continue", token)
    assert "Practice · 0 of 3 done" in view["header"]
    assert view["message"] == (
        "The study organisers asked you to do the practice again: “colour &#60;b&#62;inside&#60;/b&#62; "
        "the lines &#33;&#91;p&#93;&#40;http&#58;//127.0.0.1&#58;9/p.png&#41; "
        "&#91;j&#93;&#40;javascript&#58;alert&#40;8&#41;&#41;”."
    )
    view, _ = study.submit(token, view, [(176, 176, 176)])
    assert view["message"].startswith("Saved your coloring")  # what the last action did comes first


def test_a_designer_whose_practice_was_withdrawn_reads_why_it_starts_again(study):
    """Withdrawn while their practice waited for approval, they were back at "Practice · 0 of
    3 done" with no word of why their drawings were gone (outside probe 221)."""
    designer_id, token = study.person()
    finish_practice(study, token, study.onboarded(token))
    study.client.predict(study.admin, designer_id, "asked in person", api_name="/admin_withdraw")
    view = study.view("/designer_continue", token)
    assert "Practice · 0 of 3 done" in view["header"]
    assert view["message"] == (
        "The study organisers withdrew your earlier colorings from the data set (as you asked), so the "
        "practice starts again."
    )


def test_a_blank_or_barely_colored_submission_is_refused_and_stores_nothing(study):
    _, token = study.person()
    view = study.onboarded(token)
    task = json.loads(view["task"])
    before = study.counts()
    with pytest.raises(
        AppError,
        match=r"Nothing is colored yet: fill at least 0\.5% of the "
        r"drawing \(about [\d,]+ pixels\)",
    ):
        study.client.predict(token, canvas_value(task["canvas_key"], None, 5.0), api_name="/designer_submit")
    few = blank_color_layer(study.sketch(task).shape)
    y, x = np.argwhere(~line_mask(study.sketch(task)))[0]
    few[y, x] = (208, 48, 48, 255)
    with pytest.raises(AppError, match=r"Only 1 pixels \(0\.00% of the drawing\) are colored"):
        study.client.predict(token, canvas_value(task["canvas_key"], few, 5.0), api_name="/designer_submit")
    assert study.counts() == before
    assert study.rows("tasks", "id = ?", [task["task_id"]])[0]["status"] == "reserved"


def test_a_designer_cannot_submit_a_task_that_is_not_theirs_or_a_forged_one(study):
    _, token = study.person()
    _, other = study.person()
    mine = json.loads(study.onboarded(token)["task"])
    theirs = json.loads(study.onboarded(other)["task"])
    layer = paint(study.sketch(mine), [(208, 48, 48)])
    instance, task_id, sketch_id = theirs["canvas_key"].split(":")
    before = study.counts()
    for key, message in (
        (theirs["canvas_key"], "handed to someone else"),
        (f"{instance}:99999:{sketch_id}", "unknown task id 99999"),
        (f"0123456789:{mine['task_id']}:{sketch_id}", "not a task of this study"),
        ("forged", "not a task of this study"),
    ):
        with pytest.raises(AppError, match=message):
            study.client.predict(token, canvas_value(key, layer, 1.0), api_name="/designer_submit")
    with pytest.raises(AppError, match="the canvas value must be JSON with task_id"):
        study.client.predict(token, "not json", api_name="/designer_submit")
    assert study.counts() == before


@pytest.mark.parametrize("role", ["expert", "participant", "admin", "nobody"])
def test_every_designer_endpoint_refuses_other_roles_and_writes_nothing(study, role):
    special = {"admin": study.admin, "nobody": ""}
    token = special[role] if role in special else study.person(role)[1]
    before = study.counts()
    for api, args in ENDPOINTS:
        with pytest.raises(AppError, match="needs the role designer|you are not signed in"):
            study.client.predict(token, *args, api_name=api)
    assert study.counts() == before


def test_a_reload_shows_the_same_task_and_progress(quick_study):
    person, token = quick_study.person()
    view = finish_practice(quick_study, token, quick_study.onboarded(token))
    # The last practice sketch says the main task begins (the header changed without a word).
    assert re.fullmatch(
        r"Saved your coloring of \*\*[a-z ]+\*\* \(#3\)\. \*\*That was your last practice sketch: it is "
        r"approved, and your first batch begins here\.\*\*",
        view["message"],
    ), view["message"]
    view, _ = quick_study.submit(token, view, PAIRS[0])
    assert "last practice" not in view["message"]
    first, second = (quick_study.view("/designer_state", token) for _ in range(2))
    assert first["task"] == second["task"] == view["task"] != ""
    assert "Batch 1 · 1 of 3 done" in first["header"] and first["header"] == second["header"]
    # A reload says what was saved last: after a connection that dropped a Submit's answer
    # the page showed the next sketch and no word of the last one (outsider 85).
    [last] = quick_study.rows("colorings", "practice = 0 and annotator_id = ?", [person])
    assert re.fullmatch(
        rf"Your last saved coloring: \*\*{last['concept_key']}\*\* \(#{last['id']}, \d{{4}}-\d\d-\d\d \d\d:\d\d UTC\)\.",
        first["message"],
    ), first["message"]
    # The admin sees the approval the setting made, as such.
    people = quick_study.client.predict(quick_study.admin, api_name="/admin_list_annotators")
    [designer] = [row for row in people["data"] if row[2] == "designer"]
    approved = designer[6]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC \(automatically\)", approved), approved
    # Every time on the page reads alike (outside probe 99 met three forms on one table).
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", designer[5]), designer[5]
    # What each person did and when (outsider 77 counted colorings per designer from an export).
    assert people["headers"][8:] == ["work_done", "last_active"]
    assert designer[8] == "1 coloring, 3 practice colorings" and re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", designer[9]
    )


def test_the_plain_http_api_route_answers_every_designer_view_with_the_canvas_props(quick_study):
    """``/gradio_api/call/<name>`` (plain HTTP, no client library) encodes its answer with
    the standard JSON encoder: every canvas update must be plain JSON (an HTML component's
    quoted prop names once came back as event triggers and broke the stream)."""
    _, token = quick_study.person()
    url = quick_study.client.src
    answers = {}
    for api, args in (
        ("designer_consent", [True]),
        ("designer_instructions_read", []),
        ("designer_state", []),
    ):
        event = httpx.post(f"{url}gradio_api/call/{api}", json={"data": [token, *args]}).json()
        stream = httpx.get(f"{url}gradio_api/call/{api}/{event['event_id']}", timeout=60).text
        assert "event: complete" in stream, (api, stream[-300:])
        answers[api] = json.loads(stream.split("event: complete\ndata:", 1)[1].strip())
    # The route answers every output of the event, the layout's visibility updates too.
    [canvas] = [a for a in answers["designer_state"] if isinstance(a, dict) and "props" in a]
    [task] = [json.loads(a) for a in answers["designer_state"] if str(a).startswith('{"canvas_key"')]
    assert set(canvas) == {"props", "value", "__type__"}
    assert canvas["props"]["task_id"] == task["canvas_key"] and canvas["props"]["sketch_src"]
    assert answers["designer_state"] == answers["designer_instructions_read"]


def test_a_redo_is_a_new_round_and_an_experts_recolor_note_is_shown_inert(quick_study):
    study = quick_study
    _, token = study.person()
    view = finish_practice(study, token, study.onboarded(token))
    view, _ = study.submit(token, view, PAIRS[0])
    table, gallery = study.client.predict(token, api_name="/designer_submissions")
    first = int(table["data"][0][0])
    assert table["headers"][:3] == ["coloring_id", "concept", "redo"]  # a phone shows these three
    assert table["data"][0][2:5] == ["yes", "1", "submitted"]
    assert len(gallery) == 4 and all(row[2].startswith("no: practice") for row in table["data"][1:])

    view = study.view("/designer_redo", token, first)
    task = json.loads(view["task"])
    assert task["kind"] == "redo" and "Your redo" in view["header"]
    image, mask = load_pixels(study.config.data_dir, study.coloring(first))
    prefilled = parse_canvas_value(view["canvas"]["value"], mask.shape)
    assert prefilled.task_id == task["canvas_key"]
    np.testing.assert_array_equal(prefilled.color_layer, layer_of_coloring(image, mask))
    view, _ = study.submit(token, view, PAIRS[1])
    rows = study.rows("colorings", "practice = 0")
    assert [(r["round"], r["status"]) for r in rows] == [(1, "submitted"), (2, "submitted")]
    assert rows[0]["concept_key"] == rows[1]["concept_key"]

    _, expert = study.person("expert")
    study.client.predict(expert, rows[1]["id"], "<b>browner</b>", api_name="/expert_recolor")
    view = study.view("/designer_state", token)
    assert json.loads(view["task"])["kind"] == "recolor"
    assert "&lt;b&gt;browner&lt;/b&gt;" in view["header"] and "<b>browner" not in view["header"]
    shown = np.asarray(Image.open(view["previous"]["value"]).convert("RGB"))
    np.testing.assert_array_equal(shown, load_pixels(study.config.data_dir, rows[1])[0])
    table, _ = study.client.predict(token, api_name="/designer_submissions")
    assert table["data"][0][4] == "recolor_requested" and table["data"][0][7] == "<b>browner</b>"
    view, _ = study.submit(token, view, PAIRS[2])
    assert [r["round"] for r in study.rows("colorings", "practice = 0")] == [1, 2, 3]


def test_a_right_to_left_recolor_note_is_isolated_from_the_sentence_around_it_and_still_inert(quick_study):
    # Put straight into the English sentence, an Arabic note's closing "!)" was placed by the
    # sentence's direction and showed as "(!اللون أحمر جداً)".
    study = quick_study
    _, token = study.person()
    view = finish_practice(study, token, study.onboarded(token))
    study.submit(token, view, PAIRS[0])
    (coloring,) = study.rows("colorings", "practice = 0")
    _, expert = study.person("expert")
    note = "الرجاء إعادة التلوين <b>(اللون أحمر جداً!)</b>"
    study.client.predict(expert, coloring["id"], note, api_name="/expert_recolor")
    header = study.view("/designer_state", token)["header"]
    sentence = re.search(r'<div class="dz-note">(.*?)</div>', header).group(1)
    assert sentence == f"An expert asked you to color this concept again: <bdi>{html.escape(note)}</bdi>"


def test_a_redo_asked_while_an_earlier_one_is_open_says_it_waits_behind_it(quick_study):
    # The canvas keeps the earlier open redo (round tasks are worked oldest first), but the
    # message said the new one was open there.
    study = quick_study
    token, first, second = two_colorings(study)

    view = study.view("/designer_redo", token, first["id"])
    assert view["message"] == (
        f"Redo coloring #{first['id']}: your earlier round stays stored; submit the new one when it is ready."
    )
    shown = json.loads(view["task"])
    assert (shown["kind"], shown["concept"]) == ("redo", first["concept_key"])

    view = study.view("/designer_redo", token, second["id"])
    assert view["message"] == (
        f"Redo coloring #{second['id']} queued: finish your open redo of **{first['concept_key']}** "
        f"(#{first['id']}) first; this one follows."
    )
    assert json.loads(view["task"]) == shown
    view, _ = study.submit(token, view, PAIRS[2])
    shown = json.loads(view["task"])
    assert (shown["kind"], shown["concept"]) == ("redo", second["concept_key"])


def test_a_redo_whose_round_went_to_the_vote_is_refused_beside_submit_and_the_canvas_moves_on(quick_study):
    # The refusal left the page on the ended redo: every later submit of it was refused
    # again until a reload (outside probe 125's follow-up, left alone in session 39).
    study = quick_study
    token, first, _ = two_colorings(study)
    redo = json.loads(study.view("/designer_redo", token, first["id"])["task"])
    assert redo["kind"] == "redo"
    expert_id, _ = study.person("expert")
    db = open_db(study.config.db_path)
    try:
        open_reviews(db, actor(db, expert_id), [first["id"]], reason="high variance")
    finally:
        db.close()
    value = canvas_value(redo["canvas_key"], paint(study.sketch(redo), PAIRS[2]), 30.0)
    blocks = study.demo.blocks.values()
    [page] = [
        f.fn for f in study.demo.fns.values() if getattr(f.fn, "__name__", "") == "page_designer_submit"
    ]
    parts = {b.elem_id: b for b in blocks if getattr(b, "elem_id", None)}
    shown = page(token, value)
    refusal = f"⚠️ coloring {first['id']} went to the experts' blind vote after you asked to redo it"
    assert shown[parts["designer_submit_note"]].startswith(refusal)
    # ... and above the next task: its canvas clears the note as it loads (an edit's rule)
    assert shown[parts["designer_message"]].startswith(refusal)
    # The canvas shows the next task and drops the ended one's draft; nothing was stored.
    canvas = shown[parts["designer_canvas"]]
    assert canvas["task_id"] != redo["canvas_key"]
    assert canvas["forget_task_id"] == redo["canvas_key"]
    assert json.loads(shown[parts["designer_task"]])["kind"] != "redo"
    assert [r["round"] for r in study.rows("colorings", "practice = 0")] == [1, 1]
    # The ended task, sent again (an API client, another tab), stays refused, saying why.
    with pytest.raises(AppError, match=rf"^coloring {first['id']} went to the experts' blind vote after you"):
        study.client.predict(token, value, api_name="/designer_submit")


def test_a_concept_submitted_from_another_tab_is_refused_and_the_page_names_the_coloring_kept(quick_study):
    # Two tabs showed one task; the second's Submit was refused while the line above its
    # drawing still named the coloring saved before the first tab's (outside probe 176).
    study = quick_study
    person, token = study.person()
    view = finish_practice(study, token, study.onboarded(token))
    task = json.loads(view["task"])
    [page] = [
        f.fn for f in study.demo.fns.values() if getattr(f.fn, "__name__", "") == "page_designer_submit"
    ]
    parts = {b.elem_id: b for b in study.demo.blocks.values() if getattr(b, "elem_id", None)}
    first, second = (
        canvas_value(task["canvas_key"], paint(study.sketch(task), PAIRS[i]), 30.0) for i in (0, 1)
    )
    page(token, first)
    with pytest.warns(UserWarning):
        shown = page(token, second)
    assert shown[parts["designer_submit_note"]].startswith("⚠️ this concept was already submitted")
    [kept] = study.rows("colorings", "practice = 0 and annotator_id = ?", [person])
    assert kept["concept_key"] == task["concept"]
    assert shown[parts["designer_message"]].startswith(
        f"Your last saved coloring: **{kept['concept_key']}** (#{kept['id']}, "
    )


def test_the_reference_example_files_are_the_drawn_examples_and_come_back_when_removed():
    from app.designer import reference_example_files, reference_examples

    files = reference_example_files()
    assert [caption for _, caption in files] == [caption for _, caption in reference_examples()]
    for (path, _), (drawn, _) in zip(files, reference_examples(), strict=True):
        assert path.endswith(".png")
        assert np.array_equal(np.asarray(Image.open(path).convert("RGB")), drawn)
    removed = Path(files[1][0])
    removed.unlink()  # a cleaner of temporary folders went by
    assert reference_example_files() == files and removed.is_file()


def test_preset_swatches_are_off_by_default_and_read_from_the_environment(monkeypatch):
    from app.config import ENV_SWATCHES, AppConfig

    monkeypatch.delenv(ENV_SWATCHES, raising=False)
    assert AppConfig.from_env().swatches == ()
    monkeypatch.setenv(ENV_SWATCHES, "#8B5A2B, #2e7d32")
    assert AppConfig.from_env().swatches == ("#8b5a2b", "#2e7d32")
    with pytest.raises(ValueError, match="`swatches` must be colors such as '#d62828', got 'brown'"):
        AppConfig(swatches=("brown",))


def test_submissions_at_once_default_to_two_and_are_read_from_the_environment(monkeypatch):
    from app.config import ENV_SUBMIT_CONCURRENCY, AppConfig

    monkeypatch.delenv(ENV_SUBMIT_CONCURRENCY, raising=False)
    assert AppConfig.from_env().submit_concurrency == 2
    monkeypatch.setenv(ENV_SUBMIT_CONCURRENCY, "5")
    assert AppConfig.from_env().submit_concurrency == 5
    with pytest.raises(ValueError, match="submit_concurrency"):
        AppConfig(submit_concurrency=0)


def test_the_page_and_api_submit_share_one_queue_group_that_other_requests_stay_out_of(tmp_path):
    from app import build_app

    demo = build_app(make_config(tmp_path, submit_concurrency=3))
    groups = {}
    for fn in demo.fns.values():
        groups.setdefault(fn.concurrency_id, []).append((fn.api_name, fn.concurrency_limit))
    assert sorted(groups["designer_submit"]) == [("designer_submit", 3), ("page_designer_submit", 3)]
    others = [name for group, fns in groups.items() if group != "designer_submit" for name, _ in fns]
    assert "login_invite" in others and "designer_state" in others


def test_a_painted_background_is_stored_and_the_designer_is_told_how_to_take_it_back(quick_study):
    """A bucket fill of the white around the drawing was taken without a word (outside probe
    142). It is stored (in a scene, that area may be the concept), and the "Saved" line says
    so, with the redo that takes it back; paint on the object alone adds nothing."""
    study = quick_study
    _, token = study.person()
    view = finish_practice(study, token, study.onboarded(token))
    messages = []
    for where in ("object", "background"):
        task = json.loads(view["task"])
        sketch = study.sketch(task)
        around = border_region(sketch)
        regions = label(~line_mask(sketch) & (around if where == "background" else ~around), connectivity=1)
        sizes = np.bincount(regions.ravel())[1:]
        # The object: its largest part. The background: every part of it (a scene has several).
        filled = np.flatnonzero(sizes > 500) + 1 if where == "background" else [np.argmax(sizes) + 1]
        layer = blank_color_layer(sketch.shape)
        for region in filled:
            depth = ndimage.distance_transform_edt(regions == region)
            y, x = np.unravel_index(np.argmax(depth), depth.shape)
            layer = flood_fill(layer, sketch, (int(x), int(y)), PAIRS[0][0])
        view = study.view("/designer_submit", token, canvas_value(task["canvas_key"], layer, 20.0))
        messages.append(view["message"])
    object_only, background = messages
    assert object_only.startswith("Saved your coloring") and "around the drawing" not in object_only
    [stored] = study.rows("colorings", "practice = 0 and id = (select max(id) from colorings)")
    share = int(re.search(r"painted too\*\* \((\d+)% of it\)", background).group(1))
    assert 90 <= share <= 100  # regions under 500 px are left unpainted
    assert background == (
        f"Saved your coloring of **{stored['concept_key']}** (#{stored['id']}). **The area around the "
        f"drawing is painted too** ({share}% of it). If it is not part of the concept (the white around an "
        f"object), it should stay blank. To take it back, open **My submissions** below, enter {stored['id']} "
        "as the coloring id and press **Redo this coloring**."
    )
    view = study.view("/designer_redo", token, stored["id"])  # the way back the line names
    assert json.loads(view["task"])["kind"] == "redo"


def test_a_coloring_stored_on_a_nearly_full_disk_is_said_to_be_saved_whatever_fails_after_it(tmp_path):
    """The last practice sketch was stored, then the disk refused the first batch's draw, and
    the designer was told "nothing of it was stored" (outside probe 150). At each free space,
    from none stored to all done, what the designer reads matches what the database holds;
    one of them stores the coloring and fails the next step."""
    from tests.disks import fill, tmpfs

    sides = set()
    with tmpfs(tmp_path / "disk", "8m", lazy=True) as disk:
        config = make_config(disk, batch_size=3, auto_approve_practice=True)
        with running_app(config) as (client, demo):
            study = Study(client, config, demo)
            # Here it stores from ~86 kB free and draws the batch from ~100 kB: steps finer than that gap
            for leave in range(72 * 1024, 192 * 1024, 6 * 1024):
                _, token = study.person()
                view = study.onboarded(token)
                for _ in range(2):
                    view, _ = study.submit(token, view, [(176, 176, 176)])
                task = json.loads(view["task"])
                value = canvas_value(task["canvas_key"], paint(study.sketch(task), [(176, 176, 176)]), 30.0)
                before = len(study.rows("colorings"))
                filler = fill(disk, leave)
                try:
                    shown = study.view("/designer_submit", token, value)
                except AppError as refused:
                    shown = {"refused": str(refused)}
                finally:
                    filler.unlink()
                stored = len(study.rows("colorings")) - before
                if "refused" in shown:
                    assert stored == 0 and "nothing of it was stored" in shown["refused"], (leave, shown)
                    sides.add("refused")
                elif shown["notice"]:
                    assert stored == 1, (leave, shown)
                    assert shown["notice"].startswith("Saved your coloring of **cozy cabin** (#") and (
                        "Your coloring is kept, but the server could not hand out your next sketch: it could not "
                        "write to its disk (it may be full). Press the button in a minute" in shown["notice"]
                    ), shown["notice"]
                    assert shown["task"] == ""
                    sides.add("saved, next refused")
                    waiting = token
                else:
                    assert stored == 1 and shown["message"].startswith(
                        "Saved your coloring of **cozy cabin**"
                    )
                    sides.add("saved")
                    break
            # Room again: the designer told to press the button goes on to their first batch.
            assert json.loads(study.view("/designer_continue", waiting)["task"])["kind"] == "batch"
    assert {"saved, next refused", "saved"} <= sides, sides


@pytest.mark.browser
def test_a_long_recolor_note_leaves_each_submission_row_in_view(quick_study, module_chromium):
    """A 1,990-character one-word note made its row of *My submissions* 1,843 px tall, the
    row's other cells out of the table's view (outside probe 207): a cell shows about six
    lines and scrolls the rest (`app.common.CSS`); the note is all there."""
    from playwright.sync_api import expect

    study = quick_study
    row = study.client.predict(study.admin, "designer", 1, "yes", 7, api_name="/admin_create_invites")[
        "data"
    ][0]
    token = study.client.predict(row[3], api_name="/login_invite")[0]
    view = finish_practice(study, token, study.onboarded(token))
    study.submit(token, view, PAIRS[0])
    (coloring,) = study.rows("colorings", "practice = 0")
    _, expert = study.person("expert")
    note = "W" * 1990
    study.client.predict(expert, coloring["id"], note, api_name="/expert_recolor")
    page = module_chromium.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(row[3].replace(study.config.public_url + "/", study.client.src))
        page.get_by_role("tab", name="Coloring").click()
        page.locator("#designer_submissions_box").get_by_text("My submissions").first.click()
        rows = page.locator("#designer_table [role=row][data-index]")
        expect(rows).to_have_count(4)
        first = rows.first
        expect(first).to_contain_text(str(coloring["id"]))
        assert first.bounding_box()["height"] < 200, first.bounding_box()
        table = page.locator("#designer_table").bounding_box()
        cells = first.locator("[role=gridcell]")
        for cell in (cells.first, cells.last):
            box = cell.bounding_box()
            assert table["y"] <= box["y"] and box["y"] + box["height"] <= table["y"] + table["height"], (
                box,
                table,
            )
        assert cells.last.inner_text().strip() == note
        # The keyboard reaches the rest of it: a Tab from the row's first cell, then the page keys
        # (outside probe 209: the table's own keys took them, and only a mouse could scroll it).
        text = cells.last.locator("span.text")
        expect(text).to_have_attribute("tabindex", "0")
        cells.first.click()
        for _ in range(10):
            page.keyboard.press("Tab")
            if text.evaluate("t => t === document.activeElement"):
                break
        expect(text).to_be_focused()
        page.keyboard.press("PageDown")
        page.wait_for_function("t => t.scrollTop > 0", arg=text.element_handle())
        page.keyboard.press("End")
        page.wait_for_function(
            "t => t.scrollTop + t.clientHeight >= t.scrollHeight - 1", arg=text.element_handle()
        )
    finally:
        page.close()
