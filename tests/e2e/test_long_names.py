"""A very long name in a read-only result table, in a real browser: it wraps within its
column, whole, and the table's other columns stay in view in a 1400 px window (`app.common.CSS`
caps the width a long text asks for).

Two tables of the app, each with a name of about 200 characters and no space in it: the
Sketches tab's import results (a file imported with a long name; a table that wraps its
text) and the Study tab's list of studies (ten columns; a table that did not wrap).
"""

import pytest

from tests.app.test_study import _choices, _prepare
from tests.browser import expect, live_app, open_tab, page, settled, sign_in_admin  # noqa: F401
from tests.e2e.test_sketches import PEAR

pytestmark = pytest.mark.browser
WINDOW = {"width": 1400, "height": 900}
# Gradio keeps 200 bytes of an uploaded file's name (`strip_invalid_filename_characters`).
FILE_NAME = ("pear-outline-" + "drawn_for_the_pilot_by_hand" * 7)[:196] + ".svg"
STUDY_NAME = "pilot_" + "long-study-name" * 11 + "x" * 4

# Where each column header ends, the right edge of the part of the table that is in view
# (Gradio's scrolling viewport) and of the window; and the body cell reading `name`: its
# text and whether the text is cut (wider or taller than the cell shows).
_LAYOUT = """([id, name]) => {
    const table = document.getElementById(id);
    const shown = table.querySelector('.virtual-table-viewport').getBoundingClientRect().right;
    const headers = [...table.querySelectorAll('[role=columnheader]')].map(
        (h) => [h.textContent.trim(), h.getBoundingClientRect().right]);
    const cells = [...table.querySelectorAll('[role=gridcell]')];
    const cell = cells.find((c) => c.textContent.trim() === name);
    if (!cell) return {window: window.innerWidth, shown, headers, text: null};
    const text = cell.querySelector('span.text');
    const box = cell.getBoundingClientRect(), inner = text.getBoundingClientRect();
    const cut = text.scrollWidth > text.clientWidth + 1 || text.scrollHeight > text.clientHeight + 1
        || inner.right > box.right + 1 || inner.bottom > box.bottom + 1;
    return {window: window.innerWidth, shown, headers, text: cell.textContent.trim(), right: box.right, cut};
}"""


def _check_in_view(page, elem_id: str, name: str) -> None:
    settled(page)  # the table has measured its columns (on a resize, in a frame)
    layout = page.evaluate(_LAYOUT, [elem_id, name])
    edge = min(layout["window"], layout["shown"]) + 1  # a pixel for rounding
    beyond = [(header, round(right)) for header, right in layout["headers"] if right > edge]
    assert beyond == [], f"#{elem_id}: columns end beyond the table's visible edge at {edge:.0f} px: {beyond}"
    assert layout["text"] == name, f"#{elem_id}: no cell reads the whole name"
    assert layout["right"] <= edge and layout["cut"] is False, f"#{elem_id}: the name is cut: {layout}"


def test_a_long_name_wraps_in_its_column_and_the_other_columns_stay_in_view(live_app, page, tmp_path):
    _prepare(live_app.config)
    admin = live_app.admin_token()
    truth, chosen = _choices(live_app.client, admin)
    live_app.client.predict(
        admin, STUDY_NAME, truth, "clipart", chosen, 8, 6, 0.1, 75, 0, api_name="/study_create"
    )
    (tmp_path / "pear.svg").write_text(PEAR, encoding="utf-8")
    (tmp_path / FILE_NAME).write_text(PEAR, encoding="utf-8")
    page.set_viewport_size(WINDOW)
    page.goto(live_app.url)
    sign_in_admin(page)

    open_tab(page, "Sketches")
    page.set_input_files(
        "#sketches_files input[type=file]", [str(tmp_path / "pear.svg"), str(tmp_path / FILE_NAME)]
    )
    expect(page.locator("#sketches_files")).to_contain_text("pilot")
    page.click("#sketches_import")
    expect(page.locator("#sketches_results [role=row][data-index]")).to_have_count(2)
    _check_in_view(page, "sketches_results", FILE_NAME)

    open_tab(page, "Study")
    expect(page.locator("#study_list [role=row][data-index]")).to_have_count(1)
    _check_in_view(page, "study_list", STUDY_NAME)
    assert page.js_errors == []
