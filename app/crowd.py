"""Open study links on the Study tab: make and close them, follow and pay the crowd.

A researcher or admin makes an open link for a frozen study (`annotation.study.crowd`):
places, minutes per person, days open, the completion and screen-out codes, the id
parameter and the return URL of the platform, and the consent text people read before
their first trial (plain text; empty: `annotation.study.crowd.DEFAULT_CONSENT`). The link
is shown once. The payment table
of a link (one row per external id) refreshes by itself every `REFRESH_S` seconds once
shown, with the live counts above it; **Download** writes it as CSV beside the ids to
approve and (with a bonus per trial) the bonus lines, the files Prolific's bulk approval
and bulk bonus take. **Mark returned** frees the place of someone who returned the study
on the platform; **Let start again** lets one who returned or timed out come back (an MTurk
worker who accepted the HIT again, with a new assignment).

Endpoints (researcher or admin): ``crowd_make_link``, ``crowd_links``, ``crowd_close_link``,
``crowd_payments``, ``crowd_download``, ``crowd_returned``, ``crowd_restart``. The Admin tab shows every link's
live counts (`build_summary`, ``admin_crowd_counts``).

The section is a `CrowdLinks` and the Admin tab's counts a `CrowdCounts`: their handlers are
methods that name who may call them (`app.common.role`) and return ``{part: update}``;
`EVENTS` and `SUMMARY_EVENTS` are their whole wiring.
"""

from __future__ import annotations

import datetime as dt
import math

import gradio as gr

from annotation.errors import AnnotationError, InvalidInput
from annotation.study import crowd
from app.common import (
    AppContext,
    empty_note,
    escape,
    given,
    id_field,
    link_days,
    live,
    named_table,
    note_area,
    refused_with,
    role,
    whole_number,
)
from app.guard import exports_folder, removed_if_refused
from app.tabs import On, Tab
from storage import shown_time, utcnow

ROLES = ("researcher", "admin")
REFRESH_S = 5.0
LINK_HEADERS = ["id", "label", "study", "quota", "taken", "minutes", "ends", "closed", "id_param"]


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """Lay out and wire the open-link section inside the current tab."""
    CrowdLinks(ctx, {"session_token": session_token, "tab": tab, **_layout()}).wire()


_TOKEN = ("session_token",)
FORM = ("study_id", "label", "quota", "minutes", "days", "completion", "screenout")
FORM += ("failures", "per_address", "id_param", "return_url", "consent")
"""The open-link form, in the order ``crowd_make_link`` takes it."""
PAYMENTS = ("counts", "payments", "timer")
"""A link's live counts, its payment table and their refresh (`CrowdLinks.payments`)."""

EVENTS = (
    On(
        "make.click",
        "make_link",
        (*_TOKEN, *FORM),
        ("url", "links", "make_note"),
        "make_note",
        "crowd_make_link",
    ),
    On(("tab.select",), "links", _TOKEN, ("links",), "links_note", "crowd_links"),
    On(
        "close.click",
        "close_link",
        (*_TOKEN, "link_id"),
        ("links", "links_note"),
        "links_note",
        "crowd_close_link",
    ),
    # The list of links follows the counts (its "taken" column).
    On("show.click", "payments", (*_TOKEN, "link_id"), PAYMENTS, "pay_note", "crowd_payments"),
    On("then", "links", _TOKEN, ("links",), "links_note"),
    # A refresh leaves the notes as they are: what an action said stays beside it.
    On("timer.tick", "payments", (*_TOKEN, "link_id"), PAYMENTS, "pay_note", clear_note=False),
    On("then", "links", _TOKEN, ("links",), "links_note", clear_note=False),
    On("download.click", "download", (*_TOKEN, "link_id", "bonus"), ("files",), "pay_note", "crowd_download"),
    On(
        "returned.click",
        "returned",
        (*_TOKEN, "link_id", "external_id"),
        (*PAYMENTS, "pay_note"),
        "pay_note",
        "crowd_returned",
    ),
    On(
        "restart.click",
        "restart",
        (*_TOKEN, "link_id", "external_id"),
        (*PAYMENTS, "pay_note"),
        "pay_note",
        "crowd_restart",
    ),
)
"""The section's wiring, in the order Gradio registers it (`CrowdLinks.wire`)."""


