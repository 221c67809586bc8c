"""Color naming: known colors, the word rules, the UW-71 table and the export helper."""

import numpy as np
import pandas as pd
import pytest

from evaluation.color.colorspace import srgb_to_lab
from evaluation.color.naming import (
    BASIC_TERMS,
    L1_TERMS,
    L1_TO_BASIC,
    l1_of,
    name_lab,
    name_srgb,
    names_of_uw71,
    with_bin_names,
)
from evaluation.color.systems import load_system

KNOWN = [
    # (sRGB, level 3, level 1, basic)
    # Greys (r = g = b) among the untinted neutrals (rule 4): by the nearest of all 260
    # centroids they would be "greenish white", "olive black" and "greenish gray".
    ((255, 255, 255), "white", "white", "white"),
    ((0, 0, 0), "black", "black", "black"),
    ((128, 128, 128), "medium gray", "gray", "gray"),
    ((213, 28, 60), "vivid red", "red", "red"),  # the vivid red centroid itself
    ((255, 0, 0), "vivid reddish orange", "orange", "orange"),  # see the module's Notes
    ((0, 0, 128), "deep violet", "purple", "purple"),  # CSS navy
    ((23, 52, 89), "dark blue", "blue", "blue"),  # a darker navy
    ((139, 69, 19), "strong brown", "brown", "brown"),  # CSS saddle brown
    ((255, 192, 203), "light pink", "pink", "pink"),  # CSS pink
    ((128, 128, 0), "light olive", "olive", "green"),  # CSS olive
    ((112, 84, 32), "moderate olive brown", "brown", "brown"),
    ((0, 128, 0), "deep yellowish green", "green", "green"),
    ((0, 0, 255), "vivid purplish blue", "blue", "blue"),
    ((255, 140, 0), "strong orange", "orange", "orange"),  # CSS dark orange
    ((154, 244, 67), "vivid yellow green", "yellow green", "green"),
]


def test_known_colors_get_their_names():
    rgb = np.array([k[0] for k in KNOWN], dtype=np.uint8)
    names = name_srgb(rgb)
    assert names.l3.tolist() == [k[1] for k in KNOWN]
    assert names.l1.tolist() == [k[2] for k in KNOWN]
    assert names.basic.tolist() == [k[3] for k in KNOWN]


def test_naming_keeps_leading_shape_and_floats_agree_with_uint8():
    rgb = np.array([k[0] for k in KNOWN[:6]], dtype=np.uint8).reshape(2, 3, 3)
    from_uint8 = name_srgb(rgb)
    from_float = name_srgb(rgb / 255.0)
    from_lab = name_lab(srgb_to_lab(rgb))
    assert from_uint8.l3.shape == from_uint8.basic.shape == from_uint8.delta_e.shape == (2, 3)
    assert (from_uint8.l3 == from_float.l3).all()
    # name_lab names by the nearest centroid only: the greys (the first three) are tinted.
    assert (from_uint8.l3.ravel()[3:] == from_lab.l3.ravel()[3:]).all()
    assert from_lab.l3.ravel()[:3].tolist() == ["greenish white", "olive black", "greenish gray"]
    single = name_srgb(np.array([255, 255, 255], dtype=np.uint8))
    assert single.l3.shape == () and single.l3.item() == "white"
    off_white = name_srgb(np.array([255, 255, 254], dtype=np.uint8))
    assert off_white.l3.shape == () and off_white.l3.item() == "greenish white"


def test_every_centroid_names_itself_at_zero_distance():
    l3 = load_system("iscc-nbs-l3")
    names = name_lab(l3.lab)
    assert names.l3.tolist() == list(l3.names)
    np.testing.assert_allclose(names.delta_e, 0.0, atol=1e-9)


@pytest.mark.parametrize(
    ("l3", "l1"),
    [
        ("vivid pink", "pink"),
        ("strong reddish orange", "orange"),
        ("grayish reddish brown", "brown"),
        ("dark olive brown", "brown"),
        ("light olive", "olive"),
        ("olive gray", "gray"),
        ("olive black", "black"),
        ("pinkish white", "white"),
        ("deep yellow green", "yellow green"),
        ("moderate olive green", "green"),
        ("very dark yellowish green", "green"),
        ("pale violet", "purple"),
        ("grayish purplish red", "red"),
        ("Medium Gray", "gray"),
    ],
)
def test_level1_is_the_noun_of_the_level3_name(l3, l1):
    assert l1_of(l3) == l1


