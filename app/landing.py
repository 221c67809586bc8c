"""The Start tab: what the app is, signing in (invite link or admin password), signing out.

The session token lives in a hidden textbox (``session_token``) that every handler takes
as its first input, and in the browser's local storage (`gr.BrowserState`), so a reload
keeps the person signed in. Opening ``/?invite=TOKEN`` signs the person in on page load.
"""

from __future__ import annotations

import contextlib
import ipaddress
import urllib.parse
from collections.abc import Iterator

import gradio as gr

from annotation.errors import (
    AnnotationError,
    InvalidInput,
    InvalidToken,
    PermissionDenied,
    StaleToken,
    check_length,
)
from annotation.people import passwords, throttle
from annotation.people.accounts import Actor, login_with_invite, logout, require
from annotation.people.passwords import login_admin
from annotation.study import crowd, judging
from app.common import AppContext, escape, live, markdown_link, own_session, public, shown_errors, visible_to
from app.tabs import SESSION_CHANGE, On, Tab
from storage import shown_time, storage_condition
from storage.shown import counted

NAME = "start"
TITLE = "Start"
# After the page-load sign-in, drop ?invite= from the address bar (and so from history).
# An open study link's ``?study=`` (with the platform's ids) goes the same way.
OPEN_TAB_KEY = "cc-open-tab"
"""Where the page keeps the title of the tab its person last opened (``sessionStorage``: per
browser tab, kept across reloads)."""
RECENT_COLORS_KEY = "colorconcept:recent-colors"
"""Where the coloring canvas keeps its recent colors (``localStorage``; coloring.js's
``RECENT_KEY``): forgotten on a sign-out and when a link signs someone in, so that the next
person at a shared computer does not see them."""
_PLAIN_SIGN_IN = r"^Signed in as \*\*[^*]+\*\*\.( Your time for this study ends at [^.]+\.)?$"
"""The page-load status of a restored session with nothing more to say than, for a crowd
participant, their deadline (`restore`)."""
# After the page-load step: an invite or study link leaves the address (it was used) and the
# page stays where the sign-in put it. Otherwise the tab the person last opened in this browser
# tab opens again, by a click as theirs (so the tab loads what it shows), when it is still one
# of theirs: a reload, or Gradio's own reload when the server comes back after a restart, no
# longer drops them on their first tab. A restore with a message on the Start tab stays there.
# The click that opens a tab is what is remembered; a sign-out forgets it, and the canvas's
# recent colors.
_AFTER_LOAD_JS = f"""(status) => {{
  const key = '{OPEN_TAB_KEY}';
  if (!window.ccTabKept) {{
    window.ccTabKept = true;
    document.addEventListener('click', (event) => {{
      const tab = event.target.closest?.('[role="tab"], .overflow-dropdown button');
      if (tab) sessionStorage.setItem(key, tab.textContent.trim());
      else if (event.target.closest?.('#start_logout')) {{
        sessionStorage.removeItem(key);
        localStorage.removeItem('{RECENT_COLORS_KEY}');
      }}
    }}, true);
  }}
  if (/[?&](invite|study)=/.test(location.search)) {{
    history.replaceState(null, '', location.pathname);
    sessionStorage.removeItem(key);
    localStorage.removeItem('{RECENT_COLORS_KEY}');
    return [];
  }}
  const title = sessionStorage.getItem(key);
  if (!title || !/{_PLAIN_SIGN_IN}/.test(status || '')) return [];
  let tries = 0;
  const reopen = () => {{
    const tab = [...document.querySelectorAll('[role="tab"], .overflow-dropdown button')]
      .find((button) => button.textContent.trim() === title);
    if (tab) {{
      if (tab.getAttribute('aria-selected') !== 'true') tab.click();
    }} else if (++tries < 100) setTimeout(reopen, 50);
  }};
  reopen();
  return [];
}}"""
_FORGET_PASSWORD_JS = "() => ''"
"""Empties the password box after a sign-in, in the browser (no server round trip)."""

INTRO = """\
# ColorConcept Lab

People associate concepts with colors: a *rotten apple* is brown and olive, a *lonely
cabin* is grey and blue. This app collects those associations and compares them with
what text-to-image models produce (the ColorConceptBench protocol).

- **Designers** color line drawings of concepts.
- **Experts** review colorings that disagree with the others.
- **Participants** judge which of two models matches people's colors better.
- **Researchers** run models and browse the results.

**How to sign in.** Open the invite link the study organiser sent you; it signs you in
and the app remembers you on this browser. Organisers sign in below with the admin
password (shown on the console when the app first started) and create invite links on the
Admin tab.
"""


