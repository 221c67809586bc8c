"""The Admin tab: invites in bulk, annotators, practice approval, coverage, a pilot study."""

from __future__ import annotations

import inspect
import json

import gradio as gr
import numpy as np
import pandas as pd

from annotation import overview, pilot
from annotation.backup import backup_archive
from annotation.coloring import stability
from annotation.export import BackgroundExport, ExportFailed, ExportState
from annotation.files import resolve
from annotation.people import accounts, onboarding, throttle
from annotation.people.accounts import INVITABLE_ROLES, create_annotators, invite_url
from annotation.qc.readiness import readiness
from app import crowd as crowd_links
from app.common import (
    AppContext,
    empty_note,
    escape,
    handler,
    id_field,
    note_area,
    on_open,
    refusal_text,
    same_access,
    ui_only,
    whole_number,
    wire,
)
from app.guard import download_path
from storage import iso
from storage.spreadsheet import write_csv

NAME = "admin"
TITLE = "Admin"
ROLES = ("admin",)
INVITE_HEADERS = ["annotator_id", "pseudonym", "role", "invite_link"]
ANNOTATOR_HEADERS = [
    "annotator_id",
    "pseudonym",
    "roles",
    "design_background",
    "status",
    "created",
    "practice_approved",
    "sign_ins",
]
PENDING_HEADERS = ["annotator_id", "pseudonym", "practice_coloring_ids"]
FAILURE_HEADERS = ["time_utc", "address", "kind"]
_BACKGROUND = {"unknown": None, "yes": True, "no": False}
EXPORT_POLL_SECONDS = 1.0
EXPORT_STEPS = {
    "tables": "reading and writing the tables",
    "images": "copying the images",
    "archive": "zipping",
}


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Admin tab inside the current `gr.Tab`."""
    admin = handler(ctx, *ROLES)
    refresh = gr.Button("Refresh lists", elem_id="admin_refresh")
    refresh_note = note_area("admin_refresh_note")
    # The lists load when the tab is opened, and again on Refresh.
    loads = on_open(tab, refresh.click)
    invites = _invite_section(ctx, session_token, admin)
    _practice_section(ctx, session_token, admin, loads, refresh_note)
    # The people and the coverage also load when invite links were made.
    coverage = _people_section(
        ctx, session_token, admin, on_open(tab, refresh.click, invites.change), refresh_note
    )
    _pilot_section(ctx, session_token, admin, coverage)
    _stability_section(session_token, admin)
    crowd_links.build_summary(ctx, session_token, tab)
    gr.Markdown(
        "## Failed sign-ins\nThe latest wrong admin passwords and invite links, "
        "by address. An address that keeps failing waits longer before each try "
        f"(after {throttle.FREE_FAILURES} failures in {throttle.WINDOW_S / 60:.0f} "
        "minutes)."
    )
    with empty_note("No failed sign-in yet.", "admin_failed_sign_ins_empty"):
        failures = gr.Dataframe(headers=FAILURE_HEADERS, interactive=False, elem_id="admin_failed_sign_ins")
    wire(
        loads,
        admin(_failed_sign_ins),
        session_token,
        failures,
        note=refresh_note,
        api_name="admin_failed_sign_ins",
    )
    _export_section(ctx, session_token, admin, tab)
    gr.Markdown(
        "## Backup\nThe database and every file it names, with a manifest of hashes; "
        "safe while people work. Restore it with `python -m annotation restore DIR` "
        "(app stopped)."
    )
    make_backup = gr.Button("Build backup", elem_id="admin_backup")
    backup_note = note_area("admin_backup_note")
    backup_file = gr.File(label="Backup", interactive=False, elem_id="admin_backup_file")
    wire(
        make_backup.click,
        admin(_backup(ctx)),
        session_token,
        backup_file,
        note=backup_note,
        api_name="admin_backup",
    )


def _invite_section(ctx: AppContext, session_token: gr.Textbox, admin) -> gr.Dataframe:
    """Invites in bulk and a new link for one person; returns the table of new links."""
    gr.Markdown("## Invite people\nEach row is one person; send each their own link.")
    with gr.Row():
        role = gr.Dropdown(list(INVITABLE_ROLES), value="designer", label="Role", elem_id="admin_role")
        count = gr.Number(5, label="How many", elem_id="admin_count")
        background = gr.Radio(
            list(_BACKGROUND), value="unknown", label="Design/art background", elem_id="admin_background"
        )
        days = gr.Number(ctx.config.invite_days, label="Link valid for (days)", elem_id="admin_days")
    create = gr.Button("Create invite links", variant="primary", elem_id="admin_create")
    note = note_area("admin_create_note")
    with empty_note(
        "No links made yet in this visit: each batch's links show here once, as they are made.",
        "admin_invites_empty",
    ):
        invites = gr.Dataframe(headers=INVITE_HEADERS, interactive=False, wrap=True, elem_id="admin_invites")
    links_file = gr.File(
        label="These links as CSV (they cannot be shown again later)",
        interactive=False,
        elem_id="admin_invites_csv",
    )
    wire(
        create.click,
        admin(_create_invites(ctx)),
        [session_token, role, count, background, days],
        invites,
        note=note,
        api_name="admin_create_invites",
    ).then(admin(_invites_csv(ctx)), [session_token, invites], links_file, api_visibility="private")
    gr.Markdown("A lost link: make a new one for that person (their earlier links stop working).")
    with gr.Row():
        lost = id_field("Annotator id", "admin_lost")
        renew = gr.Button("New invite link", elem_id="admin_new_link")
    renew_note = note_area("admin_new_link_note")
    renewed = gr.Markdown(elem_id="admin_new_link_message")
    # The earlier link goes first, so a refusal never sits beside another person's link.
    cleared = renew.click(ui_only(lambda: ""), None, renewed, api_visibility="private", queue=False)
    wire(
        cleared.then,
        admin(_new_link(ctx)),
        [session_token, lost, days],
        renewed,
        note=renew_note,
        api_name="admin_new_invite",
    )
    return invites


def _practice_section(
    ctx: AppContext, session_token: gr.Textbox, admin, loads, refresh_note: gr.Markdown
) -> None:
    gr.Markdown("## Practice colorings waiting for approval")
    with empty_note(
        "Nobody is waiting: designers' practice colorings show here once they have done them.",
        "admin_pending_empty",
    ):
        pending = gr.Dataframe(headers=PENDING_HEADERS, interactive=False, elem_id="admin_pending")
    gallery = gr.Gallery(label="Practice colorings", columns=6, elem_id="admin_gallery")
    with gr.Row():
        reviewed = id_field("Annotator id", "admin_reviewed")
        decision = gr.Radio(["approve", "redo"], value="approve", label="Decision", elem_id="admin_decision")
        why = gr.Textbox(label="Note to keep (why)", elem_id="admin_why")
    review = gr.Button("Record decision", elem_id="admin_review")
    message = gr.Markdown(elem_id="admin_review_message")
    wire(
        loads,
        admin(_practice_pending(ctx)),
        session_token,
        [pending, gallery],
        note=refresh_note,
        api_name="admin_practice_pending",
    )
    wire(
        review.click,
        admin(_review_practice),
        [session_token, reviewed, decision, why],
        message,
        note=message,
        api_name="admin_review_practice",
    )


def _people_section(
    ctx: AppContext, session_token: gr.Textbox, admin, loads, refresh_note: gr.Markdown
) -> gr.Markdown:
    """The annotators, closing an account, and the coverage (returned)."""
    gr.Markdown("## People and progress")
    coverage = gr.Markdown(elem_id="admin_coverage")
    with empty_note("Nobody is invited yet: create invite links above.", "admin_annotators_empty"):
        annotators = gr.Dataframe(headers=ANNOTATOR_HEADERS, interactive=False, elem_id="admin_annotators")
    with gr.Row():
        revoked = id_field("Annotator id to close", "admin_revoked")
        revoke_why = gr.Textbox(label="Why", elem_id="admin_revoke_why")
        revoke = gr.Button("Close account", variant="stop", elem_id="admin_revoke")
    message = gr.Markdown(elem_id="admin_revoke_message")
    wire(
        loads,
        admin(_list_annotators),
        session_token,
        annotators,
        note=refresh_note,
        api_name="admin_list_annotators",
    )
    wire(
        loads,
        admin(_coverage(ctx)),
        session_token,
        coverage,
        note=refresh_note,
        api_name="admin_coverage",
    )
    wire(
        revoke.click,
        admin(_revoke),
        [session_token, revoked, revoke_why],
        message,
        note=message,
        api_name="admin_revoke",
    )
    return coverage


def _create_invites(ctx: AppContext):
    def create_invites(db, actor, role: str, count: float, background: str, days: float) -> list[list]:
        """Create `count` annotators of `role`; one invite link each."""
        if background not in _BACKGROUND:
            raise ValueError(f"`background` must be one of {list(_BACKGROUND)}, got {background!r}")
        n = whole_number(count, "count")
        if not 1 <= n <= accounts.MAX_BULK:
            raise ValueError(f"`count` must be from 1 to {accounts.MAX_BULK}, got {n}")
        rows = create_annotators(
            db,
            n,
            role,
            design_background=_BACKGROUND[background],
            expires_days=float(days or ctx.config.invite_days),
            created_by=actor.pseudonym,
        )
        return [
            [a["id"], a["pseudonym"], role, invite_url(ctx.config.public_url, token)] for a, token in rows
        ]

    return create_invites


def _invites_csv(ctx: AppContext):
    def invites_csv(db, actor, table) -> str | None:
        """The invite table just shown, as a CSV file to keep (tokens are stored only
        hashed), under the admin's downloads (`app.guard.download_path`)."""
        frame = (
            table
            if isinstance(table, pd.DataFrame)
            else pd.DataFrame((table or {}).get("data", []), columns=INVITE_HEADERS)
        )
        if frame.empty or "invite_link" not in frame or not frame["invite_link"].astype(str).str.len().any():
            return None
        stamp = iso().replace(":", "").replace("-", "")[:15]
        return str(
            write_csv(
                frame, download_path(ctx.config.data_dir, "invites", f"invites-{stamp}.csv"), index=False
            )
        )

    return invites_csv