def test_level1_and_basic_rules_cover_every_name():
    l1 = {l1_of(name) for name in load_system("iscc-nbs-l3").names}
    assert l1 == set(L1_TERMS) == set(load_system("iscc-nbs-l1").names)
    assert {L1_TO_BASIC[t] for t in L1_TERMS} == set(BASIC_TERMS)
    assert L1_TO_BASIC["olive"] == L1_TO_BASIC["yellow green"] == "green"


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="`l3_name`"):
        l1_of("vivid turquoise")
    with pytest.raises(ValueError, match="`lab` must have shape"):
        name_lab(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="`lab` must hold finite"):
        name_lab(np.array([np.nan, 0, 0]))
    with pytest.raises(ValueError, match="`rgb`"):
        name_srgb(np.array([300.0, 0, 0]))


def test_uw71_table():
    table = names_of_uw71()
    assert list(table.columns) == [
        "color_index",
        "hex",
        "iscc_nbs_l3",
        "iscc_nbs_l1",
        "basic_term",
        "delta_e",
    ]
    assert table["color_index"].tolist() == list(range(71))
    rows = table.set_index("color_index")
    assert rows.loc[24, ["hex", "basic_term"]].tolist() == ["#000000", "black"]
    assert rows.loc[28, ["hex", "basic_term"]].tolist() == ["#ffffff", "white"]
    # The six greys have no tint: named among the untinted neutrals, not "olive black",
    # "greenish gray", "greenish white" as the nearest centroid of all would name them
    # (the first rows of KNOWN: the same colors, named without the rule).
    assert rows.loc[24:29, "iscc_nbs_l3"].tolist() == [
        "black",
        "black",
        "medium gray",
        "light gray",
        "white",
        "white",
    ]
    grey = rows.loc[24:29, "hex"].map(lambda h: [int(h[i : i + 2], 16) for i in (1, 3, 5)])
    nearest = name_lab(srgb_to_lab(np.array(grey.tolist(), dtype=np.uint8)))
    assert "olive black" in nearest.l3 and "greenish white" in nearest.l3
    assert (rows.loc[24:29, "delta_e"].to_numpy() >= nearest.delta_e - 1e-12).all()
    assert list(rows.loc[24:29, "basic_term"]) == list(nearest.basic)
    from evaluation.color.palette import load_uw71

    plain = name_lab(load_uw71().lab)
    chromatic = ~load_uw71().achromatic
    assert (rows["iscc_nbs_l3"].to_numpy()[chromatic] == plain.l3[chromatic]).all()  # only greys change
    assert rows.loc[49, ["iscc_nbs_l3", "basic_term"]].tolist() == ["vivid red", "red"]
    assert rows.loc[11, ["iscc_nbs_l3", "basic_term"]].tolist() == ["dark blue", "blue"]
    assert rows.loc[45, ["iscc_nbs_l3", "basic_term"]].tolist() == ["deep brown", "brown"]
    assert set(table["basic_term"]) == set(BASIC_TERMS)
    assert (table["delta_e"] < 11).all()


def test_with_bin_names_puts_names_beside_each_bin_column():
    frame = pd.DataFrame(
        {"concept": ["a", "b", "c"], "dominant_model": [24, 49, None], "pcc": [0.1, 0.2, 0.3]}
    )
    out = with_bin_names(frame, ["dominant_model"])
    assert list(out.columns) == [
        "concept",
        "dominant_model",
        "dominant_model_name",
        "dominant_model_basic",
        "pcc",
    ]
    assert out["dominant_model_name"].tolist() == ["black", "vivid red", ""]
    assert out["dominant_model_basic"].tolist() == ["black", "red", ""]
    assert list(frame.columns) == ["concept", "dominant_model", "pcc"]
    with pytest.raises(ValueError, match="'dominant_human'"):
        with_bin_names(frame, ["dominant_human"])
    with pytest.raises(ValueError, match="column 'x' must hold UW-71 bins"):
        with_bin_names(pd.DataFrame({"x": [71]}), ["x"])


def test_uw71_table_is_a_fresh_copy_each_call():
    first = names_of_uw71()
    first.loc[0, "basic_term"] = "changed"
    assert names_of_uw71().loc[0, "basic_term"] == "blue"