class CrowdLinks(Tab):
    """The open-link section of one app's Study tab: its parts by name, and the handlers
    `EVENTS` wires.

    Its ``parts``: the laid-out components by name (`_layout`), ``session_token`` and ``tab`` (the
    Study tab, whose opening loads the list of links).
    """

    EVENTS = EVENTS

    @role(*ROLES)
    def make_link(
        self,
        db,
        actor,
        study_id,
        label: str,
        quota,
        minutes,
        days,
        completion: str,
        screenout: str,
        max_failed,
        per_address,
        id_param: str,
        return_url: str,
        consent: str = "",
    ) -> dict:
        """Make an open link; returns the link (shown once) and the list of links.
        ``consent`` is the consent text (plain; "" for the default). A refusal empties the
        link box (outside probe 216: it kept the last link made, with that link's codes,
        under the refusal of the next)."""
        try:
            days = link_days(days, "days open")
            link, token = crowd.create_link(
                db,
                whole_number(study_id, "Study id"),
                actor,
                quota=whole_number(quota, "quota"),
                minutes=_finite(minutes, "minutes per person"),
                ends=utcnow() + dt.timedelta(days=days),
                completion_code=(completion or "").strip(),
                screenout_code=(screenout or "").strip(),
                id_param=(id_param or "").strip(),
                return_url=(return_url or "").strip(),
                max_failed_checks=whole_number(max_failed, "max_failed_checks"),
                joins_per_address=whole_number(per_address, "joins_per_address"),
                label=label or "",
                consent_text=consent or "",
            )
            url = crowd.link_url(self.ctx.config.public_url, token, (id_param or "").strip())
            made = f"Link {link['id']} is made, {crowd.link_state(link)}: paste the address below into the platform."
            counts = crowd.live_counts(db, link["id"])
            others = crowd.other_open_links(db, link)
            people = counts["study_people"]
            if counts["takes_nobody"]:
                made += f" **It takes nobody now: {escape(counts['takes_nobody'])}.**"
            elif others:
                listed = ", ".join(f"{i} ({n} place{'' if n == 1 else 's'} not taken)" for i, n in others)
                made += (
                    f" **The votes this study's pairs still need give trials to {people} more "
                    f"{'person' if people == 1 else 'people'} "
                    f"at most, shared with its other open link{'s' if len(others) > 1 else ''} {listed}**: "
                    f"ask the platforms for {people} in all, or whoever joins beyond them is turned away."
                )
            elif people < link["quota"]:
                made += (
                    f" **The votes this study's pairs still need give trials to {people} "
                    f"more people at most, fewer than the link's {link['quota']} places**: ask the platform "
                    f"for {people}, or whoever joins beyond them is turned away."
                )
            return self.named(url=url, links=_link_rows(db), make_note=made)
        except (AnnotationError, ValueError) as error:
            raise refused_with(error, self.named(url="")) from error

    @role(*ROLES)
    def links(self, db, actor) -> dict:
        """Every open link, newest first."""
        return self.named(links=_link_rows(db))

    @role(*ROLES)
    def close_link(self, db, actor, link_id) -> dict:
        """Close a link: nobody new joins; people in it may finish. Says so beside the button."""
        link_id = whole_number(link_id, "Link id")
        crowd.close_link(db, link_id, actor)
        closed = f"Link {link_id} is closed: nobody new joins; whoever is in it may still finish."
        return self.named(links=_link_rows(db), links_note=closed)

    @role(*ROLES)
    def payments(self, db, actor, link_id) -> dict:
        """The live counts and payment table of a link; keeps the refresh running."""
        return self._payments(db, link_id)

    @role(*ROLES)
    def returned(self, db, actor, link_id, external_id: str) -> dict:
        """Mark that an external id returned the study on the platform; says so beside the
        button (the table's row changes too)."""
        link_id = whole_number(link_id, "Link id")
        person = crowd.mark_returned(db, link_id, (external_id or "").strip(), actor)
        marked = (
            f"**{escape(person['external_id'])}** is marked returned on link {link_id}: their place "
            "is free again."
        )
        return {**self._payments(db, link_id), self.parts["pay_note"]: marked}

    @role(*ROLES)
    def restart(self, db, actor, link_id, external_id: str) -> dict:
        """Let an external id that returned or timed out start again (an MTurk worker who took
        the HIT again: a new assignment); says so beside the button."""
        link_id = whole_number(link_id, "Link id")
        person = crowd.let_start_again(db, link_id, (external_id or "").strip(), actor)
        said = (
            f"**{escape(person['external_id'])}** may start again on link {link_id}: their next visit "
            "with this id takes a free place, goes on with the votes they gave, and has its own time limit."
        )
        state = crowd.link_state(crowd.get_link(db, link_id))
        if not state.startswith("open "):  # the note promised a place the link refuses (probe 137)
            said += (
                f" But this link takes nobody now ({state}), them included: their next visit is refused "
                "(a person stays with the link they first came through, whichever link they open)."
            )
        return {**self._payments(db, link_id), self.parts["pay_note"]: said}

    @role(*ROLES)
    def download(self, db, actor, link_id, bonus) -> dict:
        """payments.csv, approve.txt (ids to approve) and, with a bonus, bonus.csv."""
        link_id = whole_number(link_id, "Link id")
        per_trial = _finite(bonus, "Bonus per trial")
        table = crowd.payment_rows(db, link_id)
        id_param = crowd.get_link(db, link_id)["id_param"]
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        texts = {
            "payments.csv": crowd.payment_csv(table),
            "approve.txt": crowd.approval_ids(table, id_param=id_param),
        }
        if per_trial:
            texts["bonus.csv"] = crowd.bonus_csv(table, per_trial, id_param=id_param)
        folder = exports_folder(self.ctx.config.data_dir, f"crowd-{link_id}", stamp)
        folder.mkdir(parents=True)
        with removed_if_refused(folder):  # a full disk: no half-written set of files is left
            for name, text in texts.items():
                (folder / name).write_text(text, encoding="utf-8", newline="")
        return self.named(files=[str(folder / name) for name in texts])

    def _payments(self, db, link_id) -> dict:
        """The updates of `PAYMENTS` for link `link_id` (checked here)."""
        link_id = whole_number(link_id, "Link id")
        table = crowd.payment_rows(db, link_id)
        for column in ("started", "finished"):  # as every table on the page shows a time; the CSV keeps ISO
            table[column] = [shown_time(t) if t else "" for t in table[column]]
        return self.named(
            counts=_counts_text(crowd.live_counts(db, link_id)), payments=table, timer=gr.Timer(active=True)
        )


