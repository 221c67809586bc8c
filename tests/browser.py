"""The shared real-browser harness: Debian Chromium through Playwright, a live app per test.

Scenario files (``tests/e2e/test_*.py``) import the fixtures they use::

    from tests.browser import live_app, page  # noqa: F401  (pytest fixtures)

- ``live_app``: a real server on a fresh database under ``tmp_path`` (`tests.app_server`),
  as a `LiveApp` with a `gradio_client.Client` for set-up through the public API.
- ``page``: a Playwright page in a fresh browser context (own cookies and storage, so no
  state leaks between tests) of one headless Chromium per module (starting Chromium with a
  fresh profile for every test cost about a second each). When the test ends, pass or fail,
  the page's final state is saved to ``test-artifacts/<test name>.png`` and JavaScript
  errors the page raised are listed in ``page.js_errors``.

A check that something did *not* happen after an action waits first with `settled` (no Gradio
event pending on the page, or the action's event finished), never for a fixed time: a fixed
sleep is too short on a busy machine, where the check then runs before the event and cannot fail.

Chromium is Debian's headless shell (``/usr/bin/chromium-headless-shell``), else its full
browser (``/usr/bin/chromium``), or ``$CHROMIUM_PATH``, launched through ``executable_path``:
Playwright's own browser download does not work on our machines. ``scripts/ensure_chromium.sh``
installs both; without either these tests skip and say how.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from storage import open_db
from tests.app_server import ADMIN_PASSWORD, make_config, running_app

# Debian's headless build of the same Chromium (package chromium-headless-shell, Chromium's
# old headless mode: no browser UI code) spent a third less CPU on the browser walks than the
# full browser in its new headless mode (BENCHMARKS.md); the full one serves where it is alone.
HEADLESS_SHELL, FULL_CHROMIUM = "/usr/bin/chromium-headless-shell", "/usr/bin/chromium"
CHROMIUM = os.environ.get("CHROMIUM_PATH") or (
    HEADLESS_SHELL if shutil.which(HEADLESS_SHELL) else FULL_CHROMIUM
)
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # A public page (an MTurk HIT, routed by a test) may frame the app on 127.0.0.1; deployed,
    # the app is on a public host and Local Network Access does not apply.
    "--disable-features=LocalNetworkAccessChecks",
)
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
# A ceiling on each wait for a condition, not a measured time: at a load of 10 on two cores
# an invite link's sign-in took over 20 s (the pilot walk beside a full suite).
TIMEOUT_MS = 60_000
VIEWPORT = {"width": 1280, "height": 900}

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
expect.set_options(timeout=TIMEOUT_MS)


@dataclass(frozen=True)
class LiveApp:
    """A running app: its config, its address and a public-API client for set-up."""

    config: object
    client: object

    @property
    def url(self) -> str:
        """The server's address, ending in ``/``."""
        return self.client.src

    def admin_token(self) -> str:
        """A fresh admin session token (signs in through ``/login_admin``)."""
        token, _ = self.client.predict(ADMIN_PASSWORD, api_name="/login_admin")
        return token

    def invite(
        self, role: str, n: int = 1, *, background: str = "unknown", days: float = 7
    ) -> list[tuple[int, str]]:
        """Create `n` people of `role` through ``/admin_create_invites``.

        Returns ``(annotator_id, invite link pointed at this server)`` per person.
        """
        table = self.client.predict(
            self.admin_token(), role, n, background, days, api_name="/admin_create_invites"
        )
        return [(row[0], self.local(row[3])) for row in table["data"]]

    def query(self, sql: str, params: tuple = ()) -> list[dict]:
        """Rows of a read-only query on the app's database."""
        db = open_db(self.config.db_path)
        try:
            return [dict(row) for row in db.query(sql, params)]
        finally:
            db.close()

    def local(self, link: str) -> str:
        """`link` (built on the configured public URL) pointed at this server."""
        return link.replace(self.config.public_url.rstrip("/") + "/", self.url)


def sign_in(page, link: str) -> str:
    """Open an invite `link` in `page`; the pseudonym the Start tab then shows."""
    page.goto(link)
    status = page.locator("#start_status")
    try:
        expect(status).to_contain_text("Signed in as")
    except AssertionError:
        # Once in CI (2 busy cores), the page-load event answered nothing, with no error and
        # the link still in the address: Gradio lost its result. What a person does then, a
        # reload, is done once here; a link the app refused still fails below.
        if status.text_content().strip() != "You are not signed in." or link not in page.url:
            raise
        page.reload()
        expect(status).to_contain_text("Signed in as")
    # An invite opens the person's own tab, so the Start tab's text may be hidden now; it may
    # also still carry Gradio's "processing | 0.3s" while a follow-up event runs.
    return re.search(r"Signed in as (\S+?)\.?$", status.text_content().strip()).group(1)