def _new_link(ctx: AppContext):
    def new_link(db, actor, annotator_id: str, days: float) -> str:
        """A new invite link for an existing person; their earlier links are revoked."""
        annotator_id = whole_number(annotator_id, "annotator id")
        token = accounts.new_invite(
            db, annotator_id, expires_days=float(days or ctx.config.invite_days), created_by=actor.pseudonym
        )
        link = invite_url(ctx.config.public_url, token)
        return f"New link for annotator {annotator_id} (copy it now: it is shown once): `{escape(link)}`"

    return new_link


def _failed_sign_ins(db, actor) -> list[list]:
    """The latest failed sign-ins, newest first."""
    return [[r["created"], r["address"], r["kind"]] for r in throttle.recent_failures(db)]


def _list_annotators(db, actor) -> list[list]:
    """Every annotator with their roles, status and number of sign-ins."""
    return [
        [
            r["id"],
            r["pseudonym"],
            ", ".join(json.loads(r["roles"])),
            {None: "unknown", 1: "yes", 0: "no"}[r["design_background"]],
            r["status"],
            r["created"],
            r["practice_approved"] or "",
            r["sign_ins"],
        ]
        for r in accounts.list_annotators(db)
    ]


def _practice_pending(ctx: AppContext):
    def practice_pending(db, actor) -> tuple[list[list], list[tuple[str, str]]]:
        """Designers waiting for approval, and their practice colorings as a gallery."""
        waiting = onboarding.awaiting_approval(db)
        table = [[a["id"], a["pseudonym"], " ".join(str(c["id"]) for c in a["colorings"])] for a in waiting]
        images = [
            (str(resolve(ctx.config.data_dir, c["image_path"])), f"{a['pseudonym']}: {c['concept_key']}")
            for a in waiting
            for c in a["colorings"]
        ]
        return table, images

    return practice_pending