def build(ctx: AppContext, session_token: gr.Textbox, tab: gr.Tab) -> dict[str, gr.components.Component]:
    """Lay out the Start tab inside `tab`, the current `gr.Tab`; returns components to wire.

    The sign-in boxes show only while nobody is signed in, the Sign out button only while
    someone is (see `wire`).
    """
    gr.Markdown(INTRO)
    status = live(gr.Markdown("You are not signed in.", elem_id="start_status"))
    with gr.Column(elem_id="start_sign_in") as sign_in_box:
        with gr.Row():
            invite = gr.Textbox(
                label="Invite link or code", elem_id="start_invite", scale=3, interactive=False
            )
            # Both buttons (and both boxes, which Enter submits) wait for the page-load
            # sign-in (`wire`): a sign-in made before it answered would be undone by its
            # "not signed in".
            invite_button = gr.Button("Sign in with invite", elem_id="start_invite_button", interactive=False)
        with gr.Row():
            password = gr.Textbox(
                label="Admin password", type="password", elem_id="start_password", scale=3, interactive=False
            )
            password_button = gr.Button(
                "Sign in as admin", elem_id="start_password_button", interactive=False
            )
    logout_button = gr.Button("Sign out", elem_id="start_logout", variant="secondary", visible=False)
    return {
        "tab": tab,
        "status": status,
        "sign_in": sign_in_box,
        "invite": invite,
        "invite_button": invite_button,
        "password": password,
        "password_button": password_button,
        "logout_button": logout_button,
    }


def wire(
    ctx: AppContext,
    demo: gr.Blocks,
    session_token: gr.Textbox,
    stored: gr.BrowserState,
    parts: dict,
    tabs: list[tuple[gr.Tab, tuple[str, ...]]],
    tab_set: gr.Tabs,
) -> None:
    """Wire page load, sign-in and sign-out (`StartTab`) with `parts` (`build`'s), the app's
    `tabs` (each with the roles that see it) and the `gr.Tabs` that holds them."""
    frame = {"demo": demo, "session_token": session_token, "stored": stored, "tab_set": tab_set}
    StartTab(ctx, {**parts, **frame, **{_tab_part(tab): tab for tab, _ in tabs}}, tabs).wire()


SIGNED = ("session_token", "status")
"""What a sign-in or sign-out sets: the session and the line that says who is signed in."""
BUTTONS = ("invite_button", "password_button")
USABLE_ON_LOAD = (*BUTTONS, "invite", "password")
"""What the page-load sign-in makes usable: the sign-in buttons, and the two boxes that
Enter submits."""


def _tab_part(tab: gr.Tab) -> str:
    return f"tab_{tab.id}"


