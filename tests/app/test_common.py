"""`app.common.role`: role check, per-request database, what a person sees of an error."""

import logging
import sqlite3

import gradio as gr
import pytest

from annotation.errors import Conflict, InvalidInput
from annotation.people.passwords import login_admin
from app.common import DATABASE_BUSY, UNEXPECTED, AppContext, link_days, note_area, role, whole_number, wire
from app.tabs import Tab
from storage import BUSY_TIMEOUT_MS
from tests.app_server import ADMIN_PASSWORD, make_config

SECRET = "/srv/colorconcept/data/private.sqlite"


@pytest.fixture
def signed_in(tmp_path):
    """An `AppContext` on a fresh database and an admin session token."""
    ctx = AppContext.prepare(make_config(tmp_path))
    with ctx.db() as db:
        token = login_admin(db, ADMIN_PASSWORD).token
    return ctx, token


class Probe(Tab):
    """A tab whose handlers fail in the ways a real one can."""

    @role("admin")
    def lookup(self, db, actor, key: str) -> str:
        """A handler with a bug: it looks `key` up in an empty mapping."""
        return {}[f"{SECRET}:{key}"]

    @role("expert")
    def lookup_as_expert(self, db, actor, key: str) -> str:
        return {}[key]

    @role("admin")
    def conflict(self, db, actor):
        raise Conflict("coloring <b>7</b> is excluded")

    @role("admin")
    def quote(self, db, actor, name: str):
        raise Conflict(f"study {name!r} is a draft")

    @role("admin")
    def own_error(self, db, actor):
        raise gr.Error("already a gr.Error")

    @role("admin")
    def close(self, db, actor, annotator_id: float, why: str):
        """Refuses as a library does: by its parameters' names."""
        raise InvalidInput(
            f"`why` is empty: say why annotator `annotator_id` {annotator_id} is closed (`why`)"
        )

    @role("admin")
    def write_at_once(self, db, actor):
        """A write that does not wait for another writer (SQLite's busy timeout 0)."""
        db.execute("PRAGMA busy_timeout = 0")
        try:
            db.execute("begin immediate")
        finally:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def test_an_unexpected_exception_is_logged_and_shown_by_its_class_only(signed_in, caplog):
    ctx, token = signed_in
    with caplog.at_level(logging.ERROR, logger="app.common"), pytest.raises(gr.Error) as raised:
        Probe(ctx, {}).lookup(token, "<b>x</b>")
    assert raised.value.message == UNEXPECTED.format(kind="KeyError")
    assert raised.value.message.startswith(
        "Something went wrong on the server (KeyError); it has been logged."
    )
    assert SECRET not in raised.value.message and "<b>" not in raised.value.message
    [record] = caplog.records
    assert record.getMessage() == "unexpected error in lookup"
    assert record.exc_info[0] is KeyError and SECRET in str(record.exc_info[1])


def test_a_locked_database_is_named_as_such_not_as_something_that_went_wrong(signed_in, caplog, tmp_path):
    ctx, token = signed_in
    holder = sqlite3.connect(ctx.config.db_path)
    holder.execute("begin immediate")  # another process's long write (a restore, say)
    try:
        with caplog.at_level(logging.ERROR, logger="app.common"), pytest.raises(gr.Error) as raised:
            Probe(ctx, {}).write_at_once(token)
    finally:
        holder.rollback()
        holder.close()
    assert raised.value.message == DATABASE_BUSY
    assert raised.value.message.startswith("The database is busy (a backup, a restore or another long write")
    [record] = caplog.records
    assert record.getMessage() == "write_at_once refused: " + DATABASE_BUSY + " (database is locked)"
    assert record.exc_info is None  # a condition of the server, not a bug: no traceback


