"""The admin's Sketches tab in a real browser: coverage, importing a folder's files, choosing.

The admin refreshes the coverage, imports two files at once (a line-art SVG named after
its concept and a photo, which is refused with the reason), then opens the concept's
sketches and makes the imported one the sketch designers color; then generates candidates
for another concept and finds them refused, that concept's sketches shown.
"""

import re

import numpy as np
import pytest
from PIL import Image

from tests.browser import ADMIN_PASSWORD, expect, live_app, page, search, table_rows  # noqa: F401

pytestmark = pytest.mark.browser
PEAR = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="400">'
    '<rect width="300" height="400" fill="white"/>'
    '<path d="M150,60 C120,60 110,150 90,220 C60,320 100,380 150,380 C200,380 240,320 '
    '210,220 C190,150 180,60 150,60 Z" fill="none" stroke="black" stroke-width="6"/>'
    '<path d="M150,60 L160,20" stroke="black" stroke-width="6"/></svg>'
)


def _files(folder):
    pear = folder / "pear.svg"
    pear.write_text(PEAR, encoding="utf-8")
    rng = np.random.default_rng(0)
    photo = np.clip(rng.normal(128, 50, (120, 160, 3)), 0, 255).astype(np.uint8)
    plum = folder / "plum.png"
    Image.fromarray(photo).save(plum)
    return [str(pear), str(plum)]


def test_admin_imports_a_folder_of_sketches_and_chooses_the_one_designers_color(live_app, page, tmp_path):
    page.goto(live_app.url)
    page.fill("#start_password input", ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in as admin").click()
    expect(page.locator("#start_status")).to_have_text("Signed in as admin.")
    page.get_by_role("tab", name="Sketches").click()
    # Filled as the tab opens: no Refresh needed.
    expect(page.locator("#sketches_coverage")).to_contain_text("base concepts have a sketch")
    expect(page.locator("#sketches_missing [role=row][data-index]").first).to_be_visible()
    covered = page.locator("#sketches_coverage").inner_text()

    page.set_input_files("#sketches_files input[type=file]", _files(tmp_path))
    expect(page.locator("#sketches_files")).to_contain_text(re.compile(r"plum\s*\.png"))
    page.click("#sketches_import")
    expect(page.locator("#sketches_results [role=row][data-index]")).to_have_count(2)
    pear, plum = table_rows(page, "sketches_results")
    assert pear[:2] == ["pear.svg", "pear"] and pear[2].startswith("imported as sketch ")
    assert plum[:2] == ["plum.png", "plum"] and plum[2].startswith("refused: plum.png: not line art")
    sketch_id = pear[2].rsplit(" ", 1)[1]
    # The imported files leave the upload list, and the coverage follows without a Refresh.
    expect(page.locator("#sketches_files")).not_to_contain_text("plum")
    expect(page.locator("#sketches_coverage")).not_to_have_text(covered)
    search(page, "sketches_base", "pear")
    page.click("#sketches_show")
    expect(page.locator("#sketches_gallery img")).to_have_count(1)
    assert [row[:3] for row in table_rows(page, "sketches_table")] == [[sketch_id, "imported", "yes"]]
    # A picture clicked gives its id (outside probe 222: the field stayed empty, and *Use this
    # sketch* answered "sketch id must be a whole number, got nothing").
    page.locator("#sketches_gallery img").first.click()
    expect(page.locator("#sketches_sketch_id input")).to_have_value(sketch_id)
    page.keyboard.press("Escape")  # the click opened the picture's preview: back to the grid
    expect(page.locator("#sketches_gallery img")).to_have_count(1)
    page.locator("#sketches_why textarea").fill("clean outline")
    page.click("#sketches_use")
    expect(page.locator("#sketches_message")).to_contain_text(
        f"Sketch {sketch_id} is now the sketch of pear."
    )
    [row] = live_app.query("select base, source, selected from sketches where id = ?", (int(sketch_id),))
    assert row == {"base": "pear", "source": "imported", "selected": 1}

    # Five candidates for another concept from the tiny model: its noise is refused, each
    # candidate saying why, and that concept's sketches show above, where one is chosen.
    page.locator("#sketches_model input").click()
    page.get_by_role("option", name="Tiny random SD (test model) (tiny-random)", exact=True).click()
    search(page, "sketches_generate_base", "apple")
    page.click("#sketches_generate")
    expect(page.locator("#sketches_candidates img")).to_have_count(5)
    expect(page.locator("#sketches_generated")).to_contain_text(
        "None of the 5 candidates for apple is line art; nothing is stored."
    )
    expect(page.locator("#sketches_candidates")).to_contain_text("refused: not line art")
    expect(page.locator("#sketches_base input")).to_have_value("apple")
    expect(page.locator("#sketches_gallery img")).to_have_count(1)
    assert [row[1:3] for row in table_rows(page, "sketches_table")] == [["shipped", "yes"]]
    # A refusal's pop-up says it without the note's Markdown marks.
    page.locator("#sketches_sketch_id input").fill("abc")
    page.click("#sketches_use")
    expect(page.locator("#sketches_message")).to_contain_text("sketch id must be a whole number, got 'abc'")
    expect(page.locator(".toast-body").last).to_contain_text("sketch id must be a whole number, got 'abc'")
    assert "`" not in page.locator(".toast-body").last.inner_text()
    page.locator("#sketches_sketch_id input").fill(sketch_id)
    # An id of pear's typed while apple is shown is refused beside the button.
    page.click("#sketches_use")
    expect(page.locator("#sketches_message")).to_contain_text(
        f"sketch {sketch_id} is a sketch of 'pear', not of 'apple'"
    )
    assert page.js_errors == []