class StartTab(Tab):
    """Page load, sign-in and sign-out; each ends by showing what fits the person: their
    tabs (opening the first one that is theirs, except for the admin, who stays on Start),
    and either the sign-in boxes or the Sign out button.

    Public endpoints: ``login_invite(text) -> (session_token, message)``,
    ``login_admin(password) -> (session_token, message)`` and
    ``start_logout(session_token) -> ("", message)``.

    Its ``parts``: `build`'s, ``demo``, ``session_token``, ``stored`` (the browser's copy of
    the session), ``tab_set`` and each tab of `tabs` (``tab_<id>``); ``tabs``: the app's
    tabs, each with the roles that see it.
    """

    def __init__(self, ctx: AppContext, parts: dict, tabs: list[tuple[gr.Tab, tuple[str, ...]]]) -> None:
        super().__init__(ctx, parts)
        self.tabs = tabs
        shown = ("stored", "sign_in", "logout_button", *(_tab_part(tab) for tab, _ in tabs), "tab_set")
        self.EVENTS = (
            # One step, so that a slow page load cannot hide the tabs of a sign-in made meanwhile
            # (the sign-in buttons become usable here) and the status line never says who is
            # signed in before their tabs show.
            On(
                "demo.load",
                "restore_on_load",
                ("stored",),
                (*SIGNED, *shown, *USABLE_ON_LOAD),
                api_name="start_restore",
            ),
            On("then", None, ("status",), (), js=_AFTER_LOAD_JS),
            # Enter in the box signs in too, as in the password box (it did nothing: outsider 95).
            On(
                ("invite_button.click", "invite.submit"),
                "login_invite",
                ("invite",),
                SIGNED,
                "status",
                "login_invite",
            ),
            On(
                ("password_button.click", "password.submit"),
                "login_password",
                ("password",),
                SIGNED,
                "status",
                "login_admin",
            ),
            On("then", None, (), ("password",), js=_FORGET_PASSWORD_JS),
            On("logout_button.click", "logout", ("session_token",), SIGNED, "status", "start_logout"),
            On("tab.select", "status_on_open", ("session_token",), ("status", "sign_in", "logout_button")),
            # A sign-in or a sign-out: one step of the page's one event for a change of session
            # (`app.tabs.SessionReactions`), which a restored session also sets off.
            On(SESSION_CHANGE, "show", ("session_token", "stored"), shown),
        )

    @own_session
    def show(self, token: str, stored: str = "") -> dict:
        """The person's tabs, the sign-in boxes or Sign out, and the session the browser keeps.

        `stored` is the session the page showed last: when it is `token` (a page load showed
        it in its own step before the session event), the open tab stays as it is, so that a
        tab the person opened meanwhile is not switched away from.
        """
        actor = current_actor(self.ctx, token)
        visible = [visible_to(actor, roles) for _, roles in self.tabs]
        if actor is None:
            selected = gr.Tabs(selected=NAME)
        elif actor.is_admin or not any(visible) or token == stored:
            selected = gr.Tabs()
        else:
            selected = gr.Tabs(selected=self.tabs[visible.index(True)][0].id)
        tabs = {self.parts[_tab_part(tab)]: gr.Tab(visible=v) for (tab, _), v in zip(self.tabs, visible)}
        return {
            **self.named(
                stored=token if actor else "",
                sign_in=gr.Column(visible=actor is None),
                logout_button=gr.Button(visible=actor is not None),
                tab_set=selected,
            ),
            **tabs,
        }

    @own_session
    def status_on_open(self, token: str) -> dict:
        """The Start tab as it opens, where what the page last showed no longer holds, as a
        reload shows it: a session that ended since (the account closed, a sign-out in another
        tab) says why, with the sign-in boxes; a crowd participant whose study ended for them
        (they finished it on the Judge tab, say) reads why (it still read "Signed in", or told
        them to press Start: outside probes 183 and 185). Otherwise nothing changes."""
        unchanged = self.named(status=gr.skip(), sign_in=gr.skip(), logout_button=gr.skip())
        if not token:
            return unchanged
        with self.ctx.db() as db:
            try:
                actor = require(db, token)
            except AnnotationError as error:
                return self.named(
                    status=f"You are not signed in. ({escape(str(error))})",
                    sign_in=gr.Column(visible=True),
                    logout_button=gr.Button(visible=False),
                )
            over = no_longer_judging(db, actor, crowd.state(db, actor))
        if not over:
            return unchanged
        return {**unchanged, **self.named(status=f"Signed in as **{escape(actor.pseudonym)}**: {over}")}

    @public
    def restore_on_load(self, stored_token: str, request: gr.Request) -> dict:
        """The page's first step: the stored session or an invite in the address, its view,
        and the sign-in buttons made usable (a sign-in made before would be undone)."""
        token, message, on_start = restore(self.ctx, stored_token, request)
        usable = gr.Button(interactive=True)
        shown = self.show(token)
        if on_start:
            # The message is on the Start tab: land there, whoever stays signed in.
            shown.update(self.named(tab_set=gr.Tabs(selected=NAME)))
        return {
            **self.named(session_token=token, status=message),
            **shown,
            **self.named(
                **dict.fromkeys(BUTTONS, usable),
                invite=gr.Textbox(interactive=True),
                password=gr.Textbox(interactive=True),
            ),
        }

    @public
    def login_invite(self, text: str, request: gr.Request) -> dict:
        token, message = sign_in_with_invite(self.ctx, text, client_address(request))
        return self.named(session_token=token, status=message)

    @public
    def login_password(self, password: str, request: gr.Request) -> dict:
        token, message = sign_in_as_admin(self.ctx, password, client_address(request))
        return self.named(session_token=token, status=message)

    @public
    def logout(self, token: str) -> dict:
        token, message = sign_out(self.ctx, token)
        return self.named(session_token=token, status=message)