def _review_practice(db, actor, annotator_id: float, decision: str, why: str) -> str:
    """Approve a designer's practice colorings, or ask for them again."""
    if decision not in ("approve", "redo"):
        raise ValueError(f"`decision` must be 'approve' or 'redo', got {decision!r}")
    annotator_id = whole_number(annotator_id, "annotator id")
    onboarding.review_practice(db, annotator_id, actor, decision == "approve", why or "")
    return f"Recorded: {decision} for annotator {annotator_id}."


def _revoke(db, actor, annotator_id: float, why: str) -> str:
    """Close an annotator's account (their data stays)."""
    if not (why or "").strip():
        raise ValueError("`why` must say why the account is closed; got an empty text")
    annotator_id = whole_number(annotator_id, "annotator id")
    accounts.revoke_annotator(db, annotator_id, actor, why)
    return f"Closed the account of annotator {annotator_id}."


def _coverage(ctx: AppContext):
    def coverage(db, actor) -> str:
        """Concept coverage under the assignment mode's rule and people per role, as Markdown."""
        k = ctx.config.colorings_per_concept
        figures = overview.coverage(db, k)
        top = max(figures["histogram"])
        histogram = ", ".join(f"{n}{'+' if n == top else ''}: {m}" for n, m in figures["histogram"].items())
        adaptive = figures["adaptive"]
        head = (
            f"**{figures['complete']} of {figures['concepts']}** concepts are complete"
            if adaptive
            else f"**{figures['complete']} of {figures['concepts']}** concepts have {k} colorings"
        )
        return "\n".join(
            [
                f"{head}; **{figures['needing']:,}** need designers.",
                f"- {escape(figures['rule'])}",
                "- Concepts by state: " + _counts(figures["states"]),
                f"- Concepts by number of colorings: {histogram}",
                "- Coloring slots of the main task ({quota} per concept with a chosen sketch): "
                "{total:,} in all, **{free:,} free**, {reserved:,} reserved by designers now, "
                "{done:,} done".format(quota="the mode's quota" if adaptive else k, **figures["slots"]),
                "- Colorings by status: " + _statuses(figures),
                "- Active people by role: " + _counts(figures["annotators_by_role"]),
                f"- {_pilot_line(db)}",
                "",
                "**What expert review waits for:**",
                *(f"- {escape(line)}" for line in readiness(db).lines()),
            ]
        )

    return coverage


