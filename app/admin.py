"""The Admin tab: invites in bulk, annotators, practice approval, coverage, a pilot study.

The tab is an `AdminTab` (the shape of `app.tabs`): its handlers are methods marked
`app.common.role` (the admin alone) that return ``{part: update}``; `EVENTS` is the tab's
wiring. Two events it cannot express are registered by hand in `AdminTab.wire`: clearing
the new-link message off the queue before ``/admin_new_invite`` runs, and
``/admin_export``, an endpoint for API clients alone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
from collections.abc import Iterator
from pathlib import Path

import gradio as gr
import numpy as np
import pandas as pd

from annotation import overview, pilot
from annotation.backup import backup_archive
from annotation.coloring import stability
from annotation.coloring.tasks import RESERVE_AHEAD
from annotation.coloring.withdrawal import withdraw_colorings
from annotation.errors import InvalidInput, NotFound, blank, check_length
from annotation.export import BackgroundExport, ExportFailed, ExportState, export_archive
from annotation.files import resolve
from annotation.people import accounts, onboarding, throttle
from annotation.people.accounts import INVITABLE_ROLES, create_annotators, invite_url
from annotation.qc.readiness import readiness
from annotation.qc.review import MIN_COLORINGS_SETTING, review_min_colorings
from annotation.study.design import studies_holding
from app import crowd as crowd_links
from app.common import (
    AppContext,
    api_button,
    empty_note,
    escape,
    id_field,
    link_days,
    live,
    named_table,
    note_area,
    refusal_text,
    role,
    same_access,
    seed_number,
    ui_only,
    whole_number,
    wire,
)
from app.guard import download_path, new_download
from app.tabs import On, Tab
from storage import file_stamp, iso, shown_time, utcnow
from storage.schema import UPGRADE_APPROVER
from storage.settings import read_setting
from storage.shown import counted, in_words, shown
from storage.spreadsheet import number_cell, write_csv

NAME = "admin"
TITLE = "Admin"
ROLES = ("admin",)
DAYS_LABEL = "Link valid for (days)"
INVITE_HEADERS = ["annotator_id", "pseudonym", "role", "invite_link", "expires"]
ANNOTATOR_HEADERS = [
    "annotator_id",
    "pseudonym",
    "roles",
    "design_background",
    "status",
    "created",
    "practice_approved",
    "sign_ins",
    "work_done",
    "last_active",
]
PENDING_HEADERS = ["annotator_id", "pseudonym", "practice_coloring_ids"]
PERSON_ID = "Annotator id or pseudonym (close, reopen or withdraw)"
"""The label of the person *Close account*, *Reopen account* and *Withdraw their colorings* take."""
ONE_PERSON = "Annotator id or pseudonym"
"""The label of the person a *New invite link* or a practice decision is for."""
FAILURE_HEADERS = ["time_utc", "address", "kind"]
_BACKGROUND = {"unknown": None, "yes": True, "no": False}
EXPORT_POLL_SECONDS = 1.0
EXPORT_STEPS = {
    "tables": "reading and writing the tables",
    "images": "copying the images",
    "archive": "zipping",
}

PILOT_NAMES_LABEL = "Pilot concepts (names, one per line or separated by commas)"


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the Admin tab inside the current `gr.Tab`."""
    AdminTab(ctx, {"session_token": session_token, "tab": tab, **_layout(ctx, session_token, tab)}).wire()