# Tokens are URL-safe base64: these around one came with it from a sentence or quotes.
_AROUND = ".,;:!?'\"()[]<>"
MAX_LINK = 1000
"""Characters of the invite box: a link or code longer than this is refused unread."""


def _pasted(text: str | None) -> str:
    return (text or "").strip().strip(_AROUND)


def _params(pairs) -> dict[str, str | list[str]]:
    """Query parameters by name from ``(name, value)`` pairs: a name given once maps to its
    value, one given more often to the list of its values (an open study link refuses
    those, `annotation.study.crowd.join`; an invite link takes the first, `_first`)."""
    found: dict[str, list[str]] = {}
    for key, value in pairs:
        found.setdefault(key, []).append(value)
    return {key: values[0] if len(values) == 1 else values for key, values in found.items()}


def _first(value: str | list[str]) -> str:
    return value[0] if isinstance(value, list) else value


def _query(link: str) -> dict[str, str | list[str]]:
    """The query parameters of `link` (or of ``a=1&b=2`` alone), as `_params` gives them."""
    query = urllib.parse.urlparse(link).query or link.split("?", 1)[-1]
    # Blank values kept: an empty STUDY_ID (the platform filled in nothing) is refused, as
    # the link opened in the browser is, not dropped.
    return _params(urllib.parse.parse_qsl(query, keep_blank_values=True))


def invite_token(text: str) -> str:
    """The token of an invite link (``.../?invite=TOKEN``) or of a bare token."""
    text = _pasted(text)
    if "invite=" in text:
        text = _first(_query(text).get("invite", ""))
    return text.strip(_AROUND)


def study_link_params(text: str) -> dict | None:
    """The query parameters of an open study link (``.../?study=TOKEN&PROLIFIC_PID=...``)
    pasted into the invite box, or None when `text` is not one."""
    text = _pasted(text)
    if "invite=" in text or "study=" not in text:
        return None
    return _query(text)


def sign_in_with_invite(ctx: AppContext, text: str, address: str = "") -> tuple[str, str]:
    """``(session_token, message)`` for an invite link or code; raises `gr.Error`.

    An open study link pasted there joins its study, as opening it does (`join_open_link`).
    Failed attempts are throttled per client `address` (`annotation.people.throttle`); an
    empty box (``None`` from an API client) is no attempt."""
    text = "" if text is None else text
    if isinstance(text, str) and len(text) <= MAX_LINK and (params := study_link_params(text)) is not None:
        token, message, _ = join_open_link(ctx, params, address)
        return token, message
    with shown_errors("login_invite"), ctx.db() as db:
        if isinstance(text, str) and not invite_token(text):
            # Nothing to check: a press on an empty box is no guess, and not a failure.
            raise InvalidInput("the invite box is empty: paste the invite link (or its code) you were sent")
        # A real link out of date is no guess (`annotation.people.throttle`).
        with throttle.attempt(db, address, "invite", (InvalidToken, InvalidInput), no_guess=(StaleToken,)):
            check_length(text, "invite link", MAX_LINK)
            session = login_with_invite(db, invite_token(text), session_days=ctx.config.session_days)
    return session.token, f"Signed in as **{escape(session.pseudonym)}**."


def join_open_link(ctx: AppContext, params: dict, address: str = "") -> tuple[str | None, str, bool]:
    """``(session_token, message, finished)`` for an open study link's query parameters
    (``study`` and the platform's ids): a new participant, or the same external id resumed
    (`finished`: one who has finished the study); no session (None) for an MTurk HIT's
    preview (`annotation.study.crowd.HitPreview`), whose message is no failure; raises `gr.Error`.

    Unknown link tokens count as failed sign-ins of `address` (`annotation.people.throttle`);
    new people per address are limited by the link (`annotation.study.crowd.join`)."""
    with shown_errors("join_open_link"), ctx.db() as db:
        with throttle.attempt(db, address, "study link", (InvalidToken,)):
            try:
                joined = crowd.join(db, crowd.one_param(params, "study") or "", params, address=address)
            except crowd.HitPreview as preview:  # no failure: the link works once the HIT is accepted
                return None, f"**This is the HIT's preview:** {escape(str(preview))}.", True
        closed = crowd_study_closed(db, _joined_actor(joined), joined.state)
    name = escape(joined.session.pseudonym)
    if joined.state.finished:
        return joined.session.token, f"Welcome back, **{name}**: {study_over(joined.state)}", True
    if closed:  # they were told to press Start on a study closed since (outside probe 138)
        return joined.session.token, f"Welcome back, **{name}**. {closed}", True
    welcome = "Welcome back" if joined.resumed else "Welcome"
    return (
        joined.session.token,
        f"{welcome}, you take part as **{name}**. Your time for this study ends at "
        f"{shown_time(joined.state.deadline)}. On the **Judge** tab, press *Start*: "
        + ("your trials follow." if joined.state.consented else "first the consent text, then your trials."),
        False,
    )


