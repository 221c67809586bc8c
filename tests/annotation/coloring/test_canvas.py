"""The area around a drawing, and how much of it a coloring paints."""

import numpy as np
import pytest

from annotation.coloring.canvas import BACKGROUND_MIN_SHARE, BACKGROUND_PAINTED, painted_background
from annotation.coloring.fill import blank_color_layer, border_region, flood_fill, line_mask, painted_mask
from annotation.sketches.importing import rasterize_svg

RED = (220, 30, 40)


def _circle(extra: str = "") -> np.ndarray:
    """A circle outline (circumference 377 px) on white; `extra` attributes on its stroke."""
    return rasterize_svg(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 300">'
        '<rect width="300" height="300" fill="#fff"/>'
        f'<circle cx="150" cy="150" r="60" fill="none" stroke="#000" stroke-width="4" {extra}/></svg>',
        300,
    )


CLOSED = _circle()
OPEN = _circle('stroke-dasharray="340 37"')  # a 37-px gap in the outline
# A frame 20 px inside the page: the drawing fills the page, as a scene's does.
FRAMED = rasterize_svg(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 300 300">'
    '<rect width="300" height="300" fill="#fff"/>'
    '<rect x="20" y="20" width="260" height="260" fill="none" stroke="#000" stroke-width="4"/></svg>',
    300,
)


def _filled(sketch: np.ndarray, point: tuple[int, int]) -> np.ndarray:
    return painted_mask(flood_fill(blank_color_layer(sketch.shape), sketch, point, RED), sketch)


def test_the_area_around_a_closed_outline_is_what_touches_the_page_edge():
    around = border_region(CLOSED)
    assert around[0, 0] and around[150, 10] and not around[150, 150]
    assert not (around & line_mask(CLOSED)).any()
    # Everything not line is either around the circle or inside it.
    inside = _filled(CLOSED, (150, 150))
    assert not (around & inside).any()
    assert (around | inside | line_mask(CLOSED)).sum() >= 0.999 * CLOSED.size


def test_a_gap_in_the_outline_joins_the_inside_to_the_area_around_it():
    assert border_region(OPEN)[150, 150]


@pytest.mark.parametrize(
    ("sketch", "point", "told"),
    [
        (CLOSED, (5, 5), True),  # the white around the object
        (CLOSED, (150, 150), False),  # the object only
        (OPEN, (150, 150), True),  # the object's fill ran out through the gap
        (FRAMED, (5, 5), False),  # the band around a drawing that fills the page
        (FRAMED, (150, 150), False),
    ],
)
def test_a_painted_background_is_told_only_around_a_drawing_with_room_around_it(sketch, point, told):
    share = painted_background(_filled(sketch, point), sketch)
    assert (share >= BACKGROUND_PAINTED) is told
    assert 0.0 <= share <= 1.0
    if sketch is FRAMED:  # the band is under the share that counts as a background
        assert border_region(sketch).sum() < BACKGROUND_MIN_SHARE * (~line_mask(sketch)).sum()
        assert share == 0.0


def test_half_a_background_painted_is_its_share():
    around = border_region(CLOSED)
    half = around & (np.arange(300)[None, :] < 150)
    assert painted_background(half, CLOSED) == pytest.approx(half.sum() / around.sum())
    assert 0.45 < painted_background(half, CLOSED) < 0.55