def sign_in_admin(page) -> None:
    """On the Start tab of an opened page, sign in as the admin with the password."""
    page.fill("#start_password input", ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in as admin").click()
    expect(page.locator("#start_status")).to_have_text("Signed in as admin.")


# A Gradio status tracker (one per component, `statustracker` in Gradio 6's frontend) drops its
# ``hide`` class while an event that outputs to its component is pending or generating; it keeps
# showing (without ``hide``) an error or a validation message after its event has ended.
_EVENT_PENDING = """() => [...document.querySelectorAll('[data-testid="status-tracker"]')].some(
    (tracker) => !tracker.classList.contains("hide")
        && !tracker.querySelector(".error, .validation-error"))"""
SETTLE_TIMEOUT_MS = 60_000


def settled(page, action: Callable[[], object] | None = None) -> None:
    """Wait until no Gradio event is pending on `page`; with `action`, until the event(s) that
    `action` (a click, say) starts have finished.

    The condition is the page's own: Gradio draws a status tracker over each output of an
    event from the moment the event is dispatched (before it is sent) until its outputs are
    set, and a ``.then`` step is dispatched before the step it follows is marked done, so a
    chain shows as pending throughout. Without `action`, the wait first lets the browser
    render two frames, so that what an earlier click changed on the page (its handlers and
    the DOM updates they queue, events they dispatch included) has happened; then it waits
    until no tracker shows an event as pending. With `action`, the page is settled first,
    `action` runs, and the wait is for a tracker to have shown an event as pending since and
    for none to show one now: `action` must start an event with at least one output that
    shows progress, or this times out. Events with ``show_progress="hidden"`` (timer ticks)
    show no tracker and are not waited for. `SETTLE_TIMEOUT_MS` is a ceiling on waiting on a
    busy machine, not a time that anything is expected to take.
    """
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.wait_for_function(f"() => !({_EVENT_PENDING})()", timeout=SETTLE_TIMEOUT_MS)
    if action is None:
        return
    page.evaluate(
        f"""() => {{
            const pending = {_EVENT_PENDING};
            const record = () => {{ if (pending()) window.settleSeen = true; }};
            window.settleSeen = false;
            window.settleObserver?.disconnect();
            window.settleObserver = new MutationObserver(record);
            window.settleObserver.observe(document.body,
                {{subtree: true, childList: true, attributes: true, attributeFilter: ["class"]}});
        }}"""
    )
    action()
    page.wait_for_function(f"() => window.settleSeen && !({_EVENT_PENDING})()", timeout=SETTLE_TIMEOUT_MS)
    page.evaluate("() => window.settleObserver.disconnect()")


def browser_state(page, storage_key: str, secret: str):
    """What a `gr.BrowserState` with `storage_key` and `secret` keeps in `page`'s local
    storage, decoded (None when nothing is kept).

    Gradio's page writes ``<iv>:<ciphertext>``: CryptoJS's AES with the SHA-256 hex digest of
    `secret` as a passphrase, i.e. OpenSSL's ``Salted__`` format (key and IV from MD5
    EVP_BytesToKey; the IV written before the colon is not the one used).
    """
    stored = page.evaluate("(key) => localStorage.getItem(key)", storage_key)
    if not stored:
        return None
    blob = base64.b64decode(stored.split(":", 1)[1])
    assert blob[:8] == b"Salted__", "not CryptoJS's OpenSSL format"
    salt, body = blob[8:16], blob[16:]
    passphrase = hashlib.sha256(secret.encode()).hexdigest().encode()
    derived, block = b"", b""
    while len(derived) < 48:
        block = hashlib.md5(block + passphrase + salt).digest()
        derived += block
    decryptor = Cipher(algorithms.AES(derived[:32]), modes.CBC(derived[32:48])).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    plain = unpadder.update(decryptor.update(body) + decryptor.finalize()) + unpadder.finalize()
    return json.loads(plain)


def until_stored(page, storage_key: str, secret: str, done: Callable[[object], bool]) -> None:
    """Wait until the `gr.BrowserState` kept under `storage_key` satisfies `done`.

    Its saving event shows no progress, so `settled` does not wait for it: a reload right after
    a change could come before the change is kept. Each wait is for the stored text to change.
    """
    while not done(browser_state(page, storage_key, secret)):
        stored = page.evaluate("(key) => localStorage.getItem(key)", storage_key)
        page.wait_for_function(
            "([key, seen]) => localStorage.getItem(key) !== seen",
            arg=[storage_key, stored],
            timeout=SETTLE_TIMEOUT_MS,
        )


def pick(page, elem_id: str, option: str, *, tries: int = 5) -> None:
    """Choose `option` in the `gr.Dropdown` with `elem_id`, and check that it stays chosen.

    A dropdown whose choices are refreshed on sign-in (``session_token.change``) may be
    reset by that refresh if it lands after the click, so the choice is made on a settled
    page and checked once the events it may have started (and any still running) have
    ended (`settled`), and made again while something reset it.
    """
    field = page.locator(f"#{elem_id} input")
    for _ in range(tries):
        settled(page)
        field.click()
        page.get_by_role("option", name=option).click()
        settled(page)
        if field.input_value() == option:
            return
    assert field.input_value() == option, f"#{elem_id} did not keep {option!r} after {tries} tries"


def click_to_replace(page, elem_id: str) -> None:
    """Click the search box `elem_id`; once its text (if any) is selected, typing replaces it.

    The page selects the text a moment after the click (`app.common.JS`); a person types later
    than that, so the test waits for it.
    """
    page.locator(f"#{elem_id} input").click()
    page.wait_for_function(
        "(id) => { const i = document.querySelector(`#${id} input`);"
        " return i.value.length === 0 || (i.selectionStart === 0 && i.selectionEnd === i.value.length); }",
        arg=elem_id,
    )


def search(page, elem_id: str, option: str, typed: str | None = None, *, tries: int = 3) -> None:
    """Click the search box `elem_id`, type `typed` (default `option`) and choose `option`.

    A refresh of the box's choices that lands while it is typed into (an event of the page
    still running) replaces the text, and the list is never filtered (a clean-clone run
    waited 60 s on 94 unfiltered options): the text is typed again while that happened.
    """
    field = page.locator(f"#{elem_id} input")
    typed = option if typed is None else typed
    for _ in range(tries):
        click_to_replace(page, elem_id)
        page.keyboard.type(typed)
        # Wait for the list to be filtered before clicking (under load it can still be
        # re-ordering, and a click lands on the option that moved under the pointer), or for
        # the text typed to be gone.
        page.wait_for_function(
            "([id, typed]) => { const i = document.querySelector(`#${id} input`);"
            " if (i.value !== typed) return true; const t = typed.toLowerCase();"
            " return [...document.querySelectorAll('[role=option]')]"
            ".every((o) => o.textContent.toLowerCase().includes(t)); }",
            arg=[elem_id, typed],
        )
        if field.input_value() == typed:
            break
    page.get_by_role("option", name=option, exact=True).click()
    expect(field).to_have_value(option)


def open_tab(page, title: str) -> None:
    """Click the tab called `title` (it must be visible to the signed-in person)."""
    page.get_by_role("tab", name=title).click()


def _require_chromium() -> None:
    if not shutil.which(CHROMIUM):
        pytest.skip(
            f"Chromium is missing at {CHROMIUM}: run scripts/ensure_chromium.sh "
            "(as root: apt-get install chromium-headless-shell chromium) or set CHROMIUM_PATH"
        )


@contextlib.contextmanager
def chromium_browser() -> Iterator[object]:
    """A headless Debian Chromium (`playwright.sync_api.Browser`), for tests that open
    several contexts in one browser; closed (and Playwright stopped) when the block ends.
    Playwright's sync API runs an event loop in this thread meanwhile, so nothing in the
    block may call ``asyncio.run``."""
    _require_chromium()
    with playwright_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            browser.close()


_CONTRAST = """(element) => {
    const rgb = (text) => text.match(/[\\d.]+/g).slice(0, 4).map(Number);
    const luminance = ([r, g, b]) => {
        const lin = (c) => (c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
        return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
    };
    let back = element;
    while (back && rgb(getComputedStyle(back).backgroundColor)[3] === 0) back = back.parentElement;
    const fore = luminance(rgb(getComputedStyle(element).color));
    const behind = back ? luminance(rgb(getComputedStyle(back).backgroundColor)) : 1;
    return (Math.max(fore, behind) + 0.05) / (Math.min(fore, behind) + 0.05);
}"""


def contrast(locator) -> float:
    """WCAG's contrast ratio of the element's text color against the first opaque background
    behind it (white if none): 1 to 21; AA asks at least 4.5 for body text."""
    return locator.evaluate(_CONTRAST)


def focused(page, away_from: str = "") -> str:
    """Where the keyboard focus is, once it is off the page's top: ``"<nearest id>: <text>"``
    (the text cut at 80 characters). Waits for it to leave ``<body>``, where an action that
    hid the focused control left it (a screen reader then starts over at the top), and the
    elements `away_from` matches (the controls the action disables, a moment after its
    result shows)."""
    page.wait_for_function(
        "(away) => { const e = document.activeElement;"
        " return e !== document.body && !(away && e.closest(away)); }",
        arg=away_from,
    )
    return page.evaluate(
        "() => { const e = document.activeElement;"
        " return `${e.closest('[id]')?.id}: ${e.textContent.trim().slice(0, 80)}`; }"
    )


def table_rows(page, elem_id: str) -> list[list[str]]:
    """The body cells of the `gr.Dataframe` with `elem_id`, as text, row by row.

    Gradio draws a virtual table: only rows scrolled into view are in the page, which is
    every row of the small tables the scenarios read.
    """
    rows = page.locator(f"#{elem_id} [role=row][data-index]")
    return [[cell.strip() for cell in row.locator("[role=gridcell]").all_inner_texts()] for row in rows.all()]


def artifact_path(test_name: str) -> Path:
    """``test-artifacts/<test name>.png``, with characters unsafe in file names replaced."""
    return ARTIFACTS / (re.sub(r"[^A-Za-z0-9_.-]+", "-", test_name).strip("-") + ".png")


@pytest.fixture
def live_app(tmp_path) -> Iterator[LiveApp]:
    """A real app server on a fresh database and data folder under `tmp_path`."""
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        yield LiveApp(config, client)


@pytest.fixture
def page(request, module_chromium) -> Iterator[object]:
    """A page in a fresh browser context (its own cookies and storage) of the module's
    Chromium (``module_chromium``, `tests.conftest`); its final state is saved as the
    test's screenshot. A test marked ``browser_context(**options)`` gets a context made
    with those options as well."""
    marked = request.node.get_closest_marker("browser_context")
    context = module_chromium.new_context(viewport=VIEWPORT, **(marked.kwargs if marked else {}))
    context.set_default_timeout(TIMEOUT_MS)
    browser_page = context.new_page()
    browser_page.js_errors = []
    browser_page.on("pageerror", lambda error: browser_page.js_errors.append(str(error)))
    try:
        yield browser_page
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        browser_page.screenshot(path=str(artifact_path(request.node.name)), full_page=True)
        context.close()


def start_evaluation(page, labels, concepts, run: str, *, cfg: str = "7.5", seeds: int = 1) -> None:
    """On the Evaluate tab (open), start an implicit run of natural photos: the models whose
    checkboxes read `labels`, each of `concepts` typed and chosen, guidance scales `cfg`,
    `seeds` per cell, named `run`. The plan and progress are the caller's to check."""
    for label in labels:
        page.get_by_label(label, exact=True).check()
    concept_box = page.locator("#evaluate_concepts input")
    for key in concepts:
        concept_box.click()
        page.keyboard.type(key)
        page.get_by_role("option", name=key, exact=True).click()
    page.locator("#evaluate_styles").get_by_label("clip-art cartoon").uncheck()
    page.locator("#evaluate_cfg textarea, #evaluate_cfg input").first.fill(cfg)
    page.locator("#evaluate_seeds input").fill(str(seeds))
    page.locator("#evaluate_run_name textarea").fill(run)
    page.get_by_role("button", name="Start").click()


def answerable(page, shown: str) -> None:
    """Wait until the page takes an answer to what element `shown` (``"#expert_vote_concept"``,
    ``"#participant_progress"``) shows: one in its first `app.common.ANSWER_DWELL_MS` is
    dropped, and the page marks the text ``data-cc-ready`` after them."""
    expect(page.locator(f"{shown} [id^='cc-shown-'][data-cc-ready]")).to_have_count(1)


def second_click(page, locator) -> None:
    """Press and release the mouse on `locator` as the second click of a double click
    (Chromium's input events with a click count of 2: ``detail`` 2, then ``dblclick``)."""
    box = locator.bounding_box()
    at = {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}
    cdp = page.context.new_cdp_session(page)
    for kind in ("mousePressed", "mouseReleased"):
        cdp.send("Input.dispatchMouseEvent", {"type": kind, "button": "left", "clickCount": 2, **at})
    cdp.detach()