def _layout() -> dict:
    """The section's components, by the names `EVENTS` and `CrowdLinks` use."""
    gr.Markdown(
        "## Open study links (Prolific and other crowd platforms)\nAnyone who opens the link gets a "
        "fresh participant account for the open study; see docs/crowd.md. Codes: 1-40 letters, digits, "
        "_ or -. `{code}` in the return URL is replaced by the person's code."
    )
    with gr.Row():
        study_id = id_field("Study id (open)", "crowd_study_id", placeholder="from the list of studies")
        label = gr.Textbox(label="Label", elem_id="crowd_label")
        quota = gr.Number(100, label="quota (places)", elem_id="crowd_quota")
        minutes = gr.Number(crowd.DEFAULT_MINUTES, label="minutes per person", elem_id="crowd_minutes")
        days = gr.Number(14, label="days open (1/24 to 3650)", elem_id="crowd_days")
    with gr.Row():
        completion = gr.Textbox(label="completion_code", elem_id="crowd_completion_code")
        screenout = gr.Textbox(label="screenout_code", elem_id="crowd_screenout_code")
        failures = gr.Number(0, label="Failed checks allowed (max_failed_checks)", elem_id="crowd_max_failed")
        per_address = gr.Number(
            crowd.DEFAULT_JOINS_PER_ADDRESS,
            label="New people per address per hour (joins_per_address)",
            elem_id="crowd_per_address",
        )
    with gr.Row():
        id_param = gr.Textbox(crowd.DEFAULT_ID_PARAM, label="id_param", elem_id="crowd_id_param")
        return_url = gr.Textbox(
            crowd.PROLIFIC_RETURN_URL, label="return_url", elem_id="crowd_return_url", scale=3
        )
    consent = gr.Textbox(
        label=f"Consent text (plain text, at most {crowd.MAX_CONSENT_CHARS} characters; empty: the default)",
        # The default in full weighed 1.4 kB of the page's 300 (issue 28): docs/crowd.md gives it.
        placeholder="Empty: the default text (docs/crowd.md gives it word for word): what the study is, that "
        "taking part is voluntary, what is kept and why.",
        lines=4,
        max_lines=20,
        elem_id="crowd_consent",
    )
    make = gr.Button("Make open link", variant="primary", elem_id="crowd_make")
    make_note = live(note_area("crowd_make_note"))  # its success says the link: read out
    url = gr.Textbox(label="Open link (shown once: paste it into the platform)", elem_id="crowd_url")
    with gr.Row():
        link_id = id_field("Link id", "crowd_link_id", placeholder="from the list of links")
        close = gr.Button("Close link", variant="stop", elem_id="crowd_close")
        show = gr.Button("Show payments (refreshes itself)", elem_id="crowd_show")
    links_note = live(note_area("crowd_links_note"))
    with empty_note("No open link yet: make one above.", "crowd_links_empty"):
        links = named_table("Open study links", "crowd_links", headers=LINK_HEADERS)
    counts = gr.Markdown(elem_id="crowd_counts")
    with empty_note(
        "No payments shown: type a link's id and press *Show payments* (a link nobody joined yet "
        "shows none).",
        "crowd_payments_empty",
    ):
        payments = named_table(
            "Payments per crowd participant", "crowd_payments", headers=list(crowd.PAYMENT_COLUMNS)
        )
    timer = gr.Timer(REFRESH_S, active=False)
    with gr.Row():
        bonus = gr.Number(0, label="Bonus per trial (0: none)", elem_id="crowd_bonus")
        download = gr.Button("Download CSV", elem_id="crowd_download")
        external_id = gr.Textbox(label="External id (platform id)", elem_id="crowd_external_id")
        returned = gr.Button("Mark returned", elem_id="crowd_returned")
        restart = gr.Button("Let start again", elem_id="crowd_restart")
    pay_note = note_area("crowd_pay_note")
    files = gr.File(label="Payment files", file_count="multiple", elem_id="crowd_files")

    return {
        "study_id": study_id,
        "label": label,
        "quota": quota,
        "minutes": minutes,
        "days": days,
        "completion": completion,
        "screenout": screenout,
        "failures": failures,
        "per_address": per_address,
        "id_param": id_param,
        "return_url": return_url,
        "consent": consent,
        "make": make,
        "make_note": make_note,
        "url": url,
        "link_id": link_id,
        "close": close,
        "show": show,
        "links_note": links_note,
        "links": links,
        "counts": counts,
        "payments": payments,
        "timer": timer,
        "bonus": bonus,
        "download": download,
        "external_id": external_id,
        "returned": returned,
        "restart": restart,
        "pay_note": pay_note,
        "files": files,
    }


