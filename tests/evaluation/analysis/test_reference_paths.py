"""The leaderboard's fast paths against a straightforward computation of the same tables.

`results.analyses` (Tables 1-2 and their marks, the shifts, the bootstrap intervals of every
table, the rankings) is computed once through the library and once through the reference
functions below: the way these tables were computed before issue 28 made them cheap at the
full study's size (per group and per metric through pandas, `numpy.add.at` for the concept
weights, `.at` per cell, one `nanpercentile` per pair, merged arrays for the shifts). The
two must agree bit for bit, dtypes included.
"""

from __future__ import annotations

import warnings
from dataclasses import fields, replace

import numpy as np
import pandas as pd
import pytest

from evaluation.analysis import bootstrap, results, tables, uncertainty
from evaluation.color import metrics
from evaluation.concepts import load_concepts

BASES = ("apple", "banana", "lemon", "grass", "sky", "rose", "ocean", "cloud")
MODELS = ("m-a", "m-b", "m-c")
SCALES = (2.0, 5.0, 7.5)
BY_ALL = ("model", "modifier_type", "style")


# ---- the reference: each table computed the plain way ----


def ref_concept_weights(strata, n_resamples, rng):
    strata = np.asarray(strata, dtype=object)
    weights = np.zeros((n_resamples, len(strata)))
    for stratum in sorted(set(strata.tolist())):
        members = np.flatnonzero(strata == stratum)
        draws = rng.integers(0, len(members), size=(n_resamples, len(members)))
        np.add.at(weights, (np.arange(n_resamples)[:, None], members[draws]), 1.0)
    return weights


def ref_draws(concepts, resampling):
    unique = concepts.drop_duplicates("concept").sort_values("concept")
    rng = resampling.rng()
    weights = ref_concept_weights(unique["modifier_type"].tolist(), resampling.n_resamples, rng)
    picks = rng.integers(0, resampling.colorings, size=weights.shape) if resampling.colorings else None
    return bootstrap.Draws(unique["concept"].tolist(), weights, picks, resampling)