_TOKEN = ("session_token",)
# The lists load when the tab is opened, and again on Refresh; the people and the
# coverage also when invite links were made.
_OPENED = ("tab.select", "refresh.click")
_OPENED_OR_INVITED = (*_OPENED, "invites.change")
# And after an account is closed, reopened or its colorings withdrawn (the table still said
# "active", the coverage counted the withdrawn colorings, until *Refresh lists*: outside probe
# 232); the message is what each of those presses sets.
_PEOPLE_CHANGED = (*_OPENED_OR_INVITED, "revoke_message.change")
PILOT = ("pilot_message", "coverage")
"""A pilot action's outputs: its message, and the coverage, which names the pilot's concepts
and what they still need."""
EXPORT = ("export_status", "export_file")
"""Where the export stands (a line) and its zip once built (`_export_outputs`)."""
EVENTS = (
    On(
        "create.click",
        "create_invites",
        (*_TOKEN, "role", "count", "background", "days"),
        ("invites",),
        "create_note",
        "admin_create_invites",
    ),
    # When a batch is shown, not after every click: a refused one (How many 0) wrote the
    # batch before's links to disk again (outside probe 123). Its refusal (a session ended
    # meanwhile) goes beside the button, as the step's before.
    On(
        "invites.change",
        "invites_csv",
        (*_TOKEN, "invites"),
        ("links_file",),
        "create_note",
        clear_note=False,
    ),
    On(_OPENED, "practice_pending", _TOKEN, ("pending", "gallery"), "refresh_note", "admin_practice_pending"),
    On(
        "review.click",
        "review_practice",
        (*_TOKEN, "reviewed", "decision", "why"),
        ("review_message", "pending", "gallery", "annotators"),
        "review_message",
        "admin_review_practice",
    ),
    On(
        _PEOPLE_CHANGED,
        "list_annotators",
        _TOKEN,
        ("annotators",),
        "refresh_note",
        "admin_list_annotators",
    ),
    On(_PEOPLE_CHANGED, "coverage", _TOKEN, ("coverage",), "refresh_note", "admin_coverage"),
    On(
        "revoke.click",
        "revoke",
        (*_TOKEN, "revoked", "revoke_why"),
        ("revoke_message",),
        "revoke_message",
        "admin_revoke",
    ),
    On(
        "reopen.click",
        "reopen",
        (*_TOKEN, "revoked", "revoke_why"),
        ("revoke_message",),
        "revoke_message",
        "admin_reopen",
    ),
    On(
        "withdraw.click",
        "withdraw",
        (*_TOKEN, "revoked", "revoke_why"),
        ("revoke_message",),
        "revoke_message",
        "admin_withdraw",
    ),
    On("pilot_set.click", "set_pilot", (*_TOKEN, "pilot_names"), PILOT, "pilot_message", "admin_set_pilot"),
    On(
        "pilot_draw.click",
        "draw_pilot",
        (*_TOKEN, "pilot_size", "pilot_seed"),
        PILOT,
        "pilot_message",
        "admin_draw_pilot",
    ),
    On("pilot_end.click", "end_pilot", _TOKEN, PILOT, "pilot_message", "admin_end_pilot"),
    On(
        "save_mode.click",
        "set_mode",
        (*_TOKEN, "mode", "min_k", "cap", "threshold"),
        ("stability_note",),
        "stability_note",
        "admin_set_mode",
    ),
    # The form shows the stored mode, so that *Save mode* after a reload keeps it (it showed
    # the fixed mode's defaults, and saving them put a study back to fixed: outside probe 136).
    On(
        _OPENED,
        "stored_mode",
        _TOKEN,
        ("mode", "min_k", "cap", "threshold"),
        "refresh_note",
        "admin_stored_mode",
    ),
    On(
        "show_stability.click",
        "stability",
        _TOKEN,
        ("stability_summary", "stability_histogram", "stability_table"),
        "stability_note",
        "admin_stability",
    ),
    On(_OPENED, "failed_sign_ins", _TOKEN, ("failures",), "refresh_note", "admin_failed_sign_ins"),
    # *Build export* returns at once; a timer polls while it runs (and once when the tab
    # opens), and stops itself.
    On(
        "export.click", "export_start", (*_TOKEN, "external_ids"), EXPORT, "export_note", "admin_export_start"
    ),
    On("then", "export_polling", (), ("timer",)),
    On("timer.tick", "export_tick", _TOKEN, (*EXPORT, "timer", "export_note"), "export_note"),
    On("tab.select", "export_polling", (), ("timer",)),
    # A hidden trigger: the page polls by the timer; this is the API's twin of the poll.
    On(
        "export_poll.click",
        "export_poll",
        _TOKEN,
        EXPORT,
        "export_note",
        "admin_export_poll",
        clear_note=False,
    ),
    On("backup.click", "backup", _TOKEN, ("backup_file",), "backup_note", "admin_backup"),
)
"""The tab's wiring, in the order Gradio registers it (`AdminTab.wire`, which adds two
events by hand)."""


