"""The Gradio app: `build_app(config)` wires one module per tab.

A tab module in ``app/`` defines ``NAME`` (used in ``elem_id``s and ``api_name``s as
``<NAME>_<action>``), ``TITLE``, ``ROLES`` (who sees the tab; the admin sees every tab)
and ``build(ctx, session_token, tab)``, which lays out the tab inside `tab` (the current
`gr.Tab`) and wires its events (``tab.select`` loads what the tab shows when it is opened); it
may define ``CSS``, a style sheet passed to ``launch`` (see
`launch_options`). Every handler takes ``session_token`` as its first input and checks the
role on the server (see `app.common.role`). A tab takes the app's services (the job
manager, the coloring pool, the leaderboard cache) from ``ctx`` and starts none of its own:
`build_app` starts them and ``demo.close()`` stops them (`app.common.AppContext`).
"""

from __future__ import annotations

# First of all: Gradio's import without its type-stub writer (see the module).
from app import gradio_import  # noqa: F401

# isort: split
import os
import re
import threading
from pathlib import Path

import anyio
import gradio as gr
from gradio.exceptions import ComponentProcessingError
from gradio.utils import get_cache_folder, get_upload_folder
from starlette.middleware import Middleware

from annotation.people.passwords import ENV_PASSWORD_FILE
from app import (
    admin,
    browser,
    common,
    designer,
    evaluate,
    expert,
    explicit,
    guard,
    judge_audit,
    landing,
    leaderboard,
    lean_blocks,
    page_scripts,
    participant,
    public_root,
    session_state,
    sketches_admin,
    study,
    upload_form,
    weight,
)
from app.common import BROWSER_STATE_KEY, PLUMBING, AppContext, as_gr_error, audit_functions, role_refusal
from app.config import AppConfig
from app.health import Health
from app.tabs import SessionReactions
from storage.files import file_in_the_way, nearest_existing_folder, unwritable_folder
from storage.shown import shown

# Gradio recomputes a pandas summary of its last 10,000 events after every event, for its
# /monitoring pages only (off here, see `launch_options`): 2-8 ms of the main process's
# CPU per event once a study has run a while. Set before any Blocks (and queue) exists.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", str(10**9))

TAB_MODULES = (
    designer,
    expert,
    participant,
    study,
    evaluate,
    browser,
    leaderboard,
    explicit,
    judge_audit,
    sketches_admin,
    admin,
)
STORAGE_KEY = "colorconcept_session"


def build_app(config: AppConfig | None = None) -> gr.Blocks:
    """Prepare the database and build the app's Blocks (nothing is launched). Gradio's
    sessions in this process keep no deep-link copy of the page from now on
    (`app.session_state`), the app's Blocks gets no web app before launch
    (`app.lean_blocks`), and a refused or abandoned upload leaves no file (`app.upload_form`).

    Parameters
    ----------
    config : AppConfig, optional
        Default `AppConfig.from_env()`.
    """
    session_state.install()
    lean_blocks.install()
    upload_form.install()
    guard.install_origin_rule()
    ctx = AppContext.prepare(AppConfig.from_env() if config is None else config)
    ctx.start()
    try:
        demo = _blocks(ctx)
    except BaseException:
        ctx.close()
        raise
    _close_with(demo, ctx)
    demo.colorconcept_ctx = ctx
    demo.colorconcept_ready = threading.Event()
    return demo


def _blocks(ctx: AppContext) -> gr.Blocks:
    # Files in these folders are served in place (not copied to Gradio's cache), so that
    # `app.guard.Guard` knows what each one is when it decides who may fetch it.
    gr.set_static_paths([Path(ctx.config.data_dir).resolve() / f for f in guard.SERVED_FOLDERS])
    with lean_blocks.AppBlocks(title="ColorConcept Lab") as demo:
        session_token = gr.Textbox(
            "", visible="hidden", elem_classes=PLUMBING, label="session_token", elem_id="session_token"
        )
        stored = gr.BrowserState("", storage_key=STORAGE_KEY, secret=BROWSER_STATE_KEY)
        # The browser fetches images itself, with the session in a cookie (`app.guard`);
        # registered first, so that the cookie is set before any tab's own reaction.
        session_token.change(
            None, session_token, None, js=common.compact_js(guard.COOKIE_JS), api_visibility="private"
        )
        reactions = SessionReactions(session_token)
        with gr.Tabs() as tab_set:
            with gr.Tab(landing.TITLE, id=landing.NAME) as start_tab:
                start = landing.build(ctx, session_token, start_tab)
            tabs = []
            for module in TAB_MODULES:
                with gr.Tab(module.TITLE, id=module.NAME, visible=False) as tab:
                    module.build(ctx, session_token, tab)
                tabs.append((tab, module.ROLES))
        landing.wire(ctx, demo, session_token, stored, start, tabs, tab_set)
        reactions.wire()
    audit_functions(demo)
    weight.progress_on_components(demo)
    weight.lean_config(demo)
    # Gradio's direct routes (/run/, /api/) ran a queued event beside its queue, past its
    # concurrency limit, and answered its refusal with a 500 (outside probe 129): they are left
    # to the events the page itself sends there, those without a queue.
    demo.api_open = False
    return demo


