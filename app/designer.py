"""The Coloring tab: designers' onboarding and colorization (paper §3.2, Appendix B.2-B.3).

Onboarding (`annotation.people.onboarding`): consent, instructions with colored reference
examples, three practice drawings, then the study admin's approval (or none, with
``AppConfig.auto_approve_practice``). Then the main task: one concept at a time on the
coloring canvas (`app.coloring_canvas`), in batches of ``AppConfig.batch_size``
(`annotation.coloring.tasks`), with recolor requests from experts first; "My
submissions" lists every coloring and redoes one while its batch is open.

Every view comes from the database (`DesignerTab._view`), so a reload shows the same task
and progress; the canvas keeps unsubmitted work in the browser under the task's key.

The tab is a `DesignerTab`: its handlers are methods that name who may call them
(`app.common.role`) and return ``{part: update}``; every view is built by one method
(`DesignerTab.show`), which names each part; `EVENTS` is the tab's whole wiring.

Endpoints (all need the designer role): ``designer_state``, ``designer_consent(agreed)``,
``designer_instructions_read``, ``designer_continue``, ``designer_submit(canvas_value)``,
``designer_submissions`` and ``designer_redo(coloring_id)``. The view endpoints return,
in order: consent, instructions, notice and task boxes, the notice text, the continue
button, the task header (HTML), the previous round's image, the canvas, ``task`` (JSON:
``canvas_key``, ``task_id``, ``sketch_id``, ``concept``, ``kind``; "" when no task is
shown), a message and the "My submissions" section (API clients receive the components
with values: notice, header, previous, canvas, task, message).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from pathlib import Path

import gradio as gr
import numpy as np
from gradio.processing_utils import save_img_array_to_cache
from gradio.utils import get_upload_folder

from annotation.assignment import reserve_practice
from annotation.coloring import tasks as work
from annotation.coloring.canvas import BACKGROUND_PAINTED
from annotation.coloring.fill import canvas_value
from annotation.coloring.store import check_submission_rate, last_coloring, load_pixels
from annotation.coloring.withdrawal import withdrawn_count
from annotation.errors import AlreadyDone, Conflict, TaskEnded
from annotation.files import resolve
from annotation.people import onboarding
from annotation.sketches.importing import SKETCH_DIR, load_sketch_png
from annotation.sketches.library import sketch_data_url
from app.coloring_canvas import canvas_update, coloring_canvas, flush_js
from app.common import (
    ONE_CLICK,
    PLUMBING,
    AppContext,
    as_gr_error,
    compact_css,
    escape,
    focus_next,
    id_field,
    inert_markdown,
    live,
    named_table,
    note_area,
    own_session,
    refusal_text,
    refused_with,
    role,
    same_access,
    ui_only,
    visible_to,
    whole_number,
)
from app.landing import current_actor
from app.tabs import SESSION_CHANGE, On, Tab
from storage import shown_time, storage_condition

_LOG = logging.getLogger(__name__)
NAME = "designer"
TITLE = "Coloring"
ROLES = ("designer",)
SUBMISSION_HEADERS = [
    "coloring_id",
    "concept",
    "redo",  # beside the concept: on a phone the first three columns show (outside probe 217)
    "round",
    "status",
    "submitted_utc",
    "minutes",
    "expert_note",
]
RULES = (
    "Color only the parts that belong to the concept; leave the rest white. For "
    "“coffee”, color the drink, not the cup.",
    "Use the colors you associate with it from everyday experience: realistic, not a "
    "personal or cartoon style.",
    "The modifier matters: a “rotten apple” is not colored like an “apple”.",
)
# Reference examples for the instructions: (slug, caption, [((x, y), (r, g, b)), ...]).
EXAMPLES = (
    (
        "apple",
        "“apple”: red body, brown stem, green leaf",
        [
            ((500, 600), (196, 30, 45)),
            ((525, 250), (110, 75, 40)),
            ((660, 200), (80, 140, 50)),
            ((610, 255), (80, 140, 50)),
        ],
    ),
    (
        "apple",
        "“rotten apple”: same drawing, brown and olive",
        [
            ((500, 600), (120, 80, 40)),
            ((525, 250), (70, 50, 30)),
            ((660, 200), (110, 110, 60)),
            ((610, 255), (110, 110, 60)),
        ],
    ),
    ("coffee", "“coffee”: only the drink is colored, not the cup", [((510, 450), (75, 45, 25))]),
)
_KIND_LABEL = {
    "practice": "Practice drawing",
    "batch": "Batch",
    "recolor": "Recolor request",
    "redo": "Your redo",
}
_MODIFIER = {"visual_state": "visual state", "emotional": "emotion"}
CSS = """
#designer_table th .header { word-break: normal; overflow-wrap: normal; }
@media (max-width: 640px) {
  #designer_gallery .grid-container { grid-template-columns: repeat(3, minmax(0, 1fr)) !important; }
}
"""
"""My submissions on a phone: a column's name broke letter by letter (``coloring_id`` stood 350 px
tall) and the thumbnails ran off the screen's side, 2.5 of 7 in view (outside probe 230)."""
_HEADER_CSS = """
.dz-head { display: flex; flex-direction: column; gap: 4px; padding: 4px 2px 8px; }
.dz-progress { color: #57606a; font-size: 14px; font-weight: 600; letter-spacing: .02em; }
.dz-concept { font-size: 34px; line-height: 1.1; font-weight: 700; color: #1f2328; margin: 0; }
.dz-meta { font-size: 16px; color: #3d444d; }
.dz-meta b { color: #1f2328; }
.dz-note { margin-top: 6px; padding: 8px 12px; border-left: 4px solid #bf8700;
           background: #fff8c5; color: #3b2300; white-space: pre-wrap; overflow-wrap: anywhere;
           max-height: 10em; overflow-y: auto; }
.dz-rules { margin: 6px 0 0 18px; padding: 0; color: #3d444d; font-size: 14px; }
"""


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Coloring tab inside the current `gr.Tab`."""
    consent_text, consent_sha = onboarding.read_text(onboarding.CONSENT_FILE)
    parts = _layout(consent_text, ctx.config.swatches)
    DesignerTab(ctx, {"session_token": session_token, **parts}, consent_sha).wire()


VIEW = (
    "consent_box",
    "instructions_box",
    "notice_box",
    "notice",
    "continue",
    "task_box",
    "header",
    "previous",
    "canvas",
    "task",
    "message",
    "submissions_box",
)
"""The parts every view updates (`DesignerTab.show`), in the order API clients receive them."""
LISTING = ("table", "gallery")
"""The parts of the "My submissions" list (`DesignerTab.submissions`)."""


_TOKEN = ("session_token",)
EVENTS = (
    On("refresh.click", "state", _TOKEN, VIEW, "message", "designer_state"),
    # After each step the focus goes to the next one (the pressed button hides), not the page's top.
    On("agree.click", "consent", (*_TOKEN, "agreed"), VIEW, "agree_note", "designer_consent"),
    On("then", None, (), (), js=focus_next("#designer_read")),
    On("read.click", "instructions_read", _TOKEN, VIEW, "read_note", "designer_instructions_read"),
    On("then", None, (), (), js=focus_next("#designer_header .dz-concept")),
    On("continue.click", "continue_", _TOKEN, VIEW, "continue_note", "designer_continue"),
    # The submit sends the canvas as it is at the click, not its value of 250 ms ago.
    On(
        "submit.click",
        "submit",
        (*_TOKEN, "canvas"),
        VIEW,
        "submit_note",
        "designer_submit",
        js=flush_js("designer_canvas", 1, 2),
        limited=True,
    ),
    On("then", "submissions_if_open", (*_TOKEN, "listing_open"), LISTING, "redo_note", clear_note=False),
    # An edit clears a refusal of the submission in the page itself: "Nothing is colored yet"
    # stayed under the button beside "Filled 34,728 px" (outside probe 159).
    On("canvas.change", None, (), ("submit_note",), js="() => ''"),
    On("redo.click", "redo", (*_TOKEN, "redo_id"), VIEW, "redo_note", "designer_redo"),
    On("then", "submissions_if_open", (*_TOKEN, "listing_open"), LISTING, "redo_note", clear_note=False),
    # The list is rebuilt after a submission only while it is open (about 30 ms of the
    # server's main process per submission for a designer with 34 colorings), and when
    # it is opened.
    On("submissions_box.expand", "listing_opened", (), ("listing_open",)),
    On("submissions_box.collapse", "listing_closed", (), ("listing_open",)),
    On("submissions_box.expand", "submissions", _TOKEN, LISTING, "redo_note"),
    On("list.click", "submissions", _TOKEN, LISTING, "redo_note", "designer_submissions"),
    On(SESSION_CHANGE, "on_sign_in", _TOKEN, VIEW),
    On(SESSION_CHANGE, "submissions_on_sign_in", (*_TOKEN, "listing_open"), LISTING),
    On(SESSION_CHANGE, "examples_on_sign_in", _TOKEN, ("examples",)),
)
"""The tab's wiring, in the order Gradio registers it (`DesignerTab.wire`)."""
OUTSIDER = "This tab is for designers: sign in with a designer's invite link to color."
CONSENT_FIRST = "First agree to the consent text; the instructions and the practice follow."
READ_FIRST = "Read the instructions, then confirm that you have read them: the practice opens."


