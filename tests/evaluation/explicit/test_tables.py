"""Accuracy tables, color groups, bias and confusion of the explicit-color mode, on hand-built rows."""

import math

import numpy as np
import pandas as pd
import pytest

from evaluation.color.systems import load_system
from evaluation.explicit.tables import (
    accuracy_table,
    category_accuracy,
    color_group,
    color_modifiers,
    confusion,
    coverage_table,
    dominant_color_bias,
    group_accuracy,
    image_verdicts,
    to_html,
    write_csv,
    write_html,
)


def _row(item, target, correct, *, model="m", task="color_name", system="iscc-nbs-l2", index=0, **fields):
    lab = load_system(system).lab[load_system(system).index(target)]
    return {
        "run": "r",
        "item_id": item,
        "model": model,
        "prompt_id": f"{task}/{system}/{item}",
        "task": task,
        "level": 1,
        "system": system,
        "category": fields.pop("category", "vehicles"),
        "notation": "name",
        "scoring": fields.pop("scoring", "paper"),
        "object": "car",
        "object_index": index,
        "target": target,
        "present": fields.pop("present", 1),
        "segment_status": fields.pop("status", "ok"),
        "correct": correct,
        "dominant_l": float(lab[0]),
        "dominant_a": float(lab[1]),
        "dominant_b": float(lab[2]),
        **fields,
    }


def test_an_image_is_scored_when_all_objects_are_present_and_correct_when_all_are():
    rows = [
        _row(1, "red", 1, task="multi_object"),
        _row(1, "blue", 0, task="multi_object", index=1),
        _row(2, "red", 1, task="multi_object"),
        _row(2, "blue", None, task="multi_object", index=1, present=0),
        _row(3, "red", 1),
        _row(3, "red", 0, scoring="released"),
    ]
    images = image_verdicts(rows)
    assert images[["item_id", "objects", "scored", "correct"]].to_dict("records") == [
        {"item_id": 1, "objects": 2, "scored": True, "correct": False},
        {"item_id": 2, "objects": 2, "scored": False, "correct": False},
        {"item_id": 3, "objects": 1, "scored": True, "correct": True},
    ]
    released = image_verdicts(rows, scoring="released")
    assert released[["item_id", "scored", "correct"]].to_dict("records") == [
        {"item_id": 3, "scored": True, "correct": False}
    ]
    assert list(image_verdicts([], scoring="paper").columns)[-3:] == ["objects", "scored", "correct"]
    with pytest.raises(ValueError, match="`scoring`"):
        image_verdicts(rows, scoring="blender")


def test_accuracy_table_weighs_each_system_the_same_and_orders_tasks():
    rows = [
        _row(1, "red", 1),
        _row(2, "red", 1, system="css3"),
        _row(3, "blue", 0, system="css3"),
        _row(4, "blue", 0, system="css3"),
        _row(5, "red", 0, task="numeric"),
        _row(6, "red", 1, task="numeric", status="empty_mask"),
        _row(7, "red", 1, model="n"),
    ]
    images = image_verdicts(rows)
    table = accuracy_table(images)
    assert list(table.columns) == ["color_name", "numeric", "average"]
    assert table.loc["m", "color_name"] == pytest.approx((100.0 + 100.0 / 3) / 2)
    assert table.loc["m", "numeric"] == 0.0
    assert table.loc["m", "average"] == pytest.approx(((100.0 + 100.0 / 3) / 2 + 0.0) / 2)
    assert table.loc["n", "color_name"] == 100.0 and math.isnan(table.loc["n", "numeric"])
    only_l2 = accuracy_table(images, systems=["iscc-nbs-l2"])
    assert only_l2.loc["m", "color_name"] == 100.0
    by_category = accuracy_table(images, columns="category")
    assert list(by_category.columns) == ["vehicles"]
    with pytest.raises(ValueError, match="`index`/`columns`"):
        accuracy_table(images, columns="colour")