def _statuses(figures: dict) -> str:
    """Main-task colorings by status, saying that practice colorings are not counted."""
    text = _counts(figures["colorings_by_status"])
    practice = figures["practice_colorings"]
    if not practice:
        return text
    noun = "coloring is" if practice == 1 else "colorings are"
    head, _, rest = text.partition(" submitted")
    return f"{head} submitted ({practice:,} practice {noun} not counted){rest}"


def _counts(counts: dict) -> str:
    """``{"submitted": 3, "accepted": 0}`` as "3 submitted, 0 accepted" (or "none yet")."""
    return (
        ", ".join(f"{n:,} {escape(str(name).replace('_', ' '))}" for name, n in counts.items()) or "none yet"
    )


def _backup(ctx: AppContext):
    def make_backup(db, actor) -> str:
        """Build a backup zip among the admin's downloads and offer it for download."""
        stamp = iso().replace(":", "").replace("-", "")[:15]
        target = download_path(ctx.config.data_dir, "backups", f"colorconcept-backup-{stamp}.zip")
        return str(backup_archive(db, ctx.config.data_dir, target))

    return make_backup


# --- Export: built in the background, the page polls (issue 28) -------------------------


def _export_section(ctx: AppContext, session_token: gr.Textbox, admin, tab: gr.Tab) -> None:
    """*Build export* starts `annotation.export.BackgroundExport` and returns at once; a timer
    polls it while it runs (and once when the tab opens), showing the progress and then the
    zip. ``/admin_export_start`` (its option: the crowd participants' external ids, off
    unless asked for) and ``/admin_export_poll`` are the API's twins; ``/admin_export``
    starts one without external ids and answers with the zip once it is built."""
    jobs = BackgroundExport(ctx.db, ctx.config.data_dir)
    gr.Markdown("## Export\nCSV and Parquet of every table and a zip of the images, in one file.")
    external_ids = gr.Checkbox(
        False,
        label="Include the crowd participants' external ids (Prolific ids: personal data, docs/security.md)",
        elem_id="admin_export_external_ids",
    )
    export = gr.Button("Build export", elem_id="admin_export")
    export_note = note_area("admin_export_note")
    status = gr.Markdown(elem_id="admin_export_status")
    export_file = gr.File(label="Export", interactive=False, elem_id="admin_export_file")
    timer = gr.Timer(EXPORT_POLL_SECONDS, active=False)
    wire(
        export.click,
        admin(_export_start(jobs)),
        [session_token, external_ids],
        [status, export_file],
        note=export_note,
        api_name="admin_export_start",
    ).then(_export_polling, None, timer, api_visibility="private")
    state = admin(_export_state(jobs))
    timer.tick(
        _export_tick(state),
        session_token,
        [status, export_file, timer, export_note],
        api_visibility="private",
    )
    tab.select(_export_polling, None, timer, api_visibility="private")
    wire(
        gr.Button(visible=False, elem_id="admin_export_poll").click,
        admin(_export_poll(jobs)),
        session_token,
        [status, export_file],
        note=export_note,
        clear_note=False,
        api_name="admin_export_poll",
    )
    gr.Button(visible=False, elem_id="api_admin_export").click(
        admin(_export_waited(jobs)), session_token, export_file, api_name="admin_export"
    )


