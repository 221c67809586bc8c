"""Benchmark of the color-science core: extraction, batched EMD and the metric tables.

Run ``python -m bench.bench_core`` (figures go to BENCHMARKS.md by hand), or import
`run` for a dict of the figures.

- Extraction: 1024×1024 RGB PNGs with PNG masks, decoded with Pillow and passed through
  `concept_distribution` in concepts of 8 images, in one process (images/s per core).
- EMD: `emd_rows` against a plain loop over `ot.emd2` on the same pairs, values checked
  equal; plus the network-simplex core alone on pre-cut submatrices (the floor).
- Tables: the CFG sweep, 1,281 concepts × 7 models × 2 styles × 7 CFG scales, every row
  scored with EMD, PCC, ED, DCA and ΔHue against its concept's human distribution.
"""

from __future__ import annotations

import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import ot
from ot.lp.emd_wrap import emd_c
from PIL import Image

from evaluation.color.extraction import concept_distribution
from evaluation.color.metrics import dca, delta_hue, emd_rows, entropy_difference, pcc
from evaluation.color.palette import load_uw71
from storage.distributions import check_masses

SWEEP = {"concepts": 1281, "models": 7, "styles": 2, "cfg_scales": 7}


def realistic_distributions(
    rng: np.random.Generator, n_concepts: int, per_concept: int, support: int = 12, shared: int = 6
):
    """Human rows and model rows with a dozen non-zero bins each.

    Each model row keeps `shared` of its concept's human bins and adds others at random,
    with Dirichlet masses (a few heavy bins, a long light tail), like extracted palettes.

    Returns
    -------
    P, Q : ndarray, shape (n_concepts * per_concept, 71)
        Row i of P is the human distribution of the concept of model row i.
    """
    human = np.zeros((n_concepts, 71))
    bins = np.array([rng.choice(71, support, replace=False) for _ in range(n_concepts)])
    np.put_along_axis(human, bins, rng.dirichlet(np.full(support, 0.6), n_concepts), axis=1)
    concept = np.repeat(np.arange(n_concepts), per_concept)
    n = len(concept)
    pick = np.argsort(rng.random((n, support)), axis=1)[:, :shared]
    keep = np.take_along_axis(bins[concept], pick, axis=1)
    keys = rng.random((n, 71))
    np.put_along_axis(keys, keep, np.inf, axis=1)  # never draw a kept bin twice
    extra = np.argsort(keys, axis=1)[:, : support - shared]
    model = np.zeros((n, 71))
    np.put_along_axis(model, np.hstack([keep, extra]), rng.dirichlet(np.full(support, 0.6), n), axis=1)
    return human[concept], model


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (user + system)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def _timed(fn, *args, **kwargs):
    """Run `fn`; return its result, wall seconds and CPU seconds (children included)."""
    wall, cpu = time.perf_counter(), _cpu_seconds()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, _cpu_seconds() - cpu


def bench_emd(P: np.ndarray, Q: np.ndarray, loop_pairs: int) -> dict:
    """emd_rows (1 process and default) against an ot.emd2 loop on the first rows."""
    D = load_uw71().ground_distance
    loop, t_loop, c_loop = _timed(lambda: np.array([ot.emd2(P[i], Q[i], D) for i in range(loop_pairs)]))
    serial, t_serial, c_serial = _timed(emd_rows, P, Q, workers=1)
    pooled, t_pooled, c_pooled = _timed(emd_rows, P, Q)
    Pn, Qn = check_masses(P), check_masses(Q)
    cut = [
        (p[p > 0], q[q > 0], np.ascontiguousarray(D[np.ix_(p > 0, q > 0)]))
        for p, q in zip(Pn[:loop_pairs], Qn[:loop_pairs])
    ]
    _, _, c_core = _timed(lambda: [emd_c(a, b, M, 100_000, 1) for a, b, M in cut])
    n = len(P)
    return {
        "pairs": n,
        "identical_to_ot_emd2": bool(
            np.array_equal(serial[:loop_pairs], loop) and np.array_equal(pooled, serial)
        ),
        "ot_emd2_loop_pairs_per_s": loop_pairs / t_loop,
        "emd_rows_1proc_pairs_per_s": n / t_serial,
        "emd_rows_pairs_per_s": n / t_pooled,
        "emd_rows_speedup_vs_loop": (n / t_pooled) / (loop_pairs / t_loop),
        "ot_emd2_loop_cpu_us_per_pair": c_loop / loop_pairs * 1e6,
        "emd_rows_1proc_cpu_us_per_pair": c_serial / n * 1e6,
        "emd_rows_pool_cpu_us_per_pair": c_pooled / n * 1e6,
        "simplex_core_cpu_us_per_pair": c_core / loop_pairs * 1e6,
    }