class DesignerTab(Tab):
    """The Coloring tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`) and ``session_token``;
    ``consent_sha256``: the digest of the consent text shown, recorded with an agreement.
    """

    EVENTS = EVENTS

    def __init__(self, ctx: AppContext, parts: dict, consent_sha256: str) -> None:
        super().__init__(ctx, parts)
        self.consent_sha256 = consent_sha256

    def show(
        self,
        *,
        consent_box: bool = False,
        instructions_box: bool = False,
        notice_box: bool = False,
        notice: str = "",
        continue_: str | None = None,
        task_box: bool = False,
        header: str = "",
        previous: str | None = None,
        canvas: dict | None = None,
        task: str = "",
        message: str = "",
        submissions_box: bool = False,
    ) -> dict:
        """A view: every part of `VIEW` updated, hidden or empty unless named.

        Parameters
        ----------
        consent_box, instructions_box, notice_box, task_box, submissions_box : bool
            Which boxes show.
        notice, header, task, message : str
            Their texts (``task``: the task as JSON, `_task_view`).
        continue_ : str or None
            The label of the notice's button; None hides it.
        previous : str or None
            The previous round's image (a path), shown with the task box; with the task box
            hidden the image is hidden and keeps its value.
        canvas : dict or None
            The canvas's update (`app.coloring_canvas.canvas_update`); None leaves it as is.
        """
        updates = {
            "consent_box": gr.Column(visible=consent_box),
            "instructions_box": gr.Column(visible=instructions_box),
            "notice_box": gr.Column(visible=notice_box),
            "notice": notice,
            "continue": gr.Button(visible=False) if continue_ is None else gr.Button(continue_, visible=True),
            "task_box": gr.Column(visible=task_box),
            "header": header,
            "previous": gr.Image(value=previous, visible=previous is not None)
            if task_box
            else gr.Image(visible=False),
            "canvas": gr.update() if canvas is None else canvas,
            "task": task,
            "message": message,
            "submissions_box": gr.Accordion(visible=submissions_box),
        }
        return {self.parts[name]: updates[name] for name in VIEW}

    @role("designer")
    def state(self, db, actor) -> dict:
        """The designer's current view: onboarding step, task, or notice."""
        return self._view(db, actor)

    @role("designer")
    def consent(self, db, actor, agreed: bool) -> dict:
        """Record the designer's agreement to the consent text shown."""
        if agreed is not True:
            raise ValueError(
                "Tick the box to agree to the consent text, or close the page if "
                "you do not want to take part."
            )
        onboarding.record_consent(db, actor.annotator_id, self.consent_sha256, True)
        return self._view(db, actor)

    @role("designer")
    def instructions_read(self, db, actor) -> dict:
        """Record that the designer read the instructions; opens the practice."""
        onboarding.mark_instructions_read(db, actor.annotator_id)
        return self._view(db, actor)

    @role("designer")
    def continue_(self, db, actor) -> dict:
        """Start the next batch when the current one is all done; otherwise show the view
        (which reserves what the current batch still needs, when free slots exist)."""
        ctx = self.ctx
        if (
            _stage(ctx, db, actor) == "main"
            and work.next_item(db, actor.annotator_id, practice=False) is None
        ):
            batch = work.batch_progress(db, actor.annotator_id)
            if batch is None or batch.done >= batch.total:
                _start_batch(ctx, db, actor)
        return self._view(db, actor)

    @role("designer")
    def submit(self, db, actor, value: str) -> dict:
        """Store the canvas's coloring for its task, then show the next task."""
        ctx, config = self.ctx, self.ctx.config
        check_submission_rate(db, actor.annotator_id, config.max_submissions_per_minute)
        before = _stage(ctx, db, actor)
        try:
            submitted = work.submit_canvas(
                db,
                config.data_dir,
                actor.annotator_id,
                value,
                instance=ctx.instance_name,
                main_open=_stage(ctx, db, actor) == "main",
                min_painted_fraction=config.min_painted_fraction,
                k=config.colorings_per_concept,
                pool=ctx.pool,
                reservation_minutes=config.reservation_minutes,
                rng=ctx.rng,
            )
        except TaskEnded as ended:
            # The refusal beside the button, and the canvas moves on: the task is gone. The
            # next task's canvas clears that note as it loads (an edit's rule), so the message
            # above the task says it too (in Chromium the refusal showed nowhere: session 49).
            said = refusal_text(as_gr_error(ended).message)
            raise refused_with(ended, self._view(db, actor, forget=ended.canvas_key, message=said)) from ended
        except AlreadyDone as done:
            # Submitted from another tab: the line above the drawing still named the coloring
            # saved before that one, beside a refusal saying it was kept (outside probe 176).
            raise refused_with(done, self.named(message=_last_saved(db, actor.annotator_id))) from done
        saved = f"Saved your coloring of **{escape(submitted.task.concept_key)}** (#{submitted.coloring_id})."
        try:
            return self._view(
                db,
                actor,
                forget=submitted.canvas_key,  # that browser draft is done
                message=saved
                # The header changed from "Practice" to "Batch 1" without a word (outside probe 142).
                + (
                    " **That was your last practice sketch: it is approved, and your first batch begins here.**"
                    if before == "practice" and _stage(ctx, db, actor) == "main"
                    else ""
                )
                + _background_note(db, actor, submitted, practice_reviewed=not config.auto_approve_practice),
            )
        except Exception as error:
            return self._saved_but(error, saved)

    def _saved_but(self, error: Exception, saved: str) -> dict:
        """The view after a stored coloring whose next sketch a full disk, a failed write or
        a busy database kept from being handed out: it said "nothing of it was stored"
        (outside probe 150). Anything else is raised as it came."""
        condition = storage_condition(error)
        if condition is None:
            raise error
        _LOG.error(
            "designer_submit: the coloring was stored, the next sketch not handed out: %s (%s)",
            condition,
            error,
        )
        why = {
            "locked": "its database is busy",
            "missing": "its database is not where it was",
        }.get(condition, "it could not write to its disk (it may be full)")
        return self._notice(
            f"{saved} Your coloring is kept, but the server could not hand out your next sketch: {why}. "
            "Press the button in a minute; tell the study organisers if it stays so.",
            "Check again",
            "",
        )

    @role("designer")
    def redo(self, db, actor, coloring_id: str) -> dict:
        """Queue a redo of one of the designer's colorings and open it on the canvas, or say
        which earlier open round task it waits behind."""
        coloring_id = whole_number(coloring_id, "Coloring id")
        task_id = work.request_redo(
            db, actor.annotator_id, coloring_id, minutes=self.ctx.config.reservation_minutes
        )
        # Round tasks are worked oldest first (`work.next_item`): an earlier open redo or
        # recolor request stays on the canvas, so the message must not say this one is there.
        first = work.next_item(db, actor.annotator_id, practice=False)
        if first is not None and first.task.id != task_id:
            what = "recolor request" if first.kind == "recolor" else "redo"
            message = (
                f"Redo coloring #{coloring_id} queued: finish your open {what} of "
                f"**{escape(first.concept['key'])}** (#{first.task.coloring_id}) first; this one follows."
            )
        else:
            message = (
                f"Redo coloring #{coloring_id}: your earlier round stays stored; submit the new one "
                "when it is ready."
            )
        return self._view(db, actor, prefill_task=task_id, message=message)

    @role("designer")
    def submissions(self, db, actor) -> dict:
        """The designer's colorings: a table (with redo status and expert notes) and images."""
        rows = work.my_colorings(db, actor.annotator_id)
        table = [
            [
                str(r["id"]),
                r["concept_key"] + (" (practice)" if r["practice"] else ""),
                "yes" if not r["redo"] else f"no: {r['redo']}",
                str(r["round"]),
                r["status"],
                shown_time(r["created"]),
                "" if r["seconds_spent"] is None else f"{r['seconds_spent'] / 60:.1f}",
                r["note"],
            ]
            for r in rows
        ]
        images = [
            (
                str(resolve(self.ctx.config.data_dir, r["image_path"])),
                f"#{r['id']} {r['concept_key']} · round {r['round']}",
            )
            for r in rows
        ]
        return self._listing(table, images)

    def submissions_if_open(self, session_token: str, is_open: bool) -> dict:
        """`submissions` while the "My submissions" list is open, else no change."""
        return self.submissions(session_token) if is_open else self._listing(gr.skip(), gr.skip())

    # Closed, it reads and writes nothing; open, `submissions` checks the caller.
    submissions_if_open = same_access(submissions_if_open, submissions)

    @own_session
    def submissions_on_sign_in(self, session_token: str, is_open: bool) -> dict:
        """ "My submissions" when someone signs in or out: built if it is open and they are a
        designer, else emptied (it is built when opened)."""
        if is_open:
            with contextlib.suppress(gr.Error):
                return self.submissions(session_token)
        return self._listing([], [])

    @own_session
    def examples_on_sign_in(self, session_token: str) -> dict:
        """The instructions' reference examples, for a designer who signs in (nothing for
        anyone else). Sent by the page alone, not in it: they weighed 1.7 kB of every visitor's
        page (issue 28), with the paths of Gradio's cache; not in the API's views either, whose
        clients would have had to fetch them."""
        if not visible_to(current_actor(self.ctx, session_token), ("designer",)):
            return {self.parts["examples"]: gr.skip()}
        return {self.parts["examples"]: reference_example_files()}

    @own_session
    def on_sign_in(self, session_token: str) -> dict:
        """The view for whoever signs in or out: a designer's own, anyone else's `OUTSIDER`."""
        try:
            return self.state(session_token)
        except gr.Error:
            return self.show(message=OUTSIDER if session_token else "")

    @staticmethod
    @ui_only
    def listing_opened() -> bool:
        return True

    @staticmethod
    @ui_only
    def listing_closed() -> bool:
        return False

    def _listing(self, table, gallery) -> dict:
        return {self.parts["table"]: table, self.parts["gallery"]: gallery}

    def _view(
        self, db, actor, *, message: str = "", forget: str = "", prefill_task: int | None = None
    ) -> dict:
        """Everything the tab shows for this designer now (`show`)."""
        ctx = self.ctx
        config = ctx.config
        stage = _stage(ctx, db, actor)
        # The page shows the step's box; the message says it too, for API clients (an outside
        # tester's `designer_state` came back empty before consent).
        if stage == "consent":
            return self.show(consent_box=True, message=message or CONSENT_FIRST)
        if stage == "instructions":
            return self.show(instructions_box=True, message=message or READ_FIRST)
        if stage == "awaiting_approval":
            return self._notice(
                "**Thank you: your three practice drawings are in.** The study "
                "organisers look at them before the main task opens; come back "
                "later, or press the button to check now.",
                "Check again",
                message,
            )
        if stage == "practice":
            reserve_practice(
                db, actor.annotator_id, config.practice_concepts, minutes=config.reservation_minutes
            )
            item = work.next_item(db, actor.annotator_id, practice=True)
            done = len(onboarding.practice_colorings(db, actor.annotator_id))
            progress = f"Practice · {done} of {len(config.practice_concepts)} done"
            why = onboarding.practice_redo_reason(db, actor.annotator_id)
            if why is not None and not message:
                message = "The study organisers asked you to do the practice again" + (
                    f": “{inert_markdown(why)}”." if why.strip() else "."
                )
            elif not message and not done and withdrawn_count(db, actor.annotator_id, practice=True):
                # Their drawings were gone without a word (outside probe 221).
                message = (
                    "The study organisers withdrew your earlier colorings from the data set (as you asked), "
                    "so the practice starts again."
                )
        else:
            _top_up(ctx, db, actor)
            item = work.next_item(db, actor.annotator_id, practice=False)
            batch = work.batch_progress(db, actor.annotator_id)
            if item is None and batch is None:
                _start_batch(ctx, db, actor)
                item = work.next_item(db, actor.annotator_id, practice=False)
                batch = work.batch_progress(db, actor.annotator_id)
            if item is None:
                return self._batch_done(batch, message)
            progress = (
                f"Batch {batch.batch} · {batch.done} of {batch.total} done" if batch is not None else ""
            )
        return self._task_view(
            item,
            progress,
            message=message or _last_saved(db, actor.annotator_id),
            forget=forget,
            prefill=item.task.id == prefill_task,
        )

    def _batch_done(self, batch: work.Progress | None, message: str) -> dict:
        # Nothing open in a batch that is not all done: every free slot is taken for now.
        if batch is None or batch.total == 0 or batch.done < batch.total:
            return self._notice(
                "**No concept is waiting for you right now.** Thank you! More may open later.",
                "Check again",
                message,
            )
        return self._notice(
            f"**Batch {batch.batch} is done: you colored {batch.done} of "
            f"{batch.total}.** You can look over your colorings under *My "
            "submissions* and redo one before you start the next batch.",
            "Start the next batch",
            message,
        )

    def _notice(self, text: str, button: str, message: str) -> dict:
        return self.show(
            notice_box=True, notice=text, continue_=button, message=message, submissions_box=True
        )

    def _task_view(
        self, item: work.WorkItem, progress: str, *, message: str, forget: str, prefill: bool
    ) -> dict:
        data_dir = self.ctx.config.data_dir
        key = work.canvas_key(self.ctx.instance_name, item.task.id, item.sketch["id"])
        value = ""
        if prefill and item.previous is not None:
            image, mask = load_pixels(data_dir, item.previous)
            value = canvas_value(key, work.layer_of_coloring(image, mask))
        task = json.dumps(
            {
                "canvas_key": key,
                "task_id": item.task.id,
                "sketch_id": item.sketch["id"],
                "concept": item.concept["key"],
                "kind": item.kind,
            }
        )
        return self.show(
            task_box=True,
            header=_header(item, progress),
            previous=None if item.previous is None else str(resolve(data_dir, item.previous["image_path"])),
            canvas=canvas_update(key, sketch_data_url(data_dir, item.sketch), value, forget_task_id=forget),
            task=task,
            message=message,
            submissions_box=True,
        )