def ref_interval(replicates, ci):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(replicates, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
    return lo, hi


def ref_group_means(frame, by, column, boot):
    grouped = frame.groupby(list(by), sort=True)
    codes = grouped.ngroup().to_numpy()
    groups = grouped.size().reset_index()[list(by)]
    j = pd.Index(boot.keys).get_indexer(frame["concept"])
    n, g = len(boot.keys), len(groups)
    column_values = frame[column]
    values = (
        np.stack(column_values.to_numpy()).astype(float)
        if column_values.dtype == object and len(frame)
        else column_values.to_numpy(float)
    )
    if values.ndim == 1:
        defined = ~np.isnan(values)
        cell = j[defined] * g + codes[defined]
        sums = np.bincount(cell, weights=values[defined], minlength=n * g).reshape(n, g)
        counts = np.bincount(cell, minlength=n * g).astype(float).reshape(n, g)
        point = sums.sum(0) / counts.sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = (boot.weights @ sums) / (boot.weights @ counts)
    else:
        point, reps = bootstrap._picked_means(values, j, codes, n, g, boot)  # unchanged by issue 28
    return groups.assign(value=point), reps


def ref_ranking_significance(groups, replicates, higher_is_better, ci):
    values, counts = groups["value"].to_numpy(float), groups["n"].to_numpy()
    order = [
        i
        for i in np.argsort(-values if higher_is_better else values, kind="stable")
        if np.isfinite(values[i])
    ]
    sign = 1.0 if higher_is_better else -1.0
    rows = []
    for a, b in zip(order[:-1], order[1:]):
        lo, hi = ref_interval(sign * (replicates[:, a] - replicates[:, b]), ci)
        if min(counts[a], counts[b]) < bootstrap.MIN_INTERVAL_CONCEPTS:  # as the cells: none
            lo = hi = np.nan
        rows.append(
            {
                "better": groups["model"].iloc[a],
                "worse": groups["model"].iloc[b],
                "difference": sign * (values[a] - values[b]),
                "difference_lo": float(lo),
                "difference_hi": float(hi),
                "distinguishable": bool(lo > bootstrap.TIE or hi < -bootstrap.TIE)
                and min(counts[a], counts[b]) >= bootstrap.MIN_RANK_CONCEPTS,
                "n_concepts": int(min(counts[a], counts[b])),
            }
        )
    return pd.DataFrame(rows, columns=[*bootstrap.PAIR_COLUMNS, "n_concepts"])


def ref_board_intervals(board, data, boot, name):
    lo = pd.DataFrame(np.nan, index=board.values.index, columns=board.values.columns)
    hi = lo.copy()
    ranking = []
    by = ["modifier_type", "style", "model"]
    for metric in dict.fromkeys(k for _, _, k in board.values.columns):
        groups, reps = ref_group_means(data, by, metric, boot)
        groups["value"] = [
            board.values.at[m, (t, s, metric)] for t, s, m in groups[by].itertuples(index=False)
        ]
        groups["n"] = [board.counts.at[m, (t, s, metric)] for t, s, m in groups[by].itertuples(index=False)]
        low, high = ref_interval(reps, boot.resampling.ci)
        for i, (t, s, model, n) in enumerate(groups[[*by, "n"]].itertuples(index=False)):
            if n >= bootstrap.MIN_INTERVAL_CONCEPTS:  # one concept's resamples are its value
                lo.at[model, (t, s, metric)], hi.at[model, (t, s, metric)] = low[i], high[i]
        for (t, s), part in groups.groupby(["modifier_type", "style"], sort=False):
            sig = ref_ranking_significance(
                part.reset_index(drop=True),
                reps[:, part.index],
                tables.METRICS[metric][1],
                boot.resampling.ci,
            )
            ranking.append(sig.assign(table=name, modifier_type=t, style=s, metric=metric))
    frame = pd.concat(ranking, ignore_index=True) if ranking else pd.DataFrame()
    return replace(board, lo=lo, hi=hi), frame.reindex(columns=list(uncertainty.RANKING_COLUMNS))


def ref_sensitivity(shifts, by, boot, aggregate):
    point = tables.sensitivity(shifts, by, aggregate=aggregate)
    if shifts.empty:
        return point.assign(ratio_lo=np.nan, ratio_hi=np.nan), np.empty((len(boot.weights), 0))
    data = shifts.assign(ratio=shifts["model_shift"] / shifts["human_shift"].where(shifts["human_shift"] > 0))
    if aggregate == tables.RATIO_OF_MEANS:
        _, model = ref_group_means(data, by, "model_shift", boot)
        _, human = ref_group_means(data, by, "human_shift", boot)
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = model / human
    else:
        _, reps = ref_group_means(data, by, "ratio", boot)
    lo, hi = ref_interval(reps, boot.resampling.ci)
    return point.assign(ratio_lo=lo, ratio_hi=hi), reps


def ref_sweep(frame, boot):
    data = tables.with_dca(frame)
    out = None
    for name in ("emd", "pcc"):
        groups, replicates = ref_group_means(data, ["model", "style", "cfg"], name, boot)
        lo, hi = ref_interval(replicates, boot.resampling.ci)
        part = groups.rename(columns={"value": name}).assign(**{f"{name}_lo": lo, f"{name}_hi": hi})
        out = part if out is None else out.merge(part, on=["model", "style", "cfg"], how="outer")
    counts = data.groupby(["model", "style", "cfg"])["concept"].nunique().rename("n_concepts")
    return out.merge(counts.reset_index(), on=["model", "style", "cfg"]).sort_values(
        ["model", "style", "cfg"], ignore_index=True
    )


def ref_uncertainty(frame, table1, table2, table_cfg, shifts, resampling, aggregate, model_p, human):
    boot = ref_draws(
        pd.concat([frame[["concept", "modifier_type"]], shifts[["concept", "modifier_type"]]]), resampling
    )
    data = tables.select_cfg(tables.with_dca(frame), table_cfg)
    if resampling.colorings and human and model_p is not None and not isinstance(table_cfg, str):
        data = uncertainty.replicate_metrics(data, model_p, human)
    else:
        resampling = replace(resampling, colorings=0)
        boot = replace(boot, picks=None, resampling=resampling)
    board1, rank1 = ref_board_intervals(table1, data, boot, "table1")
    board2, rank2 = ref_board_intervals(table2, data, boot, "table2")
    plain = replace(boot, picks=None)
    by_type = ("model", "modifier_type")
    return dict(
        resampling=resampling,
        table1=board1,
        table2=board2,
        ranking=pd.concat([rank1, rank2], ignore_index=True),
        sweep=ref_sweep(frame, plain),
        sensitivity=ref_sensitivity(shifts, by_type, plain, aggregate)[0],
        table6_ci=ref_sensitivity(shifts, ("model", "style"), plain, aggregate)[0],
        table7_ci=ref_sensitivity(shifts, by_type, plain, aggregate)[0],
        # Table 8 averages the per-model ratios by model, type and style (`uncertainty.table8`,
        # which issue 28 left as it was); their grouped replicates are the reference's.
        table8_ci=uncertainty.table8(shifts, plain, aggregate=aggregate),
        by_all=(shifts, plain, ref_sensitivity(shifts, BY_ALL, plain, aggregate)),
    )


def ref_marks(values):
    marks = pd.DataFrame("", index=values.index, columns=values.columns)
    for col in values.columns:
        rank = values[col].rank(method="dense", ascending=not tables.METRICS[col[2]][1])
        marks.loc[rank == 1, col] = "best"
        marks.loc[rank == 2, col] = "second"
    return marks


def ref_board(frame, metric_names, cfg):
    data = tables.select_cfg(tables.with_dca(frame), cfg)
    means = data.groupby(["model", "modifier_type", "style"])[list(metric_names)].mean()
    values = means.unstack(["modifier_type", "style"])
    values.columns = values.columns.reorder_levels([1, 2, 0])
    order = [
        (t, s, m)
        for t in ("original", "visual_state", "emotional")
        for s in tables.STYLES
        for m in metric_names
        if (t, s, m) in values.columns
    ]
    values = values[order]
    values.columns = pd.MultiIndex.from_tuples(order, names=["modifier_type", "style", "metric"])
    defined = data[list(metric_names)].notna().assign(**data[["model", "modifier_type", "style"]])
    counts = defined.groupby(["model", "modifier_type", "style"]).sum().unstack(["modifier_type", "style"])
    counts.columns = counts.columns.reorder_levels([1, 2, 0])
    counts = counts.reindex(index=values.index, columns=values.columns).fillna(0).astype(int)
    return tables.Leaderboard(values, ref_marks(values), counts=counts)


def ref_shifts(human, model_dists, concepts):
    variants = tables._variant_bases(concepts)
    variants = variants[variants["concept"].isin(human.keys()) & variants["base"].isin(human.keys())]
    rows = model_dists.merge(variants, on="concept")
    base_p = model_dists.rename(columns={"concept": "base", "p": "p_base"})
    rows = rows.merge(base_p[["model", "style", "base", "p_base"]], on=["model", "style", "base"])
    rows["model_shift"] = metrics.emd_rows(np.stack(list(rows["p_base"])), np.stack(list(rows["p"])))
    h_base = np.stack([human[k] for k in variants["base"]])
    h_var = np.stack([human[k] for k in variants["concept"]])
    human_shift = pd.Series(metrics.emd_rows(h_base, h_var), index=variants["concept"].to_numpy())
    rows["human_shift"] = rows["concept"].map(human_shift)
    return rows[list(tables.SHIFT_COLUMNS)].sort_values(["model", "style", "concept"], ignore_index=True)


def ref_analyses(model_rows, human, concepts, *, cfg, aggregate, resampling, human_replicates=None):
    frame = results.metrics_frame(model_rows, human, concepts)
    pooled = isinstance(cfg, str) and cfg.strip() == tables.POOL_CFG
    chosen = results.resolve_cfg(frame, results.RECOMMENDED if pooled else cfg)
    table_cfg = tables.POOL_CFG if pooled else chosen
    latest = results.latest_distributions(model_rows)
    shifts = ref_shifts(human, results._at_cfg(latest, chosen), concepts)
    shifts = shifts.astype({"human_shift": float, "model_shift": float})
    found = dict(
        metrics=frame,
        cfg=chosen,
        pooled=pooled,
        table1=ref_board(frame, tables.TABLE1_METRICS, table_cfg),
        table2=ref_board(frame, tables.TABLE2_METRICS, table_cfg),
        sweep=tables.cfg_sweep(frame, ("emd", "pcc")),
        shifts=shifts,
        sensitivity=tables.sensitivity(shifts, ("model", "modifier_type"), aggregate=aggregate),
        table6=tables.table6(shifts, aggregate=aggregate),
        table7=tables.table7(shifts, aggregate=aggregate),
        table8=tables.table8(shifts, aggregate=aggregate),
    )
    if resampling is None:
        return found
    at_cfg = results._at_cfg(latest, chosen)
    model_p = {
        (m, c, s): p for m, s, c, p in at_cfg[["model", "style", "concept", "p"]].itertuples(index=False)
    }
    found |= ref_uncertainty(
        frame,
        found["table1"],
        found["table2"],
        table_cfg,
        shifts,
        resampling,
        aggregate,
        model_p,
        human_replicates,
    )
    return found


# ---- a small study ----


def _distribution(rng, dominant=None):
    p = np.zeros(71)
    bins = rng.choice(71, size=int(rng.integers(2, 7)), replace=False)
    p[bins] = rng.random(len(bins)) + 0.05
    if dominant is not None:
        p[dominant] = p.sum()  # this bin holds half the mass: the dominant color
    return p / p.sum()


def small_study(seed=0, models=MODELS):
    """Model rows of two runs (the newer wins a cell) and P_H of most concepts; ``m-c`` copies
    ``m-a`` (ties in every column); their clipart emotional distributions are all grey
    (ΔHue undefined there, so that column ranks one model and has no adjacent pair)."""
    rng = np.random.default_rng(seed)
    concepts = [c for c in load_concepts() if c.base in BASES]
    human = {c.key: _distribution(rng) for c in concepts if rng.random() < 0.9}
    grey = 24  # an achromatic UW-71 bin
    rows = []
    for run, created in (("old", "2026-01-01"), ("new", "2026-02-01")):
        for model in [m for m in models if m != "m-c"]:
            for c in concepts:
                for style in tables.STYLES:
                    for cfg in SCALES:
                        if run == "old" and rng.random() < 0.5:
                            continue
                        greyed = model == "m-a" and style == "clipart" and c.modifier_type == "emotional"
                        p = _distribution(rng, grey if greyed else None)
                        common = dict(
                            run=run, concept=c.key, style=style, cfg=cfg, p=p, n_images=4, n_excluded=0
                        )
                        rows.append({**common, "model": model, "created_at": f"{created}T{len(rows):06d}"})
                        if model == "m-a" and "m-c" in models:
                            rows.append(
                                {**common, "model": "m-c", "created_at": f"{created}T{len(rows):06d}"}
                            )
    return rows, human, concepts


def assert_same(found: results.Analyses, expected: dict, aggregate: str = tables.RATIO_OF_MEANS):
    if "by_all" in expected:  # Table 8's replicates: the sensitivity by model, type and style
        shifts, plain, (want, want_reps) = expected["by_all"]
        got, reps = uncertainty.sensitivity(shifts, BY_ALL, plain, aggregate=aggregate)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        np.testing.assert_array_equal(reps, want_reps)
    for field in fields(found):
        if field.name not in expected:
            continue
        value, want = getattr(found, field.name), expected[field.name]
        if isinstance(value, tables.Leaderboard):
            for part in ("values", "marks", "lo", "hi", "counts"):
                a, b = getattr(value, part), getattr(want, part)
                if a is None or b is None:
                    assert a is None and b is None, f"{field.name}.{part}"
                else:
                    pd.testing.assert_frame_equal(a, b, check_exact=True, obj=f"{field.name}.{part}")
        elif isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(value, want, check_exact=True, obj=field.name)
        else:
            assert value == want, field.name


@pytest.mark.parametrize(
    ("cfg", "aggregate", "resampling"),
    [
        (results.RECOMMENDED, tables.RATIO_OF_MEANS, bootstrap.Resampling(n_resamples=200, seed=3)),
        (7.5, tables.MEAN_OF_RATIOS, bootstrap.Resampling(n_resamples=100, seed=1, ci=0.8)),
        (tables.POOL_CFG, tables.RATIO_OF_MEANS, bootstrap.Resampling(n_resamples=150, seed=5)),
    ],
)
def test_the_tables_and_their_intervals_equal_the_plain_computation_bit_for_bit(cfg, aggregate, resampling):
    rows, human, concepts = small_study()
    found = results.analyses(rows, human, concepts, cfg=cfg, aggregate=aggregate, resampling=resampling)
    expected = ref_analyses(rows, human, concepts, cfg=cfg, aggregate=aggregate, resampling=resampling)
    assert_same(found, expected, aggregate)
    # the study has what the fast paths treat apart: ties, an unranked column, undefined cells
    assert (found.table1.marks == "best").sum().max() == 2
    assert found.table2.values.isna().any().any()
    assert found.ranking["difference"].dtype == object


def test_the_point_estimates_then_their_intervals_equal_the_one_call():
    rows, human, concepts = small_study(seed=4)
    resampling = bootstrap.Resampling(n_resamples=120, seed=9)
    points = results.analyses(rows, human, concepts, resampling=None)
    assert_same(
        points,
        ref_analyses(
            rows, human, concepts, cfg=results.RECOMMENDED, aggregate=tables.RATIO_OF_MEANS, resampling=None
        ),
    )
    assert points.table1.lo is None and points.ranking.empty
    whole = results.analyses(rows, human, concepts, resampling=resampling)
    later = results.with_intervals(points, rows, resampling)
    assert_same(later, {f.name: getattr(whole, f.name) for f in fields(whole)})


def test_a_single_model_gives_no_ranking_rows_typed_as_before():
    rows, human, concepts = small_study(seed=2, models=("m-a",))
    resampling = bootstrap.Resampling(n_resamples=50, seed=0)
    found = results.analyses(rows, human, concepts, resampling=resampling)
    expected = ref_analyses(
        rows, human, concepts, cfg=results.RECOMMENDED, aggregate=tables.RATIO_OF_MEANS, resampling=resampling
    )
    assert_same(found, expected)
    assert found.ranking.empty


def test_the_two_stage_scheme_equals_the_plain_computation():
    rows, human, concepts = small_study(seed=6)
    rng = np.random.default_rng(8)
    replicates = {k: np.stack([_distribution(rng) for _ in range(4)]) for k in sorted(human)}
    resampling = bootstrap.Resampling(n_resamples=40, seed=2, colorings=4)
    found = results.analyses(rows, human, concepts, resampling=resampling, human_replicates=replicates)
    expected = ref_analyses(
        rows,
        human,
        concepts,
        cfg=results.RECOMMENDED,
        aggregate=tables.RATIO_OF_MEANS,
        resampling=resampling,
        human_replicates=replicates,
    )
    assert_same(found, expected)
    assert found.resampling.colorings == 4


def test_the_percentile_bounds_equal_nanpercentile_column_by_column():
    rng = np.random.default_rng(11)
    replicates = rng.normal(size=(333, 40))
    replicates[rng.random(replicates.shape) < 0.05] = np.nan
    replicates[:, 3] = np.nan  # a column no replicate defines
    for ci in (0.95, 0.8, 0.5):
        lo, hi = bootstrap.percentile_interval(replicates, ci)
        want = ref_interval(replicates, ci)
        np.testing.assert_array_equal(lo, want[0])
        np.testing.assert_array_equal(hi, want[1])
    cube = rng.normal(size=(50, 3, 4))
    np.testing.assert_array_equal(np.stack(bootstrap.percentile_interval(cube, 0.9)), ref_interval(cube, 0.9))


def test_the_concept_weights_equal_the_counts_drawn_one_by_one():
    strata = ["a"] * 7 + ["b"] * 3 + ["c"] * 11 + ["a"] * 2
    found = bootstrap.concept_weights(strata, 500, np.random.default_rng(5))
    np.testing.assert_array_equal(found, ref_concept_weights(strata, 500, np.random.default_rng(5)))
    assert found.dtype == np.float64 and (found.sum(axis=1) == len(strata)).all()