def cpu_model() -> str:
    """The processor's model name as ``/proc/cpuinfo`` gives it (``"unknown"`` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def machine_speed(pairs: int = 3_000, seed: int = 0) -> float:
    """The speed of this machine today: pairs per second of a plain ``ot.emd2`` loop, one
    process, on fixed realistic pairs (the loop `bench_emd` compares `emd_rows` with).

    The same 2-core machines differ from day to day (issue 28 saw 2,200-2,500 pairs/s on a
    slow day, 3,800 on another), so a suite time is quoted with this figure beside it.
    """
    P, Q = realistic_distributions(np.random.default_rng(seed), pairs // 7 + 1, 7)
    D = load_uw71().ground_distance
    ot.emd2(P[0], Q[0], D)  # the first call sets POT up
    _, wall, _ = _timed(lambda: [ot.emd2(p, q, D) for p, q in zip(P[:pairs], Q[:pairs])])
    return pairs / wall


def _all_metrics(P: np.ndarray, Q: np.ndarray, n_tables: int) -> float:
    emd_all = emd_rows(P, Q)
    pcc_all, ed_all = pcc(P, Q), entropy_difference(P, Q)
    per_table = [
        (dca(p, q), delta_hue(p, q)) for p, q in zip(np.array_split(P, n_tables), np.array_split(Q, n_tables))
    ]
    return float(emd_all.sum() + np.nansum(pcc_all) + ed_all.sum() + np.nansum(per_table))


def bench_tables(P: np.ndarray, Q: np.ndarray, n_tables: int) -> dict:
    """All five metrics for every row (EMD, PCC, ED) and per table (DCA, ΔHue)."""
    checksum, wall, cpu = _timed(_all_metrics, P, Q, n_tables)
    _, emd_wall, _ = _timed(emd_rows, P, Q)
    return {
        "sweep_rows": len(P),
        "sweep_tables": n_tables,
        "sweep_s": wall,
        "sweep_cpu_s": cpu,
        "sweep_emd_only_s": emd_wall,
        "sweep_checksum": checksum,
    }


def _synthetic_photo(rng: np.random.Generator, side: int) -> tuple[np.ndarray, np.ndarray]:
    """A smooth two-tone object with sensor noise on a gradient background, and its mask."""
    yy, xx = np.mgrid[:side, :side] / side
    background = np.stack([160 + 60 * xx, 170 + 40 * yy, 200 - 50 * xx], axis=-1)
    cy, cx, r = rng.uniform(0.35, 0.65, 2).tolist() + [rng.uniform(0.2, 0.35)]
    mask = (yy - cy) ** 2 + (xx - cx) ** 2 < r**2
    body = rng.uniform(20, 235, 3) * (0.6 + 0.4 * (1 - yy))[..., None]
    image = np.where(mask[..., None], body, background)
    image += rng.normal(0, 6, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), mask


def bench_extraction(
    rng: np.random.Generator, n_images: int = 24, per_concept: int = 8, side: int = 1024
) -> dict:
    """Decode PNG image + mask pairs and extract, in concepts of `per_concept` images."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n_images):
            image, mask = _synthetic_photo(rng, side)
            Image.fromarray(image).save(Path(tmp, f"{i}.png"))
            Image.fromarray(mask).save(Path(tmp, f"{i}_mask.png"))
            paths.append((Path(tmp, f"{i}.png"), Path(tmp, f"{i}_mask.png")))
        wall, cpu = time.perf_counter(), _cpu_seconds()
        decoded = []
        for lo in range(0, n_images, per_concept):
            chunk = paths[lo : lo + per_concept]
            images = [np.asarray(Image.open(p).convert("RGB")) for p, _ in chunk]
            masks = [np.asarray(Image.open(m)) > 0 for _, m in chunk]
            concept_distribution(images, masks)
            decoded.append((images, masks))
        wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    _, in_memory, _ = _timed(lambda: [concept_distribution(*pair) for pair in decoded])
    return {
        "extraction_images": n_images,
        "extraction_image_side": side,
        "extraction_images_per_s_per_core": n_images / wall,
        "extraction_cpu_ms_per_image": cpu / n_images * 1e3,
        "extraction_without_decode_images_per_s": n_images / in_memory,
    }


def run(*, seed: int = 0, loop_pairs: int = 10_000, extraction_images: int = 24) -> dict:
    """Run every benchmark and return the figures (throughputs in items per second)."""
    rng = np.random.default_rng(seed)
    per_concept = SWEEP["models"] * SWEEP["styles"] * SWEEP["cfg_scales"]
    P, Q = realistic_distributions(rng, SWEEP["concepts"], per_concept)
    figures = {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average_1min_at_start": os.getloadavg()[0],
    }
    figures |= bench_extraction(rng, n_images=extraction_images)
    figures |= bench_emd(P, Q, loop_pairs)
    figures |= bench_tables(P, Q, per_concept)
    return figures


def main() -> dict:
    figures = run()
    for key, value in figures.items():
        print(f"{key:40s} {value:,.2f}" if isinstance(value, float) else f"{key:40s} {value}")
    return figures


if __name__ == "__main__":
    main()