def _last_saved(db, annotator_id: int) -> str:
    """The designer's latest stored coloring, in words: a page reloaded after a connection
    that dropped the answer of a Submit showed the next sketch and no word of the last one
    (it had been stored; outsider 85)."""
    row = last_coloring(db, annotator_id)
    if row is None:
        return ""
    return f"Your last saved coloring: **{escape(row['concept_key'])}** (#{row['id']}, {shown_time(row['created'])})."


def _background_note(db, actor, submitted: work.Submitted, *, practice_reviewed: bool) -> str:
    """What the "Saved" line adds when the area around the drawing is painted.

    Told, not refused: in a scene (a sky, a sea) that area may be the concept. A fill of the
    white around an object had been taken without a word (outside probe 142).
    """
    if submitted.background < BACKGROUND_PAINTED:
        return ""
    coloring = db["colorings"].get(submitted.coloring_id)
    if coloring["practice"]:
        back = " The study admin reviews your practice colorings." if practice_reviewed else ""
    elif work.redo_refusal(db, actor.annotator_id, coloring) == "":
        back = (
            f" To take it back, open **My submissions** below, enter {submitted.coloring_id} "
            "as the coloring id and press **Redo this coloring**."
        )
    else:
        back = ""
    return (
        f" **The area around the drawing is painted too** ({submitted.background:.0%} of it). "
        "If it is not part of the concept (the white around an object), it should stay blank." + back
    )