def test_a_start_says_what_an_interrupted_restore_left_and_a_database_others_may_read(tmp_path, caplog):
    config = make_config(tmp_path)
    AppContext.prepare(config).close()
    config.db_path.chmod(0o644)  # as a copy made with the default mode is
    staged = config.db_path.with_name(f".{config.db_path.name}.restoring")
    staged.write_bytes(b"a restore's staged copy")
    with caplog.at_level(logging.WARNING, logger="app.common"):
        AppContext.prepare(config).close()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [
        f"{str(staged)!r} is what an interrupted restore left: it was never put in place, and "
        f"{str(config.db_path)!r} is the database in use; run the restore again, or delete that file",
        f"the database {str(config.db_path)!r} may be read by other accounts of this machine (mode 644: "
        f"it holds every account and hash); run: chmod 600 {config.db_path}",
    ]
    config.db_path.chmod(0o600)
    staged.unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="app.common"):
        AppContext.prepare(config).close()
    assert [r for r in caplog.records if r.levelno == logging.WARNING] == []


def test_domain_errors_show_their_escaped_message_and_are_not_logged(signed_in, caplog):
    ctx, token = signed_in
    probe = Probe(ctx, {})
    with caplog.at_level(logging.ERROR, logger="app.common"):
        with pytest.raises(gr.Error) as raised:
            probe.conflict(token)
        # `<` written as text starts no markup; a `>` stays, so an API client reads ">= 0"
        assert raised.value.message == "coloring &lt;b>7&lt;/b> is excluded"
        with pytest.raises(gr.Error) as raised:
            probe.own_error(token)
        assert raised.value.message == "already a gr.Error"
        with pytest.raises(gr.Error) as raised:
            probe.lookup_as_expert(token, "x")
        assert "needs the role expert" in raised.value.message
    assert caplog.records == []


def _wired(token: str, method, *inputs):
    """`method` wired to a button with the session `token` and the components `inputs` make
    (each a function, called inside the Blocks); its note, its page function and its API twin."""
    name = f"probe_{method.__name__}"
    with gr.Blocks() as demo:
        fields = [gr.State(token), *(make() for make in inputs)]
        note = note_area("probe_note")
        wire(gr.Button().click, method, fields, [], note=note, api_name=name)
    page = next(f for f in demo.fns.values() if f.name == f"page_{name}")
    api = next(f for f in demo.fns.values() if f.api_name == name)
    return note, page, api


def test_a_refusal_on_the_page_names_fields_by_their_labels_and_the_api_by_parameters(signed_in):
    ctx, token = signed_in
    probe = Probe(ctx, {})
    note, page, api = _wired(
        token,
        probe.close,
        lambda: gr.Number(label="Person (id or pseudonym)"),
        lambda: gr.Textbox(label="Why"),
    )
    with pytest.warns(UserWarning, match=r"^Why is empty: say why annotator Person \(id or pseudonym\) 3"):
        answer = page.fn(token, 3, "")  # the toast, its code ticks left out
    assert answer == {
        note: "⚠️ `Why` is empty: say why annotator `Person (id or pseudonym)` 3 is closed (`Why`)"
    }
    # The API names its inputs by the parameters, as its refusals do.
    with pytest.raises(gr.Error) as raised:
        api.fn(token, 3, "")
    assert raised.value.message == "`why` is empty: say why annotator `annotator_id` 3 is closed (`why`)"


def test_a_refusal_on_the_page_quotes_a_name_without_its_links_or_images(signed_in):
    ctx, token = signed_in
    probe = Probe(ctx, {})
    note, page, _ = _wired(token, probe.quote, lambda: gr.Textbox(label="Name"))
    with pytest.warns(UserWarning):
        answer = page.fn(
            token, "![p](http://host/p.png) [x](http://host) https://a.example _Www.b.example a@c.example"
        )
    shown = answer[note]
    assert not any(mark in shown.lower() for mark in ("![", "](", "://", "www.", "@"))
    assert shown == (
        "⚠️ study '&#33;[p]&#40;http&#58;//host/p.png) [x]&#40;http&#58;//host) "
        "https&#58;//a.example &#95;Www&#46;b.example a&#64;c.example' is a draft"
    )
    # Nor with its emphasis: '**apple**' read as a bold 'apple' (outside probe 190).
    with pytest.warns(UserWarning):
        answer = page.fn(token, "**apple** _b_ ~c~ `d`")
    assert (
        answer[note] == "⚠️ study '&#42;&#42;apple&#42;&#42; &#95;b&#95; &#126;c&#126; &#96;d&#96;' is a draft"
    )