class AdminTab(Tab):
    """The Admin tab of one app: its parts by name, and the handlers `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`), ``session_token`` and ``tab``.
    """

    EVENTS = EVENTS

    def __init__(self, ctx: AppContext, parts: dict) -> None:
        super().__init__(ctx, parts)
        data_dir = ctx.config.data_dir
        # Among the admin's downloads (served to the admin alone), not in exports/, which
        # researchers read: the zip holds every table, and platform ids when asked.
        self.exports = BackgroundExport(
            ctx.db,
            data_dir,
            target=lambda now: download_path(
                data_dir, "exports", f"colorconcept-export-{file_stamp(now)}.zip"
            ),
            build=_private_export,
        )

    def wire(self) -> None:
        """Register `EVENTS` with Gradio, then two events an `On` row cannot express."""
        super().wire()
        parts = self.parts
        # The earlier link goes first (off the queue: `On` has no ``queue``), so a refusal
        # never sits beside another person's link; then the new link, page event and twin.
        cleared = parts["renew"].click(
            self.clear_new_link, None, parts["renewed"], api_visibility="private", queue=False
        )
        wire(
            cleared.then,
            self.new_link,
            [parts[name] for name in (*_TOKEN, "lost", "days")],
            parts["renewed"],
            note=parts["renew_note"],
            api_name="admin_new_invite",
        )
        # An endpoint for API clients alone, not a twin of a page event: it starts an export
        # and answers with the zip. `On("api", ...)` (`gradio.api`) would describe it from
        # the method's type hints instead of its components, changing its API description.
        api_button("admin_export").click(
            self.export, parts["session_token"], parts["export_file"], api_name="admin_export"
        )

    # --- Invites ---------------------------------------------------------------------------

    @role(*ROLES)
    def create_invites(self, db, actor, role: str, count: float, background: str, days: float) -> dict:
        """Create `count` annotators of `role`; one invite link each."""
        if background not in _BACKGROUND:
            raise ValueError(f"`background` must be one of {list(_BACKGROUND)}, got {shown(background)}")
        n = whole_number(count, "How many")
        if not 1 <= n <= accounts.MAX_BULK:
            raise ValueError(f"`How many` must be from 1 to {accounts.MAX_BULK}, got {n}")
        config, days, now = self.ctx.config, link_days(days, DAYS_LABEL), utcnow()
        rows = create_annotators(
            db,
            n,
            role,
            design_background=_BACKGROUND[background],
            expires_days=days,
            created_by=actor.pseudonym,
            now=now,
        )
        expires = shown_time(now + dt.timedelta(days=days))
        return self.named(
            invites=[
                [a["id"], a["pseudonym"], role, invite_url(config.public_url, token), expires]
                for a, token in rows
            ]
        )

    @role(*ROLES)
    def invites_csv(self, db, actor, table) -> dict:
        """The invite table just shown, as a CSV file to keep (tokens are stored only
        hashed), under the admin's downloads (`app.guard.new_download`)."""
        frame = (
            table
            if isinstance(table, pd.DataFrame)
            else pd.DataFrame((table or {}).get("data", []), columns=INVITE_HEADERS)
        )
        if frame.empty or "invite_link" not in frame or not frame["invite_link"].astype(str).str.len().any():
            return self.named(links_file=None)
        stamp = file_stamp()
        with new_download(self.ctx.config.data_dir, "invites", f"invites-{stamp}.csv") as path:
            written = write_csv(frame, path, index=False)
            written.chmod(0o600)
        return self.named(links_file=str(written))

    @ui_only
    def clear_new_link(self) -> dict:
        """The new-link message emptied, before a new link is made."""
        return self.named(renewed="")

    @role(*ROLES)
    def new_link(self, db, actor, annotator_id: str, days: float) -> dict:
        """A new invite link for an existing person; their earlier links are revoked."""
        annotator_id = _person(db, annotator_id, ONE_PERSON)
        config, days, now = self.ctx.config, link_days(days, DAYS_LABEL), utcnow()
        token = accounts.new_invite(db, annotator_id, expires_days=days, created_by=actor.pseudonym, now=now)
        link = invite_url(config.public_url, token)
        return self.named(
            renewed=f"New link for {_who(db, annotator_id)}, valid until "
            f"{shown_time(now + dt.timedelta(days=days))} (copy it now: it is shown once): `{escape(link)}`"
        )

    # --- Practice, people, coverage ---------------------------------------------------------

    @role(*ROLES)
    def practice_pending(self, db, actor) -> dict:
        """Designers waiting for approval, and their practice colorings as a gallery."""
        return self.named(**self._pending(db))

    def _pending(self, db) -> dict:
        waiting = onboarding.awaiting_approval(db)
        table = [[a["id"], a["pseudonym"], " ".join(str(c["id"]) for c in a["colorings"])] for a in waiting]
        images = [
            (str(resolve(self.ctx.config.data_dir, c["image_path"])), f"{a['pseudonym']}: {c['concept_key']}")
            for a in waiting
            for c in a["colorings"]
        ]
        return {"pending": table, "gallery": images}

    @role(*ROLES)
    def review_practice(self, db, actor, annotator_id: float, decision: str, why: str) -> dict:
        """Approve a designer's practice colorings, or ask for them again; the waiting list
        and the people table show the decision at once."""
        if decision not in ("approve", "redo"):
            raise ValueError(f"`decision` must be 'approve' or 'redo', got {shown(decision)}")
        annotator_id = _person(db, annotator_id, ONE_PERSON)
        released = onboarding.review_practice(db, annotator_id, actor, decision == "approve", why or "")
        gave_back = (
            f" The {counted(released, 'main-task place')} they held {'was' if released == 1 else 'were'} "
            "given back to the pool."
            if released
            else ""
        )
        return self.named(
            review_message=f"Recorded: {decision} for {_who(db, annotator_id)}.{gave_back}",
            annotators=_annotator_rows(db),
            **self._pending(db),
        )

    @role(*ROLES)
    def list_annotators(self, db, actor) -> dict:
        """Every annotator with their roles, status and number of sign-ins."""
        return self.named(annotators=_annotator_rows(db))

    @role(*ROLES)
    def coverage(self, db, actor) -> dict:
        """Concept coverage under the assignment mode's rule and people per role, as Markdown."""
        return self.named(coverage=coverage_markdown(db, self.ctx.config.colorings_per_concept))

    @role(*ROLES)
    def revoke(self, db, actor, annotator_id: float, why: str) -> dict:
        """Close an annotator's account (their data stays)."""
        if blank(why or ""):
            raise ValueError("`why` must say why the account is closed; got an empty text")
        annotator_id = _person(db, annotator_id)
        accounts.revoke_annotator(db, annotator_id, actor, why)
        return self.named(revoke_message=f"Closed the account of {_who(db, annotator_id)}.")

    @role(*ROLES)
    def reopen(self, db, actor, annotator_id: float, why: str) -> dict:
        """Reopen a closed account (closed by mistake, or back after a break); the person
        signs in with a new invite link."""
        annotator_id = _person(db, annotator_id)
        accounts.reopen_annotator(db, annotator_id, actor, why)
        return self.named(
            revoke_message=f"Reopened the account of {_who(db, annotator_id)}: give them a *New invite "
            "link* (their earlier links stay revoked)."
        )

    @role(*ROLES)
    def withdraw(self, db, actor, annotator_id: float, why: str) -> dict:
        """Withdraw every coloring of an annotator from the data set (their request, as the
        consent text promises): no ground truth, leaderboard or new study counts them from now
        on (experts' votes already cast on their decided reviews stay in the agreement statistics)."""
        annotator_id = _person(db, annotator_id)
        done = withdraw_colorings(db, annotator_id, actor, why)
        reviews = f", {counted(done.reviews, 'open review')} closed" if done.reviews else ""
        # A closed review's votes count nowhere: the statistics take reviews with all their votes.
        closed = ", except those on the open reviews closed" if done.reviews else ""
        if done.redos:
            reviews += f", {counted(done.redos, 'recolor or redo task')} they held ended"
        if done.held:
            reviews += f", {counted(done.held, 'concept')} they held given back (a Submit of one says why)"
        kept = studies_holding(db, done.ids)
        named = "; ".join(
            f"Study {s['id']} ({escape(s['name'])}, {'open' if s['frozen'] else 'a draft'})" for s in kept
        )
        studies = (
            ""
            if not kept
            else f" {named} keeps the ground truth it was made with, which counts them (its trials no longer "
            "show their pictures): close it and set up a new one if they must go from it too."
            if len(kept) == 1
            else f" {named} keep the ground truth each was made with, which counts them (their trials no "
            "longer show their pictures): close each and set up a new one if they must go from it too."
        )
        # Apart, so the count matches the Admin tab's "withdrawn", which counts main-task ones
        practice = f" ({done.colorings - done.practice:,} main-task, {done.practice:,} practice)"
        return self.named(
            revoke_message=f"Withdrew {counted(done.colorings, 'coloring')}{practice if done.practice else ''} "
            f"of {_who(db, annotator_id)}: the P_H of {counted(done.concepts, 'concept')} recomputed without them{reviews}. "
            "No ground truth, leaderboard or new study counts them from now on (votes experts cast on "
            f"them before stay in the agreement statistics, which measure the experts{closed}); "
            + (
                "their account is closed already."
                if accounts.get_annotator(db, annotator_id)["status"] != "active"
                else "their account stays open (close it too if they leave the study)."
            )
            + studies
        )

    @role(*ROLES)
    def failed_sign_ins(self, db, actor) -> dict:
        """The latest failed sign-ins, newest first."""
        return self.named(
            failures=[
                [shown_time(r["created"]), r["address"], r["kind"]] for r in throttle.recent_failures(db)
            ]
        )

    # --- A pilot study (issue 26) -------------------------------------------------------------

    @role(*ROLES)
    def set_pilot(self, db, actor, names: str) -> dict:
        """Make the concepts named (one per line or comma-separated) the pilot."""
        check_length(names, PILOT_NAMES_LABEL)
        keys = [key for line in (names or "").splitlines() for key in line.split(",")]
        with _field("names"):
            chosen = pilot.set_pilot(db, keys, actor=actor.pseudonym)
        return self._pilot_changed(db, f"Pilot set: {_named(chosen)}." + _held_first(db))

    @role(*ROLES)
    def draw_pilot(self, db, actor, size: float, seed: float) -> dict:
        """Draw a pilot of `size` concepts at random (the same `seed` draws the same ones)."""
        n = whole_number(size, "Or draw this many at random")
        rng = np.random.default_rng(seed_number(seed, "Seed of the draw"))
        with _field("size"):
            drawn = pilot.draw_pilot(db, n, rng, actor=actor.pseudonym)
        return self._pilot_changed(db, f"Pilot drawn: {_named(drawn)}." + _held_first(db))

    @role(*ROLES)
    def end_pilot(self, db, actor) -> dict:
        """End the pilot: designers get the least covered concepts of the whole study first."""
        n = pilot.clear_pilot(db, actor=actor.pseudonym)
        ended = f"The pilot of {n} concepts ended" if n else "No pilot was set"
        return self._pilot_changed(
            db, f"{ended}: designers get the least covered concepts of the whole study first."
        )

    def _pilot_changed(self, db, message: str) -> dict:
        """A pilot action's `message`, and the coverage read after it."""
        return self.named(
            pilot_message=message, coverage=coverage_markdown(db, self.ctx.config.colorings_per_concept)
        )

    # --- P_H stability and the assignment mode (issue 19, item 4) ---------------------------

    @role(*ROLES)
    def set_mode(self, db, actor, mode: str, min_k: str, cap: str, threshold: str) -> dict:
        """Store the assignment mode; returns it in words."""
        try:
            limit = number_cell(threshold) if isinstance(threshold, str) else float(threshold)
        except (TypeError, ValueError):
            raise ValueError(f"`Unstable above (ΔE)` must be a number, got {shown(threshold)}") from None
        if not 0 <= limit < math.inf:  # refused by the library as `threshold`, got -3.0 (outside probe 213)
            raise ValueError(f"`Unstable above (ΔE)` must be a number of 0 or more, got {shown(threshold)}")
        limit += 0.0  # -0 is saved as 0
        chosen = stability.Mode(
            adaptive=mode == "adaptive",
            min_k=whole_number(min_k, "Designers first (min K)"),
            cap=whole_number(cap, "Most designers (cap)"),
            threshold=limit,
        )
        stability.set_mode(db, chosen, actor=actor.pseudonym)
        return self.named(stability_note=f"Saved. {escape(chosen.describe())}.")

    @role(*ROLES)
    def stored_mode(self, db, actor) -> dict:
        """The stored assignment mode, into the form that saves it."""
        mode = stability.read_mode(db)
        return self.named(
            mode="adaptive" if mode.adaptive else "fixed",
            min_k=str(mode.min_k),
            cap=str(mode.cap),
            # Exactly as stored (12.3456789, not :g's 12.3457), so that saving unchanged keeps it
            # (outside probe 138); a whole number without its ".0".
            threshold=str(int(mode.threshold))
            if float(mode.threshold).is_integer()
            else repr(mode.threshold),
        )

    @role(*ROLES)
    def stability(self, db, actor) -> dict:
        """The summary, the histogram and the per-concept table."""
        view = stability.stability_view(db)
        return self.named(
            stability_summary=escape(view.text),
            stability_histogram=gr.Plot(view.figure, visible=view.figure is not None),
            stability_table=view.table,
        )

    # --- Export: built in the background, the page polls (issue 28) -------------------------

    @role(*ROLES)
    def export_start(self, db, actor, external_ids: bool = False) -> dict:
        """Start building the export zip in the background (one at a time); returns at once
        with a line on it (and clears the file shown). ``external_ids`` (default false) adds
        the crowd participants' platform ids as the table ``crowd_external_ids``; only
        ``true`` does (personal data: nothing else, "yes" or 1 included, asks for them)."""
        line = _export_line(self.exports.start(now=iso(), external_ids=external_ids is True))
        return self.named(export_status=line, export_file=None)

    @role(*ROLES)
    def export_state(self, db, actor) -> ExportState:
        """Where the export stands (for the page's poll)."""
        return self.exports.state()

    def export_tick(self, session_token: str) -> dict:
        """The timer's poll: the line and, once built, the zip. The timer stops once nothing
        runs, and on a refusal (its message goes beside the button): never an error sheet."""
        try:
            state = self.export_state(session_token)
        except gr.Error as error:
            return self.named(timer=gr.Timer(active=False), export_note=refusal_text(error.message))
        line, archive = _export_outputs(state)
        if state.running:
            return self.named(export_status=line, timer=gr.Timer(active=True))
        return self.named(
            export_status=line, export_file=archive, timer=gr.Timer(active=False), export_note=""
        )

    # It reads the export's state through `export_state`, which checks the caller.
    export_tick = same_access(export_tick, export_state)

    @ui_only
    def export_polling(self) -> dict:
        """Poll the export (after *Build export* and when the tab opens); the poll stops itself."""
        return self.named(timer=gr.Timer(active=True))

    @role(*ROLES)
    def export_poll(self, db, actor) -> dict:
        """Where the export stands, and its zip once it is built."""
        line, archive = _export_outputs(self.exports.state())
        return self.named(export_status=line, export_file=archive)

    @role(*ROLES)
    def export(self, db, actor) -> dict:
        """Build the export zip in the background and answer with it once it is built."""
        self.exports.start(now=iso())
        state = self.exports.wait()
        if state.archive is None:
            raise ExportFailed(state.error or "the export did not finish")
        return self.named(export_file=str(state.archive))

    # --- Backup ------------------------------------------------------------------------------

    @role(*ROLES)
    def backup(self, db, actor) -> dict:
        """Build a backup zip among the admin's downloads and offer it for download."""
        stamp = file_stamp()
        data_dir = self.ctx.config.data_dir
        with new_download(data_dir, "backups", f"colorconcept-backup-{stamp}.zip") as target:
            archive = backup_archive(db, data_dir, target)
            archive.chmod(0o600)
        return self.named(backup_file=str(archive))