def _layout(consent_text: str, swatches: tuple[str, ...]) -> dict:
    parts: dict = {}
    # Above every box, so that what a step answers shows whichever box comes next.
    parts["message"] = live(gr.Markdown(elem_id="designer_message"))
    with gr.Column(visible=False, elem_id="designer_consent_box") as parts["consent_box"]:
        gr.Markdown(consent_text, elem_id="designer_consent_text")
        parts["agreed"] = gr.Checkbox(
            False,
            label="I have read this information, I am at least 18 years old and I agree to take part",
            elem_id="designer_agreed",
        )
        with gr.Row(equal_height=True):
            parts["agree"] = gr.Button("I agree: continue", variant="primary", elem_id="designer_agree")
            parts["agree_note"] = note_area("designer_agree_note")
    with gr.Column(visible=False, elem_id="designer_instructions_box") as parts["instructions_box"]:
        gr.Markdown(
            onboarding.read_text(onboarding.INSTRUCTIONS_FILE)[0], elem_id="designer_instructions_text"
        )
        parts["examples"] = gr.Gallery(
            label="Reference examples",
            columns=3,
            height="auto",
            object_fit="contain",
            interactive=False,
            preview=False,
            elem_id="designer_examples",
        )
        with gr.Row(equal_height=True):
            parts["read"] = gr.Button(
                "I have read the instructions: start the practice", variant="primary", elem_id="designer_read"
            )
            parts["read_note"] = note_area("designer_read_note")
    with gr.Column(visible=False, elem_id="designer_notice_box") as parts["notice_box"]:
        parts["notice"] = gr.Markdown(elem_id="designer_notice")
        with gr.Row(equal_height=True):
            parts["continue"] = gr.Button("Check again", variant="primary", elem_id="designer_continue")
            parts["continue_note"] = note_area("designer_continue_note")
    # The task beside the canvas, Submit under it: the whole task fits one screen (the
    # canvas takes the window's height, `assets/web/coloring.js`).
    with (
        gr.Column(visible=False, elem_id="designer_task_box") as parts["task_box"],
        gr.Row(equal_height=False),
    ):
        with gr.Column(scale=1, min_width=260, elem_id="designer_task_side"):
            parts["header"] = gr.HTML("", css_template=compact_css(_HEADER_CSS), elem_id="designer_header")
            parts["submit"] = gr.Button(
                "Submit this coloring",
                variant="primary",
                size="lg",
                elem_id="designer_submit",
                elem_classes=[ONE_CLICK],
            )
            # A refused submission ("Nothing is colored yet") is said here, under the button
            # pressed; what a saved one says goes to the message above the next concept.
            parts["submit_note"] = live(note_area("designer_submit_note"))
            parts["previous"] = gr.Image(
                label="Your previous round",
                type="filepath",
                interactive=False,
                visible=False,
                height=200,
                elem_id="designer_previous",
            )
        with gr.Column(scale=4, min_width=480):
            parts["canvas"] = coloring_canvas(swatches=swatches, elem_id="designer_canvas")
    parts["task"] = gr.Textbox(
        "", visible="hidden", elem_classes=PLUMBING, label="task", elem_id="designer_task"
    )
    parts["refresh"] = gr.Button("Reload", visible=False, elem_id="designer_refresh")
    with gr.Accordion(
        "My submissions", open=False, visible=False, elem_id="designer_submissions_box"
    ) as parts["submissions_box"]:
        gr.Markdown(
            "Every coloring you submitted. While its batch is open (until you start "
            "the next batch) you can redo a coloring that nobody has reviewed yet: "
            "the redo is a new round and the earlier one is kept."
        )
        parts["list"] = gr.Button("Refresh", size="sm", elem_id="designer_list")
        parts["listing_open"] = gr.State(False)
        parts["table"] = named_table(
            "Your submissions", "designer_table", headers=SUBMISSION_HEADERS, datatype="str", wrap=True
        )
        parts["gallery"] = gr.Gallery(
            label="Your colorings",
            columns=6,
            height=240,
            object_fit="contain",
            preview=False,
            elem_id="designer_gallery",
        )
        with gr.Row():
            parts["redo_id"] = id_field("Coloring id", "designer_redo_id")
            parts["redo"] = gr.Button("Redo this coloring", elem_id="designer_redo")
        parts["redo_note"] = note_area("designer_redo_note")
    return parts