def test_a_refusals_own_emphasis_stays_and_only_quoted_values_lose_theirs():
    from app.common import escape, refusal_text

    said = "press *Next coloring*: the designer's 'a_b*c*' and \"don't *d*\" are `min_k`"
    expected = (
        "⚠️ press *Next coloring*: the designer's 'a&#95;b&#42;c&#42;' and \"don't &#42;d&#42;\" are `min_k`"
    )
    assert refusal_text(said) == expected
    assert refusal_text(escape(said)) == escape(expected).replace("&amp;#", "&#")


def test_a_field_named_in_words_before_its_parameter_is_named_by_its_label_once():
    # The Study tab read "Model outputs (`Model outputs (model · run · CFG; default 3)`)" (outside probe 181).
    from app.common import relabelled

    labels = {"sources": "Model outputs (model · run · CFG; default 3)", "n_concepts": "Number of concepts"}
    assert relabelled("Model outputs (`sources`): choose two or more", labels) == (
        "`Model outputs (model · run · CFG; default 3)`: choose two or more"
    )
    assert relabelled("Concepts (`n_concepts`): only 4; `sources` too", labels) == (
        "Concepts (`Number of concepts`): only 4; `Model outputs (model · run · CFG; default 3)` too"
    )


@pytest.mark.parametrize("value, expected", [(3, 3), (3.0, 3), (" 12 ", 12), ("-4", -4)])
def test_whole_number_accepts_whole_numbers_and_their_digits(value, expected):
    number = whole_number(value, "count")
    assert number == expected and type(number) is int


@pytest.mark.parametrize(
    "value, shown",
    [
        (1.5, "1.5"),
        ("1.5", "'1.5'"),
        (None, "nothing (an empty box, or a number too large to hold)"),
        ("  ", "nothing"),
        (True, "True"),
        (float("nan"), "nan"),
        ("12abc", "'12abc'"),
        ([1], "[1]"),
        ("\u0663", "'\u0663'"),  # an Arabic-Indic 3, read as 3 (outside probe 163)
    ],
)
def test_whole_number_refuses_anything_else_naming_the_field(value, shown):
    with pytest.raises(ValueError) as raised:
        whole_number(value, "annotator id")
    assert str(raised.value) == f"`annotator id` must be a whole number, got {shown}"


@pytest.mark.parametrize("value, shown", [(0, "0"), (10_001, "10,001"), ("99999999999", "99,999,999,999")])
def test_whole_number_with_a_maximum_says_the_range(value, shown):
    assert whole_number("10000", "Bootstrap resamples", minimum=1, maximum=10_000) == 10_000
    with pytest.raises(
        ValueError, match=rf"^`Bootstrap resamples` must be a whole number from 1 to 10,000, got {shown}$"
    ):
        whole_number(value, "Bootstrap resamples", minimum=1, maximum=10_000)


@pytest.mark.parametrize("days", [1 / 24, 0.5, 7, 3650])
def test_link_days_takes_one_hour_to_ten_years(days):
    assert link_days(days, "Link valid for (days)") == days


@pytest.mark.parametrize(
    "value, problem",
    [
        (0, r"must be in \[1/24, 3650\] days \(one hour to ten years\), got 0$"),
        (1 / 25, r"must be in \[1/24, 3650\] days"),
        (3650.5, r"must be in \[1/24, 3650\] days \(one hour to ten years\), got 3650.5$"),
        (None, r"must be a number of days, got nothing \(an empty box, or a number too large to hold\)$"),
        ("", "must be a number of days, got nothing$"),
        ("7", "must be a number of days, got '7'$"),
        (True, "must be a number of days, got True$"),
        (float("inf"), "must be a number of days, got inf$"),
    ],
)
def test_link_days_refuses_anything_else_naming_the_field(value, problem):
    with pytest.raises(ValueError, match=r"^`Link valid for \(days\)` " + problem):
        link_days(value, "Link valid for (days)")