def test_accuracy_is_taken_over_every_generated_image_as_the_paper_averages():
    """GenColorBench §4.1 averages "across all the generated images", §3.4 validates an image
    "only if all the objects ... are present": one failing presence or masking is wrong, not
    left out (which would reward a model whose objects the masker misses)."""
    rows = [
        _row(1, "red", 1),
        _row(2, "red", 0),
        _row(3, "red", 1, status="empty_mask"),
        _row(4, "red", None, present=0),
    ]
    images = image_verdicts(rows)
    assert accuracy_table(images).loc["m", "color_name"] == 25.0  # 1 of 4 generated
    assert accuracy_table(images, of="scored").loc["m", "color_name"] == 50.0  # 1 of 2 scored
    assert group_accuracy(images, rows, grouping="basic").to_dict("index") == {"m": {"basic": 25.0}}
    assert group_accuracy(images, rows, grouping="basic", of="scored").to_dict("index") == {
        "m": {"basic": 50.0}
    }
    with pytest.raises(ValueError, match="`of` must be 'generated' or 'scored', got 'all'"):
        accuracy_table(images, of="all")


def test_figure_2_takes_the_color_name_prompts_alone():
    """The paper grounds "color names across seven semantic object categories": a numeric
    prompt of the same category is another question and is left out."""
    rows = [
        _row(1, "red", 1, category="fruits"),
        _row(2, "red", 0, category="fruits"),
        _row(3, "red", 0, task="numeric", category="fruits"),
        _row(4, "red", 1, task="numeric", category="animals"),
    ]
    images = image_verdicts(rows)
    assert category_accuracy(images).to_dict("index") == {"m": {"fruits": 50.0}}
    assert category_accuracy(images[images["task"] == "numeric"]).empty


def test_coverage_counts_scored_and_unscored_images():
    rows = [_row(1, "red", 1), _row(2, "red", None, present=0), _row(3, "red", 0, status="no_detection")]
    assert coverage_table(image_verdicts(rows)).to_dict("index") == {
        "m": {"images": 3, "scored": 1, "not_scored": 2, "correct": 1}
    }


def test_color_groups_and_modifiers():
    l2 = load_system("iscc-nbs-l2").names
    basic = [name for name in l2 if color_group(name) == "basic"]
    assert len(basic) == 13 and "yellow green" in basic and "reddish orange" not in basic
    assert color_modifiers("light bluish green") == ("light", "ish")
    assert color_modifiers("very dark red") == ("dark",)
    assert color_modifiers("vivid red") == ()
    l3 = load_system("iscc-nbs-l3").names
    counts = {m: sum(m in color_modifiers(n) for n in l3) for m in ("light", "dark", "ish")}
    assert all(count > 20 for count in counts.values())


def test_group_accuracy_splits_basic_and_intermediate_and_modifiers():
    rows = [
        _row(1, "red", 1),
        _row(2, "reddish orange", 0),
        _row(3, "olive brown", 1),
        _row(4, "light bluish green", 1, system="iscc-nbs-l3"),
        _row(5, "dark red", 0, system="iscc-nbs-l3"),
    ]
    images = image_verdicts(rows)
    assert group_accuracy(images, rows, grouping="basic").to_dict("index") == {
        "m": {"basic": 100.0, "intermediate": 50.0}
    }
    assert group_accuracy(images, rows, grouping="modifier").to_dict("index") == {
        "m": {"light": 100.0, "dark": 0.0, "ish": 100.0}
    }
    with pytest.raises(ValueError, match="`grouping`"):
        group_accuracy(images, rows, grouping="hue")


def test_dominant_color_bias_and_confusion_name_the_dominant_colors():
    """Dominant colors equal to table colors are named by those colors, each counted under
    its own object's category (outside probe 220: the second object of "a dog and a car"
    was counted under the first's)."""
    rows = [_row(i, name, 1) for i, name in enumerate(["gray", "gray", "black", "red"], start=1)]
    rows.append(_row(5, "gray", 0, category="animals", object="dog"))
    rows.append(_row(5, "black", 0, category="animals", object="car", task="multi_object", index=1))
    bias = dominant_color_bias(rows, top=2)
    assert bias.to_dict("records") == [
        {"model": "m", "category": "animals", "rank": 1, "color": "gray", "share": 1.0},
        {"model": "m", "category": "vehicles", "rank": 1, "color": "black", "share": 0.4},
        {"model": "m", "category": "vehicles", "rank": 2, "color": "gray", "share": 0.4},
    ]
    rows.pop()
    asked_blue = _row(6, "blue", 0)
    asked_blue.update(dominant_l=rows[0]["dominant_l"], dominant_a=rows[0]["dominant_a"], dominant_b=0.0)
    table = confusion([*rows, asked_blue])
    assert table.loc["blue", "gray"] == 1 and table.loc["gray", "gray"] == 3
    assert table.values.sum() == 6


