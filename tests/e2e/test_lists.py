"""Lists that start empty (issue 14.7), in a real browser: a tab shows what it lists when it
is opened, without a Refresh click; an empty table shows a note saying what fills it, never
bare headers; a summary reads as sentences."""

import pytest

from storage import open_db
from tests.browser import ARTIFACTS, expect, live_app, open_tab, page, sign_in_admin  # noqa: F401
from tests.qc_data import add_coloring

pytestmark = pytest.mark.browser


def test_tabs_load_their_lists_when_opened_and_empty_tables_say_what_fills_them(live_app, page):
    designers = [annotator for annotator, _ in live_app.invite("designer", 2)]
    db = open_db(live_app.config.db_path)
    try:
        for designer, rgb in zip(designers, [(200, 30, 40), (190, 40, 30)]):
            add_coloring(db, live_app.config.data_dir, designer, "apple", rgb)
    finally:
        db.close()
    page.goto(live_app.url)
    sign_in_admin(page)

    open_tab(page, "Admin")  # no Refresh click: the tab loads its lists as it opens
    expect(page.locator("#admin_annotators [role=row][data-index]")).to_have_count(2)
    expect(page.locator("#admin_annotators_empty")).to_be_hidden()
    expect(page.locator("#admin_coverage")).to_contain_text("concepts have 5 colorings")
    expect(page.locator("#admin_coverage")).to_contain_text("2 submitted")
    assert "{" not in page.locator("#admin_coverage").inner_text()
    for empty in ("admin_pending", "admin_failed_sign_ins", "admin_invites"):
        expect(page.locator(f"#{empty}_empty")).to_be_visible()
        expect(page.locator(f"#{empty} [role=grid]")).to_be_hidden()
    expect(page.locator("#admin_pending_empty")).to_contain_text("Nobody is waiting")
    # A table filled by a button says which, instead of an empty grid headed "1 2 3".
    expect(page.locator("#admin_stability_table_empty")).to_have_text(
        "No concept listed: Show stability lists those with counted designer colorings."
    )
    expect(page.locator("#admin_stability_table [role=grid]")).to_be_hidden()
    page.screenshot(path=str(ARTIFACTS / "lists-admin.png"))

    open_tab(page, "Expert review")
    concept = page.locator("#expert_concept input")
    concept.click()
    expect(page.get_by_role("option", name="apple (2 designers, 2 colorings)")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#expert_grid_table_empty")).to_contain_text("Pick a concept")
    expect(page.locator("#expert_summary")).to_have_text("No review has all its votes yet.")

    open_tab(page, "Leaderboards")
    note = page.locator("#leaderboard_note")
    expect(note).to_contain_text("There is no stored model distribution yet: run a model on the Evaluate tab")
    for n in (6, 7, 8):
        expect(page.locator(f"#leaderboard_table{n}_empty")).to_contain_text(
            "Nothing to show: sensitivity compares"
        )
        expect(page.locator(f"#leaderboard_table{n} [role=columnheader]").first).to_be_hidden()
    page.get_by_text("Robustness of the paper's open choices").click()
    expect(page.locator("#leaderboard_robust_table_empty")).to_have_text(
        "Nothing yet: press Check robustness."
    )
    expect(page.locator("#leaderboard_robust_table [role=grid]")).to_be_hidden()
    expect(page.locator(".toast-body")).to_have_count(0)  # an empty study is no refusal
    page.screenshot(path=str(ARTIFACTS / "lists-leaderboards.png"))
    assert page.js_errors == []