def _joined_actor(joined: crowd.Joined) -> Actor:
    session = joined.session
    return Actor(session.annotator_id, session.pseudonym, frozenset(session.roles))


def crowd_study_closed(db, actor: Actor, state: crowd.CrowdState | None) -> str:
    """What a crowd participant judging when the organisers closed their study (`state`
    ``study_closed``, or ``active`` in a study closed before that status was recorded)
    reads: that, the trials kept, and the way back to the platform; "" when the study is
    open or they are not such a participant."""
    if state is None or state.status not in ("active", "study_closed"):
        return ""
    closed = judging.closed_for(db, actor)
    if closed is None:
        return ""
    return (
        f"**The organisers closed this study** on {shown_time(closed['closed'])}: no more votes are "
        f"taken, and what you judged ({counted(closed['done'], 'trial')}) is kept. Please return the "
        "study on the platform, and message its researcher there about your time. " + back_to_platform(state)
    )


def back_to_platform(state: crowd.CrowdState) -> str:
    """The way back to the platform for a crowd participant who leaves without a code: a
    link to the return URL with no code, or on MTurk, where that URL would submit the
    assignment empty, the HIT's own *Return* button (outside probe 171)."""
    if state.platform_url:
        return markdown_link("Back to the platform", state.platform_url)
    return "On MTurk, return the HIT with its *Return* button."


def no_longer_judging(db, actor: Actor, state: crowd.CrowdState | None) -> str:
    """Why crowd participant `actor` (`state`: `annotation.study.crowd.state`'s) no longer
    judges: their study is over for them (`study_over`) or closed (`crowd_study_closed`);
    "" while they judge, and for anyone else."""
    return study_over(state) or crowd_study_closed(db, actor, state)


def study_over(state: crowd.CrowdState | None) -> str:
    """What a crowd participant who no longer judges reads where the page lands (their code
    and the way back to the platform, when they have them); "" for anyone else, and for
    someone whose study was closed (`crowd_study_closed` says that, with their trials)."""
    if state is None or state.status in ("active", "study_closed"):
        return ""
    if state.finished:  # completed, or screened out (who read "you have finished", an outside check)
        return (
            (
                "you have finished this study"
                if state.status == "completed"
                else "this study has ended for you"
            )
            + f". Your code is **{escape(state.code)}**: "
            f"{markdown_link('back to the study platform', state.return_url)}."
        )
    if state.status == "timed_out":
        return "your time for this study ran out; please return it on the platform."
    if state.status == "account_closed":
        return "the organisers closed your account for this study; please return it on the platform."
    if state.status == "may_restart":
        return "the organisers let you start this study again: open it again from the platform to go on."
    if not state.consented:
        return (
            "you did not agree to the consent text, so you do not take part; please return the "
            f"study on the platform. {back_to_platform(state)}"
        )
    return "you returned this study; it cannot be taken again."


def sign_in_as_admin(ctx: AppContext, password: str, address: str = "") -> tuple[str, str]:
    """``(session_token, message)`` for the admin password; raises `gr.Error`.

    Failed attempts are throttled per client `address` (`annotation.people.throttle`)."""
    with shown_errors("login_admin"), _organiser_told(), ctx.db() as db:
        # No attempt: an API client may send None, and no password is blanks alone.
        if password is None or (isinstance(password, str) and not password.strip()):
            raise InvalidInput("the password box is empty: type the admin password")
        with throttle.attempt(db, address, throttle.ADMIN_PASSWORD, (PermissionDenied, InvalidInput)):
            check_length(password, "password", passwords.MAX_LENGTH)
            session = login_admin(db, password)
    return session.token, "Signed in as **admin**."


