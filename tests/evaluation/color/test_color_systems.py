"""The named color systems: sizes, known entries, lookups."""

import numpy as np
import pytest

from evaluation.color.systems import SYSTEMS, load_system


@pytest.mark.parametrize(
    ("key", "size"), [("iscc-nbs-l1", 13), ("iscc-nbs-l2", 29), ("iscc-nbs-l3", 260), ("css3", 148)]
)
def test_sizes_and_unique_names(key, size):
    system = load_system(key)
    assert len(system) == size
    assert len(set(system.names)) == size
    assert system.rgb.shape == system.lab.shape == (size, 3)


def test_known_entries():
    css = load_system("css3")
    assert tuple(css.rgb[css.index("Alice Blue")]) == (240, 248, 255)
    assert css.hex[css.index("aquamarine")] == "#7fffd4"
    l1 = load_system("iscc-nbs-l1")
    assert l1.names[-3:] == ("white", "gray", "black")
    # CSS red is sRGB (255, 0, 0): L* 53.24, a* 80.09, b* 67.20.
    np.testing.assert_allclose(css.lab[css.index("red")], [53.24, 80.09, 67.20], atol=0.01)


def test_nearest_returns_own_row_and_bad_names_are_named():
    for key in SYSTEMS:
        system = load_system(key)
        assert (system.nearest(system.lab) == np.arange(len(system))).all() or key == "css3"
    css = load_system("css3")
    # CSS has synonyms with one value (aqua / cyan, gray / grey): the nearest is the first.
    own = css.nearest(css.lab)
    assert all(css.hex[i] == css.hex[j] for i, j in enumerate(own))
    with pytest.raises(KeyError, match="no color named 'bluish'"):
        css.index("bluish")
    with pytest.raises(ValueError, match="`system` must be one of"):
        load_system("pantone")