def _private_export(*args, **options) -> Path:
    """`annotation.export.export_archive`, its zip then readable by the server's account
    alone, as every download is."""
    archive = export_archive(*args, **options)
    archive.chmod(0o600)
    return archive


def _annotator_rows(db) -> list[list]:
    """The people table's rows (`ANNOTATOR_HEADERS`), one per annotator."""
    return [
        [
            r["id"],
            r["pseudonym"],
            ", ".join(json.loads(r["roles"])),
            {None: "unknown", 1: "yes", 0: "no"}[r["design_background"]],
            # The buttons say close and reopen (outside probe 221 read `revoked`)
            {"revoked": "closed"}.get(r["status"], r["status"]),
            shown_time(r["created"]),
            _approval(r["practice_approved"], r["practice_approved_by"]),
            r["sign_ins"],
            _work(r),
            shown_time(r["last_active"]) if r["last_active"] else "",
        ]
        for r in accounts.list_annotators(db)
    ]


def _person(db, typed, label: str = PERSON_ID) -> int:
    """The annotator id typed, or the id of the pseudonym typed (``D0003``: what designers
    know themselves by, and what they write when they ask to withdraw: outsider 78), in the
    field called `label`."""
    if isinstance(typed, str) and typed.strip()[:1].isalpha():
        found = accounts.annotator_id_of(db, typed)
        if found is None:
            raise ValueError(f"`{label}`: nobody is called {shown(typed.strip())}")
        return found
    if typed is None or (isinstance(typed, str) and not typed.strip()):
        raise ValueError(f"`{label}`: give the person's id or pseudonym (D0003), got nothing")
    number = whole_number(typed, label)
    try:
        accounts.get_annotator(db, number)
    except NotFound:  # its refusal named no field
        raise ValueError(f"`{label}`: nobody has the id {number} (the people table lists every id)") from None
    return number