SUMMARY_HEADERS = ["id", "label", "study", "quota", "state", "started", *crowd.STATUSES]
SUMMARY_HEADERS += ["places_left", "median_minutes", "attention_failure_rate"]


SUMMARY_EVENTS = (
    On(("tab.select",), "summary", _TOKEN, ("table", "timer"), "note", "admin_crowd_counts"),
    On("timer.tick", "summary", _TOKEN, ("table", "timer"), "note"),
)
"""The Admin tab's crowd counts' wiring, in the order Gradio registers it (`CrowdCounts.wire`)."""


def build_summary(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> None:
    """The Admin tab's live counts of every open link: they load when the tab opens and
    then refresh by themselves every `REFRESH_S` seconds. Endpoint (admin):
    ``admin_crowd_counts``."""
    gr.Markdown(
        "## Crowd studies\nLive counts of every open study link (closed and ended ones too: see *state*), refreshed every "
        f"{REFRESH_S:.0f} s. Links, the payment table and its CSV are on the Study tab, under "
        "*Open study links*."
    )
    note = note_area("admin_crowd_note")
    with empty_note("No open study link yet: make one on the Study tab.", "admin_crowd_empty"):
        table = named_table("Open study links of every study", "admin_crowd", headers=SUMMARY_HEADERS)
    timer = gr.Timer(REFRESH_S, active=False)
    parts = {"session_token": session_token, "tab": tab, "note": note, "table": table, "timer": timer}
    CrowdCounts(ctx, parts).wire()


class CrowdCounts(Tab):
    """The Admin tab's live counts of every open link (`build_summary`), and the handler
    `SUMMARY_EVENTS` wires.

    Its ``parts``: ``session_token``, ``tab`` (the Admin tab), ``note``, ``table`` and ``timer``.
    """

    EVENTS = SUMMARY_EVENTS

    @role("admin")
    def summary(self, db, actor) -> dict:
        """Every link's live counts (`annotation.study.crowd.live_counts`), newest first."""
        rows = []
        for link in crowd.list_links(db):
            counts = rounded_counts(crowd.live_counts(db, link["id"]))
            state = crowd.link_state(link)
            if counts["takes_nobody"] and state.startswith("open"):
                state += f"; takes nobody now: {counts['takes_nobody']}"
            rows.append(
                [link[h] for h in SUMMARY_HEADERS[:4]] + [state] + [counts[h] for h in SUMMARY_HEADERS[5:]]
            )
        return {self.parts["table"]: rows, self.parts["timer"]: gr.Timer(active=True)}


def _link_rows(db) -> list[list]:
    """Every open link, newest first, as the list of links shows it (`LINK_HEADERS`)."""
    shown = {"ends": shown_time, "closed": lambda closed: shown_time(closed) if closed else ""}
    return [[shown.get(h, lambda v: v)(row[h]) for h in LINK_HEADERS] for row in crowd.list_links(db)]


def rounded_counts(counts: dict) -> dict:
    """A link's live counts (`annotation.study.crowd.live_counts`) as the Study tab's line
    and the Admin tab's table both show them: median minutes to 0.1 (the table said 1.25
    where the line said 1.2: outside probe 107), the attention failure rate to 0.001."""
    median, rate = counts["median_minutes"], counts["attention_failure_rate"]
    return {
        **counts,
        "median_minutes": None if median is None else round(median, 1),
        "attention_failure_rate": None if rate is None else round(rate, 3),
    }


def _counts_text(counts: dict) -> str:
    counts = rounded_counts(counts)
    median = "–" if counts["median_minutes"] is None else f"{counts['median_minutes']:.1f}"
    rate = counts["attention_failure_rate"]
    return escape(
        f"Started {counts['started']} · active {counts['active']} · completed {counts['completed']} · "
        f"screened out {counts['screened_out']} · timed out {counts['timed_out']} · returned "
        f"{counts['returned']} · account closed {counts['account_closed']} · may start again "
        f"{counts['may_restart']} · study closed {counts['study_closed']} · places left {counts['places_left']} · "
        "median minutes (completed) "
        f"{median} · attention failure rate {'–' if rate is None else f'{rate:.0%}'}"
        + (f" · takes nobody now: {counts['takes_nobody']}" if counts["takes_nobody"] else "")
    )


def _finite(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(f"`{name}` must be a number, got {given(value)}")
    return float(value)