def _export_start(jobs: BackgroundExport):
    def export_start(db, actor, external_ids: bool = False) -> tuple[str, None]:
        """Start building the export zip in the background (one at a time); returns at once
        with a line on it (and clears the file shown). ``external_ids`` (default false) adds
        the crowd participants' platform ids as the table ``crowd_external_ids``; only
        ``true`` does (personal data: nothing else, "yes" or 1 included, asks for them)."""
        return _export_line(jobs.start(now=iso(), external_ids=external_ids is True)), None

    return export_start


def _export_state(jobs: BackgroundExport):
    def export_state(db, actor) -> ExportState:
        """Where the export stands (for the page's poll)."""
        return jobs.state()

    return export_state


def _export_poll(jobs: BackgroundExport):
    def export_poll(db, actor) -> tuple[str, str | None]:
        """Where the export stands, and its zip once it is built."""
        return _export_outputs(jobs.state())

    return export_poll


def _export_waited(jobs: BackgroundExport):
    def export(db, actor) -> str:
        """Build the export zip in the background and answer with it once it is built."""
        jobs.start(now=iso())
        state = jobs.wait()
        if state.archive is None:
            raise ExportFailed(state.error or "the export did not finish")
        return str(state.archive)

    return export


def _export_tick(state_of):
    def export_tick(session_token: str) -> tuple:
        """The timer's poll: the line and, once built, the zip. The timer stops once nothing
        runs, and on a refusal (its message goes beside the button): never an error sheet."""
        try:
            state = state_of(session_token)
        except gr.Error as error:
            return gr.skip(), gr.skip(), gr.Timer(active=False), refusal_text(error.message)
        line, archive = _export_outputs(state)
        if state.running:
            return line, gr.skip(), gr.Timer(active=True), gr.skip()
        return line, archive, gr.Timer(active=False), ""

    return same_access(export_tick, state_of)