def _who(db, annotator_id: int) -> str:
    """``annotator 3 (D0003)``: the id and the pseudonym the admin may have typed."""
    return accounts.named(accounts.get_annotator(db, annotator_id))


def _work(row: dict) -> str:
    """What a person did, in words: "12 colorings, 3 practice colorings, 3 votes" (each kind
    they have any of; withdrawn colorings apart, so a withdrawal shows)."""
    kinds = (
        ("colorings", "coloring", "colorings"),
        ("practice", "practice coloring", "practice colorings"),
        ("withdrawn", "coloring withdrawn", "colorings withdrawn"),
        ("practice_withdrawn", "practice coloring withdrawn", "practice colorings withdrawn"),
        ("votes", "vote", "votes"),
        ("judgments", "judgment", "judgments"),
        ("runs", "run started", "runs started"),
        ("studies", "study created", "studies created"),
    )
    said = [f"{row[key]:,} {one if row[key] == 1 else many}" for key, one, many in kinds if row[key]]
    return ", ".join(said) or "nothing yet"


def _approval(when: str | None, by: str | None) -> str:
    """A designer's practice approval as the people table shows it: its time, and who."""
    if not when:
        return ""
    how = {
        onboarding.AUTO_APPROVER: "automatically",
        UPGRADE_APPROVER: "recorded at the upgrade: at work on the main task before approvals were recorded",
    }
    return f"{shown_time(when)} ({how.get(by, f'by {by}')})"