def _close_with(demo: gr.Blocks, ctx: AppContext) -> None:
    """Make ``demo.close()`` also close `ctx`'s services (`AppContext.close`).

    Gradio has no hook for the end of an app: ``Blocks.unload`` runs per visitor whose
    page closes, and the server's shutdown calls nothing of ours. ``Blocks.close`` is what
    ends a launched app (`app.py` on any exit, the tests' `running_app`), so it is wrapped
    on this instance; unlike Gradio's, it closes the services of an app that was built
    but never launched too.
    """
    gradio_close = demo.close

    def close(verbose: bool = True) -> None:
        try:
            _stop_on_the_servers_loop(demo)
            gradio_close(verbose)
        finally:
            ctx.close()

    demo.close = close


def _stop_on_the_servers_loop(demo: gr.Blocks) -> None:
    """Set the server's stop event on the server's own event loop, and wait for it.

    Gradio's close sets that `asyncio.Event` from the calling thread, iterating its waiters
    there while the loop may add or drop one (a page's heartbeat opening or ending): it
    raised "deque mutated during iteration" at a test's close (CI). Set here first, the
    event has no waiter left for Gradio's own ``set()`` to go through. Nothing to do for an
    app that is not serving.
    """
    servers = getattr(getattr(demo, "server", None), "servers", None) or []
    apps = (getattr(demo, "app", None), getattr(demo, "server_app", None))
    events = {id(e): e for e in (getattr(a, "stop_event", None) for a in apps) if e is not None}
    if not servers or not events or not demo.is_running:
        return
    loop = servers[0].get_loop()
    done = threading.Event()

    def set_events() -> None:
        for event in events.values():
            event.set()
        done.set()

    try:
        loop.call_soon_threadsafe(set_events)
    except RuntimeError:  # the loop has closed: nothing waits on the events any more
        return
    # A bound, not a measured time: only a handler blocking the loop delays it, and Gradio's
    # own close follows either way.
    done.wait(timeout=30)