@ui_only
def _export_polling() -> gr.Timer:
    """Poll the export (after *Build export* and when the tab opens); the poll stops itself."""
    return gr.Timer(active=True)


def _export_outputs(state: ExportState) -> tuple[str, str | None]:
    """A line on where the export stands (Markdown), and its zip once built."""
    return _export_line(state), None if state.archive is None else str(state.archive)


def _export_line(state: ExportState) -> str:
    if state.status == "running":
        step = EXPORT_STEPS.get(state.step, "starting")
        return f"Building the export (started {state.started}): {step}, about {state.fraction:.0%} done."
    if state.status == "done":
        holds = " It holds the crowd participants' external ids." if state.external_ids else ""
        return f"The export started {state.started} is ready below.{holds}"
    if state.status == "failed":
        return refusal_text(escape(f"The export started {state.started} failed: {state.error}"))
    return ""


# --- P_H stability and the assignment mode (issue 19, item 4) ---------------------------


def _stability_section(session_token: gr.Textbox, admin) -> None:
    gr.Markdown(
        "## P_H stability and assignment mode\nHow much each concept's designers' P_H moves when "
        "its colorings are resampled. The fixed mode (the paper's protocol) is the default; the "
        "adaptive mode gives unstable concepts more designers, up to a cap."
    )
    with gr.Row():
        mode = gr.Radio(["fixed", "adaptive"], value="fixed", label="Assignment mode", elem_id="admin_mode")
        min_k = gr.Textbox(
            str(stability.Mode().min_k), label="Designers first (min K)", elem_id="admin_min_k"
        )
        cap = gr.Textbox(str(stability.Mode().cap), label="Most designers (cap)", elem_id="admin_cap")
        threshold = gr.Textbox(
            str(stability.DEFAULT_THRESHOLD), label="Unstable above (ΔE)", elem_id="admin_threshold"
        )
    with gr.Row():
        save = gr.Button("Save mode", elem_id="admin_save_mode")
        show = gr.Button("Show stability", elem_id="admin_stability")
    note = note_area("admin_stability_note")
    summary = gr.Markdown(elem_id="admin_stability_summary")
    histogram = gr.Plot(label="Concepts by P_H stability", elem_id="admin_stability_histogram")
    with empty_note("Nothing yet: press *Show stability*.", "admin_stability_table_empty"):
        table = gr.Dataframe(interactive=False, elem_id="admin_stability_table")
    wire(
        save.click,
        admin(_set_mode),
        [session_token, mode, min_k, cap, threshold],
        note,
        note=note,
        api_name="admin_set_mode",
    )
    wire(
        show.click,
        admin(_stability),
        session_token,
        [summary, histogram, table],
        note=note,
        api_name="admin_stability",
    )


def _set_mode(db, actor, mode: str, min_k: str, cap: str, threshold: str) -> str:
    """Store the assignment mode; returns it in words."""
    try:
        limit = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"`Unstable above (ΔE)` must be a number, got {threshold!r}") from None
    chosen = stability.Mode(
        adaptive=mode == "adaptive",
        min_k=whole_number(min_k, "Designers first (min K)"),
        cap=whole_number(cap, "Most designers (cap)"),
        threshold=limit,
    )
    stability.set_mode(db, chosen, actor=actor.pseudonym)
    return f"Saved. {escape(chosen.describe())}."


def _stability(db, actor):
    """The summary, the histogram and the per-concept table."""
    view = stability.stability_view(db)
    return escape(view.text), view.figure, view.table


# --- A pilot study (issue 26) -------------------------------------------------------------


