"""The Start tab: what the app is, signing in (invite link or admin password), signing out.

The session token lives in a hidden textbox (``session_token``) that every handler takes
as its first input, and in the browser's local storage (`gr.BrowserState`), so a reload
keeps the person signed in. Opening ``/?invite=TOKEN`` signs the person in on page load.
"""

from __future__ import annotations

import urllib.parse

import gradio as gr

from annotation.errors import AnnotationError, InvalidInput, InvalidToken, PermissionDenied, check_length
from annotation.people import throttle
from annotation.people.accounts import Actor, login_with_invite, logout, require
from annotation.people.passwords import login_admin
from annotation.study import crowd
from app.common import AppContext, escape, own_session, public, shown_errors, ui_only, visible_to
from app.common import wire as wire_event

NAME = "start"
TITLE = "Start"
# After the page-load sign-in, drop ?invite= from the address bar (and so from history).
# An open study link's ``?study=`` (with the platform's ids) goes the same way.
_FORGET_INVITE_JS = "() => { if (/[?&](invite|study)=/.test(location.search)) history.replaceState(null, '', location.pathname); }"
_PRIVATE = {"api_visibility": "private"}

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


def build(ctx: AppContext, session_token: gr.Textbox) -> dict[str, gr.components.Component]:
    """Lay out the Start tab inside the current `gr.Tab`; returns components to wire.

    The sign-in boxes show only while nobody is signed in, the Sign out button only while
    someone is (see `wire`).
    """
    gr.Markdown(INTRO)
    status = gr.Markdown("You are not signed in.", elem_id="start_status")
    with gr.Column(elem_id="start_sign_in") as sign_in_box:
        with gr.Row():
            invite = gr.Textbox(label="Invite link or code", elem_id="start_invite", scale=3)
            # Both buttons wait for the page-load sign-in (`wire`): a sign-in made before it
            # answered would be undone by its "not signed in".
            invite_button = gr.Button("Sign in with invite", elem_id="start_invite_button", interactive=False)
        with gr.Row():
            password = gr.Textbox(label="Admin password", type="password", elem_id="start_password", scale=3)
            password_button = gr.Button(
                "Sign in as admin", elem_id="start_password_button", interactive=False
            )
    logout_button = gr.Button("Sign out", elem_id="start_logout", variant="secondary", visible=False)
    return {
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
    """Wire page load, sign-in and sign-out; each ends by showing what fits the person:
    their tabs (opening the first one that is theirs, except for the admin, who stays on
    Start), and either the sign-in boxes or the Sign out button.

    Public endpoints: ``login_invite(text) -> (session_token, message)``,
    ``login_admin(password) -> (session_token, message)`` and
    ``start_logout(session_token) -> ("", message)``.
    """

    @own_session
    def show(token: str) -> tuple:
        actor = current_actor(ctx, token)
        visible = [visible_to(actor, roles) for _, roles in tabs]
        if actor is None:
            selected = gr.Tabs(selected=NAME)
        elif actor.is_admin or not any(visible):
            selected = gr.Tabs()
        else:
            selected = gr.Tabs(selected=tabs[visible.index(True)][0].id)
        return (
            token if actor else "",
            gr.Column(visible=actor is None),
            gr.Button(visible=actor is not None),
            *(gr.Tab(visible=v) for v in visible),
            selected,
        )

    @public
    def restore_on_load(stored_token: str, request: gr.Request) -> tuple:
        # One step, so that a slow page load cannot hide the tabs of a sign-in made meanwhile.
        token, message = restore(ctx, stored_token, request)
        return token, message, *show(token), *(gr.Button(interactive=True),) * len(buttons)

    shown = [stored, parts["sign_in"], parts["logout_button"], *(tab for tab, _ in tabs), tab_set]
    signed = [session_token, parts["status"]]
    buttons = [parts["invite_button"], parts["password_button"]]
    demo.load(
        restore_on_load, stored, [*signed, *shown, *buttons], api_name="start_restore", **_PRIVATE
    ).then(None, js=_FORGET_INVITE_JS, **_PRIVATE)
    status = parts["status"]

    @public
    def login_invite(text: str, request: gr.Request) -> tuple[str, str]:
        return sign_in_with_invite(ctx, text, client_address(request))

    @public
    def login_password(password: str, request: gr.Request) -> tuple[str, str]:
        return sign_in_as_admin(ctx, password, client_address(request))

    wire_event(
        parts["invite_button"].click,
        login_invite,
        parts["invite"],
        signed,
        note=status,
        api_name="login_invite",
    ).then(show, session_token, shown, **_PRIVATE)
    wire_event(
        parts["password_button"].click,
        login_password,
        parts["password"],
        signed,
        note=status,
        api_name="login_admin",
    ).then(show, session_token, shown, **_PRIVATE).then(
        ui_only(lambda: ""), None, parts["password"], **_PRIVATE
    )
    wire_event(
        parts["logout_button"].click,
        public(lambda token: sign_out(ctx, token)),
        session_token,
        signed,
        note=status,
        api_name="start_logout",
    ).then(show, session_token, shown, **_PRIVATE)


def invite_token(text: str) -> str:
    """The token of an invite link (``.../?invite=TOKEN``) or of a bare token."""
    text = (text or "").strip()
    if "invite=" in text:
        query = urllib.parse.urlparse(text).query or text.split("?", 1)[-1]
        text = urllib.parse.parse_qs(query).get("invite", [""])[0]
    return text


def sign_in_with_invite(ctx: AppContext, text: str, address: str = "") -> tuple[str, str]:
    """``(session_token, message)`` for an invite link or code; raises `gr.Error`.

    Failed attempts are throttled per client `address` (`annotation.people.throttle`)."""
    with shown_errors("login_invite"), ctx.db() as db:
        throttle.check(db, address)
        try:
            check_length(text, "invite link", 1000)
            session = login_with_invite(db, invite_token(text), session_days=ctx.config.session_days)
        except (InvalidToken, InvalidInput):
            throttle.record_failure(db, address, "invite")
            raise
    return session.token, f"Signed in as **{escape(session.pseudonym)}**."


def join_open_link(ctx: AppContext, params: dict, address: str = "") -> tuple[str, str]:
    """``(session_token, message)`` for an open study link's query parameters (``study`` and
    the platform's ids): a new participant, or the same external id resumed; raises `gr.Error`.

    Unknown link tokens count as failed sign-ins of `address` (`annotation.people.throttle`);
    new people per address are limited by the link (`annotation.study.crowd.join`)."""
    with shown_errors("join_open_link"), ctx.db() as db:
        throttle.check(db, address)
        try:
            joined = crowd.join(db, params.get("study", ""), params, address=address)
        except InvalidToken:
            throttle.record_failure(db, address, "study link")
            raise
    name = escape(joined.session.pseudonym)
    if joined.state.finished:
        return joined.session.token, f"Welcome back, **{name}**: you have finished this study."
    welcome = "Welcome back" if joined.resumed else "Welcome"
    return joined.session.token, (
        f"{welcome}, you take part as **{name}**. Your time for this study ends at "
        f"{joined.state.deadline[11:16]} UTC. On the **Judge** tab, press *Start*: "
        + ("your trials follow." if joined.state.consented else "first the consent text, then your trials.")
    )


def sign_in_as_admin(ctx: AppContext, password: str, address: str = "") -> tuple[str, str]:
    """``(session_token, message)`` for the admin password; raises `gr.Error`.

    Failed attempts are throttled per client `address` (`annotation.people.throttle`)."""
    with shown_errors("login_admin"), ctx.db() as db:
        throttle.check(db, address)
        try:
            check_length(password, "password", 1000)
            session = login_admin(db, password)
        except (PermissionDenied, InvalidInput):
            throttle.record_failure(db, address, "admin password")
            raise
    return session.token, "Signed in as **admin**."


def client_address(request: gr.Request | None) -> str:
    """The address a request came from (the proxy's, behind a reverse proxy that does not
    forward it: see docs/security.md)."""
    client = getattr(request, "client", None)
    return str(getattr(client, "host", "") or "unknown")


def sign_out(ctx: AppContext, session_token: str) -> tuple[str, str]:
    """Revoke the session; ``("", message)``."""
    if session_token:
        try:
            with ctx.db() as db:
                logout(db, session_token)
        except InvalidToken:
            pass
    return "", "You are signed out."


def restore(ctx: AppContext, stored: str | None, request: gr.Request) -> tuple[str, str]:
    """On page load: sign in from ``?invite=`` or keep the stored session if still valid.

    A bad invite shows its message instead of failing the page.
    """
    params = dict(request.query_params) if request is not None else {}
    if params.get("study"):
        try:
            return join_open_link(ctx, params, client_address(request))
        except gr.Error as error:
            return stored or "", f"**This study link did not work:** {error.message}"
    if params.get("invite"):
        try:
            return sign_in_with_invite(ctx, params["invite"], client_address(request))
        except gr.Error as error:
            return stored or "", f"Your invite link did not work: {error.message}"
    actor = current_actor(ctx, stored)
    if actor is None:
        return "", "You are not signed in."
    return stored, f"Signed in as **{escape(actor.pseudonym)}**."


def current_actor(ctx: AppContext, session_token: str | None) -> Actor | None:
    """The signed-in person, or None when the token is missing, expired or revoked."""
    if not session_token:
        return None
    try:
        with ctx.db() as db:
            return require(db, session_token)
    except AnnotationError:
        return None