def reference_example_files() -> list[tuple[str, str]]:
    """`reference_examples` as PNG files in Gradio's cache, (path, caption), encoded once per
    process: Gradio encodes an image given as an array at each app build, and as WebP by
    default, which blurred the examples' flat fills (76 colors) into some 8,000.

    A file found gone (a cleaner of temporary folders, on a server that runs for weeks) is
    written again.
    """
    files = _example_files()
    if not all(Path(path).is_file() for path, _ in files):
        _example_files.cache_clear()
        files = _example_files()
    return list(files)


@functools.cache
def _example_files() -> tuple[tuple[str, str], ...]:
    folder = get_upload_folder()  # Gradio's cache: a path in it is served as it is, not copied
    return tuple(
        (save_img_array_to_cache(image, cache_dir=folder, format="png"), caption)
        for image, caption in reference_examples()
    )


@functools.cache
def reference_examples() -> tuple[tuple[np.ndarray, str], ...]:
    """The colored reference examples (image, caption), drawn once per process: they come from
    shipped sketches and `EXAMPLES` alone, and each app build (every test's server) showed them."""
    sketches = {slug: load_sketch_png(SKETCH_DIR / f"{slug}.png") for slug, _, _ in EXAMPLES}
    examples = tuple(
        (work.colored_example(sketches[slug], fills), caption) for slug, caption, fills in EXAMPLES
    )
    for image, _ in examples:
        image.setflags(write=False)
    return examples


