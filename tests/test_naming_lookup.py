"""The browser's color names: the shipped lookup table against exact naming."""

import base64
import json
import zlib

import numpy as np
import pytest
from numpy.testing import assert_allclose

from app.coloring_canvas import color_names
from evaluation.color.naming import (
    LOOKUP_BITS,
    build_lookup_table,
    level3_names,
    lookup_cell,
    lookup_table,
    name_srgb,
    names_of_uw71,
)
from evaluation.color.systems import load_system


def _looked_up(rgb):
    l3, l1, basic = (np.array(names) for names in level3_names())
    row = lookup_table()[lookup_cell(rgb)]
    return l3[row], l1[row], basic[row]


def test_the_shipped_table_is_the_exact_name_of_each_cell_centre():
    table = lookup_table()
    assert table.shape == (1 << (3 * LOOKUP_BITS),) and table.dtype == np.uint16
    cells = np.random.default_rng(7).choice(len(table), size=3000, replace=False)
    q = np.stack([cells >> (2 * LOOKUP_BITS), (cells >> LOOKUP_BITS) & 63, cells & 63], axis=-1)
    centres = (q * 4 + 1.5) / 255
    assert (table[cells] == name_srgb(centres).l3_index).all()


def test_every_level3_centroid_looks_itself_up():
    system = load_system("iscc-nbs-l3")
    l3, _, _ = _looked_up(system.rgb)
    assert l3.tolist() == list(system.names)


def test_known_colors_look_up_to_their_names():
    rgb = np.array([[255, 255, 255], [0, 0, 0], [112, 84, 32], [213, 28, 60]])
    l3, l1, basic = _looked_up(rgb)
    assert l3.tolist() == ["greenish white", "olive black", "moderate olive brown", "vivid red"]
    assert l1.tolist() == ["white", "black", "brown", "red"]
    assert basic.tolist() == ["white", "black", "brown", "red"]


def test_uw71_bins_look_up_to_their_names_but_three_near_a_border():
    table = names_of_uw71()
    rgb = np.array([[int(h[i : i + 2], 16) for i in (1, 3, 5)] for h in table["hex"]])
    l3, _, basic = _looked_up(rgb)
    differ = np.flatnonzero(l3 != table["iscc_nbs_l3"].to_numpy())
    assert differ.tolist() == [13, 21, 47]
    assert l3[:4].tolist() == ["vivid blue", "vivid purplish blue", "vivid violet", "vivid purple"]
    assert (basic[differ] != table["basic_term"].to_numpy()[differ]).sum() == 1  # 47: pink, not orange


def test_the_table_disagrees_with_exact_naming_as_documented():
    rgb = np.random.default_rng(0).integers(0, 256, (20_000, 3))
    exact = name_srgb(rgb.astype(np.uint8))
    l3, l1, basic = _looked_up(rgb)
    assert_allclose((l3 != exact.l3).mean(), 0.058, atol=0.001)
    assert_allclose((l1 != exact.l1).mean(), 0.019, atol=0.001)
    assert_allclose((basic != exact.basic).mean(), 0.016, atol=0.001)


def test_build_lookup_table_orders_cells_as_lookup_cell_and_checks_bits():
    table = build_lookup_table(1)  # 8 cells, named at (63.5 or 191.5) / 255 per channel
    corners = np.array([[r, g, b] for r in (0, 255) for g in (0, 255) for b in (0, 255)])
    centres = np.where(corners > 0, 191.5, 63.5) / 255
    assert (table[lookup_cell(corners, bits=1)] == name_srgb(centres).l3_index).all()
    for bits in (0, 9, 6.0):
        with pytest.raises(ValueError, match=r"`bits` must be an integer in \[1, 8\]"):
            build_lookup_table(bits)


def test_the_canvas_receives_the_table_and_names_within_the_page_budget():
    spec = color_names()
    table = np.frombuffer(zlib.decompress(base64.b64decode(spec["table"])), dtype="<u2")
    assert (table == lookup_table()).all()
    l3, _, basic = level3_names()
    assert spec["bits"] == LOOKUP_BITS and spec["l3"] == list(l3) and spec["basic"] == list(basic)
    assert len(json.dumps(spec)) < 50_000