def _pilot_section(ctx: AppContext, session_token: gr.Textbox, admin, coverage: gr.Markdown) -> None:
    gr.Markdown(
        "## Pilot study\nA few concepts that every designer is handed before any other, so "
        f"designers overlap: k designers give each pilot concept k colorings, and expert review "
        f"opens after a handful of colorings. Pick {pilot.MIN_SIZE} to {pilot.MAX_SIZE} concepts "
        f"({pilot.SUGGESTED[0]}-{pilot.SUGGESTED[1]} suggested) by name, or draw them at random. "
        "Without a pilot (the default) designers get the least covered concepts of the whole "
        "study first; ending the pilot returns to that order."
    )
    names = gr.Textbox(
        label="Pilot concepts (names, one per line or separated by commas)",
        lines=2,
        elem_id="admin_pilot_concepts",
    )
    with gr.Row():
        size = gr.Number(pilot.SUGGESTED[0], label="Or draw this many at random", elem_id="admin_pilot_size")
        seed = gr.Number(0, label="Seed of the draw", elem_id="admin_pilot_seed")
    with gr.Row():
        picked = gr.Button("Set pilot from these names", elem_id="admin_pilot_set")
        drawn = gr.Button("Draw a pilot", elem_id="admin_pilot_draw")
        ended = gr.Button("End pilot", variant="stop", elem_id="admin_pilot_end")
    # The message and the coverage, which names the pilot's concepts and what they still need.
    outputs = [gr.Markdown(elem_id="admin_pilot_message"), coverage]
    for button, fn, inputs, api_name in (
        (picked, _set_pilot, [session_token, names], "admin_set_pilot"),
        (drawn, _draw_pilot, [session_token, size, seed], "admin_draw_pilot"),
        (ended, _end_pilot, [session_token], "admin_end_pilot"),
    ):
        wire(
            button.click, admin(_with_coverage(ctx, fn)), inputs, outputs, note=outputs[0], api_name=api_name
        )


def _with_coverage(ctx: AppContext, fn):
    """`fn`'s message, and the coverage read after it."""

    def changed(db, actor, *inputs) -> tuple[str, str]:
        return fn(db, actor, *inputs), _coverage(ctx)(db, actor)

    changed.__name__, changed.__doc__ = fn.__name__, fn.__doc__
    changed.__signature__ = inspect.signature(fn)
    return changed


def _set_pilot(db, actor, names: str) -> str:
    """Make the concepts named (one per line or comma-separated) the pilot."""
    keys = [key for line in (names or "").splitlines() for key in line.split(",")]
    chosen = pilot.set_pilot(db, keys, actor=actor.pseudonym)
    return f"Pilot set: {_named(chosen)}."


def _draw_pilot(db, actor, size: float, seed: float) -> str:
    """Draw a pilot of `size` concepts at random (the same `seed` draws the same ones)."""
    n = whole_number(size, "Or draw this many at random")
    rng = np.random.default_rng(whole_number(seed, "Seed of the draw"))
    return f"Pilot drawn: {_named(pilot.draw_pilot(db, n, rng, actor=actor.pseudonym))}."


def _end_pilot(db, actor) -> str:
    """End the pilot: designers get the least covered concepts of the whole study first."""
    n = pilot.clear_pilot(db, actor=actor.pseudonym)
    ended = f"The pilot of {n} concepts ended" if n else "No pilot was set"
    return f"{ended}: designers get the least covered concepts of the whole study first."


def _pilot_line(db) -> str:
    """The pilot in the coverage, as one Markdown line."""
    keys = pilot.read_pilot(db)
    if not keys:
        return "No pilot: designers get the least covered concepts of the whole study first."
    return f"Pilot: designers get these {len(keys)} concepts before any other: {_named(keys)}."


def _named(keys: list[str]) -> str:
    return ", ".join(f"“{escape(key)}”" for key in keys)