def _stage(ctx: AppContext, db, actor) -> str:
    """The designer's onboarding stage (`annotation.people.onboarding.STAGES`) under this config."""
    return onboarding.onboarding_stage(
        db,
        actor.annotator_id,
        auto_approve=ctx.config.auto_approve_practice,
        practice_count=len(ctx.config.practice_concepts),
    )


def _start_batch(ctx: AppContext, db, actor) -> None:
    """Reserve the designer's next batch; a batch opened meanwhile (another tab) is kept."""
    config = ctx.config
    with contextlib.suppress(Conflict):
        work.start_batch(
            db,
            actor.annotator_id,
            ctx.rng,
            config.batch_size,
            k=config.colorings_per_concept,
            minutes=config.reservation_minutes,
        )


def _top_up(ctx: AppContext, db, actor) -> None:
    """Keep `annotation.coloring.tasks.RESERVE_AHEAD` tasks of the current batch reserved."""
    config = ctx.config
    work.top_up(
        db,
        actor.annotator_id,
        ctx.rng,
        k=config.colorings_per_concept,
        minutes=config.reservation_minutes,
    )


def _header(item: work.WorkItem, progress: str) -> str:
    """The task header as HTML; every text from the database is escaped, and the expert's
    note is isolated in ``<bdi>`` so that a right-to-left note keeps its own punctuation."""
    concept = item.concept
    if concept["modifier_type"] == "original":
        meta = f"{escape(concept['category'])} · the {escape(concept['base'])} itself"
    else:
        meta = (
            f"{escape(concept['category'])} · {_MODIFIER[concept['modifier_type']]}: "
            f"<b>{escape(concept['modifier'])}</b> {escape(concept['base'])}"
        )
    kind = _KIND_LABEL[item.kind] if item.kind in ("recolor", "redo") else progress
    note = (
        f'<div class="dz-note">An expert asked you to color this concept again: <bdi>{escape(item.note)}</bdi></div>'
        if item.note
        else ""
    )
    rules = "".join(f"<li>{escape(rule)}</li>" for rule in RULES)
    return (
        f'<div class="dz-head"><div class="dz-progress">{escape(kind)}</div>'
        f'<h2 class="dz-concept" tabindex="-1">{escape(concept["key"])}</h2>'
        f'<div class="dz-meta">{meta}</div>{note}<ul class="dz-rules">{rules}</ul></div>'
    )