def check_secrets(config: AppConfig) -> tuple[list[Path], list[Path]]:
    """The folders the app serves and the secret files it must never serve, for `config`.

    `app.py` calls it before any start-up work, so a refused configuration writes nothing;
    `launch_options` calls it again.

    Raises
    ------
    SecretServed
        If a secret (the database or one of its journals, the admin password file) lies
        inside a served folder.
    """
    data_dir = Path(config.data_dir).resolve()
    served = [data_dir / folder for folder in guard.SERVED_FOLDERS]
    db = Path(config.db_path).resolve()
    secrets = [db.with_name(db.name + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    for name in (config.admin_password_file, os.environ.get(ENV_PASSWORD_FILE)):
        if name:
            secrets.append(Path(name).resolve())
    for secret in secrets:
        for folder in served:
            if secret.is_relative_to(folder):
                raise SecretServed(
                    f"{secret} lies inside {folder}, a folder whose files the "
                    "app serves to the page; move it out of "
                    f"{', '.join(guard.SERVED_FOLDERS)} under the data folder"
                )
    return served, secrets


def launch_options(config: AppConfig, demo: gr.Blocks) -> dict:
    """Keyword arguments `gr.Blocks.launch` needs to serve `demo` (from `build_app(config)`).

    Every request passes `app.guard.Guard` (an allow-list of routes; files by role; uploads
    by role and size), and every answer of a page function records the cache files in it
    as the caller's (`app.guard.FilePolicy.issue`). Only the data folder's
    `app.guard.SERVED_FOLDERS` are allowed paths; secrets (the database with its journals,
    the admin password file) are blocked as well, and a configuration that puts one inside
    a served folder is refused (`SecretServed`). A tab module may define ``CSS``; Gradio 6
    takes style sheets at launch.
    """
    served, secrets = check_secrets(config)
    policy = guard.FilePolicy(
        demo.colorconcept_ctx,
        gradio_folders=[get_upload_folder(), get_cache_folder()],
        public=guard.page_files(demo.config),
    )
    _guard_calls(demo, policy)
    css = common.compact_css("\n".join([common.CSS, *(getattr(m, "CSS", "") for m in TAB_MODULES)]))
    return {
        "allowed_paths": [str(folder) for folder in served],
        "blocked_paths": [str(secret) for secret in secrets],
        "css": css,
        "js": common.JS,
        # Gradio 6 has no English text for the key its status tracker announces when an
        # event ends (a screen-reader live region), so it would read out "common.complete".
        "i18n": gr.I18n(en={"common.complete": "Done"}),
        "app_kwargs": {
            "middleware": [
                Middleware(
                    guard.Guard,
                    policy=policy,
                    ready=demo.colorconcept_ready,
                    health=Health(config.db_path, config.data_dir),
                ),
                Middleware(public_root.PublicRootCheck, public_url=config.public_url),
                Middleware(weight.CompressText),
                Middleware(weight.ClientConfig, client=demo.colorconcept_client_config),
                Middleware(page_scripts.PatchedScripts),
            ]
        },
        "max_file_size": config.max_file_upload_bytes,
        # Gradio's traffic monitoring answers anyone (it knows no roles) with every
        # handler's name, call count and timings; nobody here reads it.
        "enable_monitoring": False,
        # Gradio's start-up check (is localhost reachable? else it suggests a share link) is
        # one HEAD of the page that gives up after 3 s: a test server's start failed on it on a
        # loaded machine although the guard answered that HEAD itself. Gradio's own in-process
        # launches (`gradio.Server`) skip it by this argument; the app needs no share link.
        "_frontend": False,
    }


def _guard_calls(demo: gr.Blocks, policy: guard.FilePolicy) -> None:
    """Check every call of a page function before it runs, and record which files of
    Gradio's cache its answer gave to whom (the session cookie of the request), so that the
    guard serves each only to them.

    Refused before the function runs: a call of an event that runs in the browser only (it
    has no function: Gradio's refusal logs a traceback per call), a call with fewer or more inputs than the function
    takes (Gradio's refusal of too few logs every input, tokens included); naming the input, inputs that name a file the caller
    may not fetch (a function that hands an input back would otherwise issue someone else's
    upload, or any file of Gradio's folders, to whoever named it), text that cannot be stored (a lone UTF-16 surrogate, which no
    browser sends but an API client can), a value its component cannot read (Gradio's
    refusal logs a traceback per call, before the function's role check) or would pass on
    misread (`guard.takes_kind`), and a choice or number its component does not take. A
    caller a role-checked function would refuse (`app.common.role`) gets that refusal first,
    not the one of an input: the choices of another role's form are not told to them."""
    if getattr(demo, "colorconcept_guarding", False):
        return
    process_api = demo.process_api

    async def role_first(fn, inputs, refusal: gr.Error) -> gr.Error:
        """`refusal` of an input, unless the caller may not call `fn` at all."""
        denied = await anyio.to_thread.run_sync(role_refusal, demo.colorconcept_ctx, fn, inputs)
        return denied or refusal

    async def guarded(*args, **kwargs):
        token = guard.request_cookie(kwargs.get("request"))
        inputs = kwargs["inputs"] if "inputs" in kwargs else args[1] if len(args) > 1 else []
        fn = kwargs.get("block_fn", args[0] if args else None)
        fn = demo.fns[fn] if isinstance(fn, int) else fn
        refused = await input_refusal(fn, inputs, args, kwargs, token)
        if refused is not None:
            raise await role_first(fn, inputs, refused)
        try:
            result = await process_api(*args, **kwargs)
        except ComponentProcessingError as error:
            # An input its component cannot read (null, or text where a table goes): Gradio
            # refused it before the function (and its role check) ran, with a traceback in the
            # log per call and an empty "Error" to the caller (an outside check: 61 from a
            # visitor). An output that fails is the app's own fault and keeps its traceback.
            found = re.match(r"Could not preprocess input component at index (\d+)", str(error))
            if found is None:
                raise
            raise await role_first(fn, inputs, _not_its_value(fn, int(found[1]))) from None
        paths = list(guard.file_paths(result.get("data")))
        if token and paths:
            actor = await anyio.to_thread.run_sync(policy.actor, token)
            policy.issue(paths, actor)
        return result

    async def input_refusal(fn, inputs, args, kwargs, token) -> gr.Error | None:
        """Why the call of `fn` with `inputs` is refused before it runs, or None."""
        if fn is not None and fn.fn is None:
            # Gradio would fail in the call itself, logging a traceback per call.
            return gr.Error("This event runs in the browser only; nothing was run.", print_exception=False)
        if fn is not None and len(inputs or []) != len(fn.inputs):
            # Gradio's own refusal of too few would print every input it got, a session
            # token among them, to the server's log; too many it took, leaving the rest
            # unread (a client sending its fields in another order was not told).
            return gr.Error(
                f"This call sent {len(inputs or [])} input(s) where the function takes {len(fn.inputs)}; "
                "nothing was changed.",
                print_exception=False,
            )
        unstorable = guard.unstorable_input(inputs)
        if unstorable is not None:
            position, char = unstorable
            return gr.Error(
                f"{guard.input_name(fn, position)} holds a character that cannot be stored as text "
                f"(U+{ord(char):04X}, half of a UTF-16 pair); nothing was changed.",
                print_exception=False,
            )
        if any(True for _ in guard.file_paths(inputs)):
            refused = await anyio.to_thread.run_sync(policy.unreadable_input, inputs, token)
            if refused is not None:
                return gr.Error(
                    f"Not allowed: {guard.input_name(fn, refused)} names a file this session may not "
                    "fetch; a page sends only files it was given or uploaded (since the app last "
                    "started: after a restart, upload it again).",
                    print_exception=False,
                )
        mistyped = guard.mistyped_file(fn, inputs)
        if mistyped is not None:
            position, name = mistyped
            types = ", ".join(fn.inputs[position].file_types)
            return as_gr_error(
                ValueError(
                    f"{guard.input_name(fn, position)} takes files of the types {types}, got {shown(name)}; "
                    "nothing was changed."
                )
            )
        misshapen = guard.misshapen_input(fn, inputs)
        if misshapen is not None:  # Gradio's own refusal: an empty "Error" and a traceback logged
            return _not_its_value(fn, misshapen)
        state = kwargs["state"] if "state" in kwargs else args[2] if len(args) > 2 else None
        unchosen = guard.unchosen_input(fn, inputs, state)
        if unchosen is not None:  # Gradio's own refusal: the whole value quoted and logged
            return as_gr_error(ValueError(guard.unchosen_refusal(fn, unchosen, inputs[unchosen], state)))
        unread = guard.unreadable_event_data(fn, kwargs.get("event_data"))
        if unread is not None:
            return gr.Error(
                f"This call's event data is not what a {unread} event sends; nothing was run.",
                print_exception=False,
            )
        return None

    demo.process_api = guarded
    demo.colorconcept_guarding = True


def _not_its_value(fn, position: int) -> gr.Error:
    """The refusal of input `position` of Gradio function `fn`, a value its component cannot read."""
    return gr.Error(
        f"{guard.input_name(fn, position)} is not a value the {type(fn.inputs[position]).__name__} input takes; "
        "nothing was changed.",
        print_exception=False,
    )


def data_dir_refusal(data_dir: str | Path) -> str:
    """Why the app cannot start on `data_dir`, or "": it is a file, or nothing can be written
    in it (or, while it does not exist yet, in the nearest folder above it), checked with a
    probe file before any start-up work. A read-only data folder beside a writable database
    ended the start in a traceback, leaving a database half set up."""
    if in_the_way := file_in_the_way(data_dir):
        return f"the data folder {str(data_dir)!r} {in_the_way}; give --data-dir a folder"
    folder = nearest_existing_folder(data_dir)
    where = "" if folder == Path(data_dir).absolute() else f" (its nearest existing folder {str(folder)!r})"
    if why := unwritable_folder(folder):
        return (
            f"nothing can be written in the data folder {str(data_dir)!r}{where} ({why}); give --data-dir "
            "a folder this user may write in (nothing was written)"
        )
    return ""


def mark_ready(demo: gr.Blocks) -> None:
    """Say the launched `demo` serves: ``/healthz`` answers 200 from now on."""
    demo.colorconcept_ready.set()


class SecretServed(RuntimeError):
    """A configuration would put a secret in a folder the app serves."""