def _layout(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> dict:
    """The tab's components, by the names `EVENTS` and `AdminTab` use."""
    parts = {
        "refresh": gr.Button("Refresh lists", elem_id="admin_refresh"),
        "refresh_note": note_area("admin_refresh_note"),
        **_invite_section(ctx),
        **_practice_section(),
        **_people_section(),
        **_pilot_section(),
        **_stability_section(),
    }
    crowd_links.build_summary(ctx, session_token, tab)
    gr.Markdown(
        "## Failed sign-ins\nThe latest wrong admin passwords and invite links, "
        "by address. An address that keeps failing waits longer before each try "
        f"(after {throttle.FREE_FAILURES} failures in {throttle.WINDOW_S / 60:.0f} "
        "minutes)."
    )
    with empty_note("No failed sign-in yet.", "admin_failed_sign_ins_empty"):
        parts["failures"] = named_table("Failed sign-ins", "admin_failed_sign_ins", headers=FAILURE_HEADERS)
    parts.update(_export_section())
    gr.Markdown(
        "## Backup\nThe database and every file it names, with a manifest of hashes; "
        "safe while people work. Restore it with `python -m annotation restore ZIP` "
        "(the downloaded zip, or a folder made by `backup`; app stopped; add the app's "
        "`--db` and `--data-dir` if it was started with them)."
    )
    parts["backup"] = gr.Button("Build backup", elem_id="admin_backup")
    parts["backup_note"] = note_area("admin_backup_note")
    parts["backup_file"] = gr.File(label="Backup", interactive=False, elem_id="admin_backup_file")
    return parts


def _invite_section(ctx: AppContext) -> dict:
    """Invites in bulk, and a new link for one person."""
    gr.Markdown("## Invite people\nEach row is one person; send each their own link.")
    with gr.Row():
        invite_role = gr.Dropdown(list(INVITABLE_ROLES), value="designer", label="Role", elem_id="admin_role")
        count = gr.Number(5, label="How many", elem_id="admin_count")
        background = gr.Radio(
            list(_BACKGROUND), value="unknown", label="Design/art background", elem_id="admin_background"
        )
        days = gr.Number(ctx.config.invite_days, label=DAYS_LABEL, elem_id="admin_days")
    create = gr.Button("Create invite links", variant="primary", elem_id="admin_create")
    create_note = note_area("admin_create_note")
    with empty_note(
        "No links made yet in this visit: each batch's links show here once, as they are made.",
        "admin_invites_empty",
    ):
        invites = named_table(
            "Invite links of the latest batch", "admin_invites", headers=INVITE_HEADERS, wrap=True
        )
    links_file = gr.File(
        label="These links as CSV (they cannot be shown again later)",
        interactive=False,
        elem_id="admin_invites_csv",
    )
    gr.Markdown("A lost link: make a new one for that person (their earlier links stop working).")
    with gr.Row():
        lost = id_field(ONE_PERSON, "admin_lost")
        renew = gr.Button("New invite link", elem_id="admin_new_link")
    return {
        "role": invite_role,
        "count": count,
        "background": background,
        "days": days,
        "create": create,
        "create_note": create_note,
        "invites": invites,
        "links_file": links_file,
        "lost": lost,
        "renew": renew,
        "renew_note": note_area("admin_new_link_note"),
        "renewed": live(gr.Markdown(elem_id="admin_new_link_message")),
    }


def _practice_section() -> dict:
    gr.Markdown("## Practice colorings waiting for approval")
    with empty_note(
        "Nobody is waiting: designers' practice colorings show here once they have done them.",
        "admin_pending_empty",
    ):
        pending = named_table(
            "Designers waiting for practice approval", "admin_pending", headers=PENDING_HEADERS
        )
    gallery = gr.Gallery(label="Practice colorings", columns=6, elem_id="admin_gallery")
    with gr.Row():
        reviewed = id_field(ONE_PERSON, "admin_reviewed")
        decision = gr.Radio(["approve", "redo"], value="approve", label="Decision", elem_id="admin_decision")
        why = gr.Textbox(label="Note to keep (why)", elem_id="admin_why")
    return {
        "pending": pending,
        "gallery": gallery,
        "reviewed": reviewed,
        "decision": decision,
        "why": why,
        "review": gr.Button("Record decision", elem_id="admin_review"),
        "review_message": live(gr.Markdown(elem_id="admin_review_message")),
    }


def _people_section() -> dict:
    """The annotators, closing an account, and the coverage."""
    gr.Markdown("## People and progress")
    coverage = gr.Markdown(elem_id="admin_coverage")
    with empty_note("Nobody is invited yet: create invite links above.", "admin_annotators_empty"):
        annotators = named_table("People and progress", "admin_annotators", headers=ANNOTATOR_HEADERS)
    with gr.Row():
        revoked = id_field(PERSON_ID, "admin_revoked")
        revoke_why = gr.Textbox(label="Why", elem_id="admin_revoke_why")
        revoke = gr.Button("Close account", variant="stop", elem_id="admin_revoke")
        reopen = gr.Button("Reopen account", elem_id="admin_reopen")
        withdraw = gr.Button("Withdraw their colorings", variant="stop", elem_id="admin_withdraw")
    return {
        "coverage": coverage,
        "annotators": annotators,
        "revoked": revoked,
        "revoke_why": revoke_why,
        "revoke": revoke,
        "reopen": reopen,
        "withdraw": withdraw,
        "revoke_message": live(gr.Markdown(elem_id="admin_revoke_message")),
    }


def _pilot_section() -> dict:
    gr.Markdown(
        "## Pilot study\nA few concepts that every designer is handed before any other, so "
        f"designers overlap: k designers give each pilot concept k colorings, and expert review "
        f"opens after a handful of colorings. Pick {pilot.MIN_SIZE} to {pilot.MAX_SIZE} concepts "
        f"({pilot.SUGGESTED[0]}-{pilot.SUGGESTED[1]} suggested) by name, or draw them at random. "
        "Without a pilot (the default) designers get the least covered concepts of the whole "
        "study first; ending the pilot returns to that order."
    )
    names = gr.Textbox(
        label=PILOT_NAMES_LABEL,
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
    return {
        "pilot_names": names,
        "pilot_size": size,
        "pilot_seed": seed,
        "pilot_set": picked,
        "pilot_draw": drawn,
        "pilot_end": ended,
        "pilot_message": live(gr.Markdown(elem_id="admin_pilot_message")),
    }


def _stability_section() -> dict:
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
    parts = {
        "mode": mode,
        "min_k": min_k,
        "cap": cap,
        "threshold": threshold,
        "save_mode": save,
        "show_stability": show,
        "stability_note": note_area("admin_stability_note"),
        "stability_summary": gr.Markdown(elem_id="admin_stability_summary"),
        "stability_histogram": gr.Plot(
            label="Concepts by P_H stability", elem_id="admin_stability_histogram"
        ),
    }
    with empty_note(
        "No concept listed: *Show stability* lists those with counted designer colorings.",
        "admin_stability_table_empty",
    ):
        parts["stability_table"] = named_table(
            "Designers' P_H stability per concept", "admin_stability_table"
        )
    return parts


def _export_section() -> dict:
    """*Build export* (``/admin_export_start``, its option: the crowd participants' external
    ids, off unless asked for), where it stands and its zip; a timer polls it (its API twin:
    ``/admin_export_poll``, on a hidden trigger)."""
    gr.Markdown(
        "## Export\nCSV and Parquet of every table and a zip of the images, in one file; left out: "
        "the settings (the admin password's hash), every token hash, and the pixel samples, which "
        "`python -m annotation check-distributions --repair` rebuilds from the images."
    )
    return {
        "external_ids": gr.Checkbox(
            False,
            label="Include the crowd participants' external ids (Prolific ids: personal data, docs/security.md)",
            elem_id="admin_export_external_ids",
        ),
        "export": gr.Button("Build export", elem_id="admin_export"),
        "export_note": note_area("admin_export_note"),
        "export_status": gr.Markdown(elem_id="admin_export_status"),
        "export_file": gr.File(label="Export", interactive=False, elem_id="admin_export_file"),
        "timer": gr.Timer(EXPORT_POLL_SECONDS, active=False),
        "export_poll": gr.Button(visible=False, elem_id="admin_export_poll"),
    }


def coverage_markdown(db, k: int) -> str:
    """Concept coverage under the assignment mode's rule (`k` colorings per concept in the
    fixed mode), the pilot, people per role and what expert review waits for (counted against
    the colorings per concept the vote queue was last opened with, else `k`), as Markdown."""
    figures = overview.coverage(db, k)
    minimum = review_min_colorings(db, k)
    top = max(figures["histogram"])
    histogram = ", ".join(f"{n}{'+' if n == top else ''}: {m:,}" for n, m in figures["histogram"].items())
    adaptive = figures["adaptive"]
    head = (
        f"**{figures['complete']:,} of {figures['concepts']:,}** concepts are complete"
        if adaptive
        else f"**{figures['complete']:,} of {figures['concepts']:,}** concepts have {k} colorings"
    )
    return "\n".join(
        [
            f"{head}; **{figures['needing']:,}** need designers{_waiting_for_sketches(figures)}.",
            f"- {escape(figures['rule'])}",
            "- Concepts by state: " + _counts(figures["states"]),
            "- Concepts by number of designers holding a place (a coloring that stands or awaits "
            f"its recolor; P_H counts the standing ones): {histogram}",
            "- Coloring slots of the main task ({quota} per concept with a chosen sketch): "
            "{total:,} in all, **{free:,} free**, {reserved:,} reserved by designers now, "
            "{done:,} done".format(quota="the mode's quota" if adaptive else k, **figures["slots"]),
            "- Colorings by status: " + _statuses(figures),
            "- Active people by role: " + _counts(figures["annotators_by_role"]),
            f"- {_pilot_line(db)}",
            "",
            "**What expert review waits for** ({m} colorings per concept: {source}; an expert sets it, "
            "2 or more, in “Colorings needed per concept” on the Expert tab):".format(
                m=minimum,
                source="as the vote queue was last opened"
                if read_setting(db, MIN_COLORINGS_SETTING) is not None
                else "the default until the vote queue is opened",
            ),
            *(f"- {escape(line)}" for line in readiness(db, minimum).lines()),
        ]
    )


def _waiting_for_sketches(figures: dict) -> str:
    """How many of the concepts that need designers can be handed out now, when not all."""
    needing, colorable = figures["needing"], figures["needing_colorable"]
    if colorable == needing:
        return ""
    return (
        f", **{colorable:,}** of them with a sketch to color (the other {needing - colorable:,} wait "
        "for a sketch of their base concept: Sketches tab)"
    )


def _statuses(figures: dict) -> str:
    """Main-task colorings by status (each designer's latest round), saying that practice
    colorings and replaced rounds are not counted."""
    counts = dict(figures["colorings_by_status"])
    if not counts.get("withdrawn"):  # said once someone asked for it, not as "0 withdrawn" in every study
        counts.pop("withdrawn", None)
    text = _counts(counts)
    practice = figures["practice_colorings"]
    if practice:
        noun = "coloring is" if practice == 1 else "colorings are"
        head, _, rest = text.partition(" submitted")
        text = f"{head} submitted ({practice:,} practice {noun} not counted){rest}"
    replaced = figures["replaced_rounds"]
    if replaced:
        noun = "round" if replaced == 1 else "rounds"
        text += f"; besides, {replaced:,} earlier {noun} replaced by a designer's redo (not counted)"
    return text


def _counts(counts: dict) -> str:
    """``{"submitted": 3, "accepted": 0}`` as "3 submitted, 0 accepted" (or "none yet")."""
    return ", ".join(f"{n:,} {escape(in_words(name))}" for name, n in counts.items()) or "none yet"


def _export_outputs(state: ExportState) -> tuple[str, str | None]:
    """A line on where the export stands (Markdown), and its zip once built."""
    return _export_line(state), None if state.archive is None else str(state.archive)


def _export_line(state: ExportState) -> str:
    if state.status == "running":
        step = EXPORT_STEPS.get(state.step, "starting")
        return f"Building the export (started {state.started}): {step}, about {state.fraction:.0%} done."
    if state.status == "done":
        holds = " It holds the crowd participants' external ids." if state.external_ids else ""
        return f"The export started {state.started} is ready below.{holds}{_lacking(state.images)}"
    if state.status == "failed":
        return refusal_text(escape(f"The export started {state.started} failed: {state.error}"))
    return ""


def _lacking(images: dict[str, int]) -> str:
    """What an export's images.zip lacks, in words ('' when nothing): it was ready with a
    file missing, unsaid (outside probe 123)."""
    missing, differing = images.get("missing", 0), images.get("sha256_mismatch", 0)
    if not missing and not differing:
        return ""
    parts = [f"{missing:,} missing from the data folder"] if missing else []
    parts += [f"{differing:,} whose bytes differ from their recorded sha256"] if differing else []
    return (
        f" **Its images.zip lacks {missing + differing:,} file(s) the rows name**: {' and '.join(parts)}; "
        "its manifest.csv names each (status column); an earlier backup's files/ folder may hold them."
    )


def _pilot_line(db) -> str:
    """The pilot in the coverage, as one Markdown line."""
    keys = pilot.read_pilot(db)
    if not keys:
        return "No pilot: designers get the least covered concepts of the whole study first."
    # A designer's held tasks stay theirs (one may be on screen, half colored): they come first
    # (an outside tester read "before any other" as at once: outsider 79).
    return (
        f"Pilot: designers get {'this concept' if len(keys) == 1 else f'these {len(keys)} concepts'} "
        "before any other, once they have colored "
        f"the up to {RESERVE_AHEAD} tasks each holds already: {_named(keys)}."
    )


def _held_first(db) -> str:
    """What a new pilot does not reorder: the tasks designers already hold (`pilot.held_elsewhere`)."""
    tasks, designers = pilot.held_elsewhere(db)
    if not tasks:
        return ""
    return (
        f" {counted(tasks, 'task')} of other concepts already handed to "
        f"{counted(designers, 'designer')} stay theirs: they get the pilot's concepts once those are done."
    )


@contextlib.contextmanager
def _field(name: str) -> Iterator[None]:
    """A bad-input refusal of the library called within, naming handler parameter `name`
    (which the page names by its label): "a pilot needs 1 to 20 concepts" named no field
    (outside probe 190)."""
    try:
        yield
    except (InvalidInput, NotFound) as error:
        raise type(error)(f"`{name}`: {error}") from None


def _named(keys: list[str]) -> str:
    return ", ".join(f"“{escape(key)}”" for key in keys)