def test_write_csv_round_trips(tmp_path):
    table = pd.DataFrame({"color_name": [50.0, np.nan]}, index=pd.Index(["a", "b"], name="model"))
    path = write_csv(table, tmp_path / "out" / "t.csv")
    back = pd.read_csv(path, index_col=0)
    pd.testing.assert_frame_equal(back, table)


def test_html_export_escapes_labels_and_shows_missing_cells(tmp_path):
    table = pd.DataFrame({"color_name": [50.0, np.nan]}, index=pd.Index(["<b>a</b>", "b"], name="model"))
    page = to_html(table)
    assert "&lt;b&gt;a&lt;/b&gt;" in page and "<b>a</b>" not in page
    assert "<td>50.00</td>" in page and "<td>-</td>" in page
    assert write_html(table, tmp_path / "t.html").read_text(encoding="utf-8") == page


def test_figures_carry_the_tables_numbers():
    from evaluation.explicit.figures import (
        NAME_CHAR_PX,
        NAME_LINE_PX,
        accuracy_bars,
        bias_bars,
        confusion_heatmap,
    )

    table = pd.DataFrame(
        {"color_name": [50.0, 25.0], "numeric": [10.0, np.nan]}, index=pd.Index(["m", "n"], name="model")
    )
    bars = accuracy_bars(table, title="Table 4")
    assert [(t.name, list(t.x)) for t in bars.data] == [
        ("m", ["color_name", "numeric"]),
        ("n", ["color_name", "numeric"]),
    ]
    assert list(bars.data[0].y) == [50.0, 10.0]
    assert bars.data[1].y[0] == 25.0 and math.isnan(bars.data[1].y[1])
    assert bars.layout.title.text == "Table 4"

    rows = [_row(i, name, 1) for i, name in enumerate(["gray", "gray", "black", "red"], start=1)]
    bias = dominant_color_bias(rows, top=2)
    stacked = bias_bars(bias, "m")
    l2 = load_system("iscc-nbs-l2")
    assert [(list(t.x), list(t.y), list(t.text), list(t.marker.color)) for t in stacked.data] == [
        (["vehicles"], [50.0], ["gray"], [l2.hex[l2.index("gray")]]),
        (["vehicles"], [25.0], ["black"], [l2.hex[l2.index("black")]]),
    ]
    with pytest.raises(ValueError, match="`model`"):
        bias_bars(bias, "nobody")

    heat = confusion_heatmap(confusion(rows))
    assert list(heat.data[0].y) == ["black", "gray", "red"] and heat.data[0].z.sum() == 4
    # A level-3 name with its coarser names is wrapped on its axis, with room made for it
    # (it ran off a phone's screen: outside probe 151); the cells keep the whole name.
    long_name = "vivid yellow green (vivid yellow green, green)"
    heat = confusion_heatmap(pd.DataFrame([[1]], index=[long_name], columns=["red"]))
    assert list(heat.data[0].y) == [long_name] and heat.layout.yaxis.automargin
    assert list(heat.layout.yaxis.ticktext) == ["vivid yellow green<br>(vivid yellow<br>green, green)"]
    # ... and the figure grows with its rows, so the wrapped names keep apart (they overlapped)
    names = [f"{long_name} {i}" for i in range(12)]
    heat = confusion_heatmap(pd.DataFrame(np.eye(12, dtype=int), index=names, columns=names))
    assert heat.layout.height >= 12 * NAME_LINE_PX * 3 + NAME_CHAR_PX * len(names[-1])


def test_accuracy_by_task_system_category_and_model():
    rows = [
        _row(1, "red", 1),
        _row(2, "red", 0, category="animals"),
        _row(3, "red", 1, system="css3"),
        _row(4, "blue", 0, system="css3", task="numeric"),
    ]
    images = image_verdicts(rows)
    by_system = accuracy_table(images, columns="system")
    assert by_system.to_dict("index") == {"m": {"css3": 50.0, "iscc-nbs-l2": 50.0}}
    cells = accuracy_table(images, index=["model", "category"], columns="task")
    assert cells.loc[("m", "vehicles"), "color_name"] == 100.0
    assert cells.loc[("m", "animals"), "color_name"] == 0.0
    assert cells.loc[("m", "vehicles"), "numeric"] == 0.0 and math.isnan(
        cells.loc[("m", "animals"), "numeric"]
    )