@contextlib.contextmanager
def _organiser_told() -> Iterator[None]:
    """A full (or failing) disk under the admin's sign-in says what to do: the admin was told
    to "tell the study organisers", and is them (outsider 77)."""
    try:
        yield
    except Exception as error:
        if storage_condition(error) in ("full", "io"):
            raise gr.Error(ADMIN_DISK, print_exception=False) from error
        raise


ADMIN_DISK = (
    "The server's disk is full or takes no write, so signing in (which writes a session) cannot be "
    "done now. You run this study: free some space on the disk of the database (GET /healthz says "
    "what it lacks; the app's log names the folder), then sign in again; the app takes work again "
    "without a restart."
)
"""What the admin's sign-in says while the database's disk takes no write."""


def client_address(request: gr.Request | None) -> str:
    """The address a request came from (the proxy's, behind a reverse proxy that does not
    forward it: see docs/security.md); ``"not an address"`` for what is none.

    Behind a trusted proxy uvicorn takes it from ``X-Forwarded-For`` as sent, and a client
    on this machine sends what it likes there (outside probe 105 stored a 60,000-character
    "address" in the sign-in failures, shown whole in the Admin tab).
    """
    client = getattr(request, "client", None)
    host = str(getattr(client, "host", "") or "")
    if not host:
        return "unknown"
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return "not an address"


def sign_out(ctx: AppContext, session_token: str) -> tuple[str, str]:
    """Revoke the session; ``("", message)``."""
    if session_token:
        try:
            with ctx.db() as db:
                logout(db, session_token)
        except InvalidToken:
            pass
    return "", "You are signed out."


def restore(ctx: AppContext, stored: str | None, request: gr.Request) -> tuple[str, str, bool]:
    """On page load: sign in from ``?invite=`` or ``?study=``, or keep the stored session if
    still valid; ``(session_token, message, on_start)``.

    A bad link shows its message instead of failing the page, and keeps the stored
    session; its message, and that of a crowd participant who no longer judges, is on the
    Start tab, where the page then lands (`on_start`).
    """
    params = _params(request.query_params.multi_items()) if request is not None else {}
    if params.get("study") or params.get("invite"):
        return _from_link(ctx, params, stored, client_address(request))
    if not stored:
        return "", "You are not signed in.", False
    with ctx.db() as db:
        try:
            actor = require(db, stored)
        except AnnotationError as error:  # the session the browser kept ended: why
            return "", f"You are not signed in. ({escape(str(error))})", False
        state = crowd.state(db, actor)
        over = no_longer_judging(db, actor, state)
    if over:  # a crowd participant who no longer judges: why, where the page lands
        return stored, f"Signed in as **{escape(actor.pseudonym)}**: {over}", True
    # A crowd participant reads their deadline after a reload as on joining.
    ends = "" if state is None else f" Your time for this study ends at {shown_time(state.deadline)}."
    return stored, f"Signed in as **{escape(actor.pseudonym)}**.{ends}", False


def _from_link(ctx: AppContext, params: dict, stored: str | None, address: str) -> tuple[str, str, bool]:
    """`restore` for a page opened by a study or invite link."""
    before = current_actor(ctx, stored)
    try:
        if params.get("study"):
            token, message, on_start = join_open_link(ctx, params, address)
        else:
            token, message = sign_in_with_invite(ctx, _first(params["invite"]), address)
            on_start = False
    except gr.Error as error:
        link = (
            "**This study link did not work:**" if params.get("study") else "Your invite link did not work:"
        )
        return (stored if before else ""), f"{link} {error.message}", True
    if token is None:  # a HIT's preview: nobody joined
        return (stored if before else ""), message, on_start
    after = current_actor(ctx, token)
    if before is not None and after is not None and before.pseudonym != after.pseudonym:
        # The browser had someone else's session: the link replaced it here.
        name = escape(before.pseudonym)
        message += f" This browser was signed in as **{name}** before; to go back, sign in as {name} again."
    return token, message, on_start


def current_actor(ctx: AppContext, session_token: str | None) -> Actor | None:
    """The signed-in person, or None when the token is missing, expired or revoked."""
    if not session_token:
        return None
    try:
        with ctx.db() as db:
            return require(db, session_token)
    except AnnotationError:
        return None
