"""``python -m bench``: run every benchmark and rewrite the summary table of BENCHMARKS.md.

Benchmarks (each module's own function is called; nothing is measured here)
------------------------------------------------------------------------------
core        `bench.bench_core.run`: extraction images/s, EMD pairs/s, the metric tables
            of the CFG sweep (1,281 concepts x 7 models x 2 styles x 7 CFG scales)
load        `bench.bench_load.run`: submit latency under load, SIGKILL and restart,
            a killed and resumed evaluation run; also rewrites "Load and faults"
pace        `bench.bench_load.working_pace`: 30 designers at a working pace (a coloring
            every 20-60 s), all starting together, 5 minutes; rewrites "Working pace"
light       `bench.bench_load.light_during_burst`: sign-in and the task view while 30
            designers (light clients) submit as fast as they can; rewrites "Light
            endpoints during a burst"
generation  `bench.bench_generation.bench_generation`: images/s, on the GPU when one is
            present, else the tiny model on the CPU (labelled)
review      `bench.bench_review.run`: storing a 1024² coloring, opening the vote queue,
            P_H(x|c), a blind vote and the agreement panel over 562 reviews
scale       `bench.bench_scale.run`: the research views, the whole vote queue, study set-up
            and a full export on a synthetic study at 10%, 50% and 100% of the paper's size
            (1,278 concepts x 5 colorings of 1024² PNGs); also rewrites "Full study size"
scale-out   `bench.bench_scale_out.run`: the tiny-model run in-process vs a local Ray
            cluster with 1 and 2 workers, Ray's cost per item; rewrites "Scale-out (Ray)"
ray-node-loss `bench.bench_ray_node_loss.run`: the tiny run on a two-node local Ray cluster
            with and without the second node's raylet SIGKILLed mid-run (items done and
            redone, wall time); rewrites its part of "Scale-out (Ray)"
adaptive    `bench.bench_adaptive.run`: adaptive collection against fixed K = 5, simulated
            designers around the Schloss-lab ratings; rewrites "Adaptive collection"
crowd       `bench.bench_crowd.run`: 200 participants open a study link within a minute and
            vote every 3-8 s (light clients); page load, vote latency, lost or duplicated
            votes; rewrites "Crowd"
page-size   `bench.bench_page_size.run`: bytes of the page, /config and /gradio_api/info,
            and the first render of the page, at the shipped concept list's size

Only text between a pair of markers (``<!-- bench:NAME -->`` ... ``<!-- /bench:NAME -->``)
is rewritten: ``summary`` (machine, date, command and one row per figure; with ``--only``
the rows of the benchmarks not run are kept, and the table says so) and ``load``.
Other sections of BENCHMARKS.md belong to their benchmarks' authors.

    python -m bench [--only core,load,pace,light,generation,review,scale,scale-out,adaptive,page-size] [--quick] [--dry-run]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
TITLES = {
    "summary": "Summary",
    "load": "Load and faults",
    "pace": "Working pace",
    "light": "Light endpoints during a burst",
    "scale": "Full study size",
    "scale-out": "Scale-out (Ray)",
    "adaptive": "Adaptive collection",
    "crowd": "Crowd",
    "explicit-independent": "Explicit colors on renders made apart from the scorer (Mitsuba 3)",
}


@dataclass(frozen=True)
class Row:
    """One line of the summary table."""

    benchmark: str
    figure: str
    value: str
    setting: str


def rewrite_section(text: str, name: str, body: str) -> str:
    """`text` with what lies between the markers of section `name` replaced by `body`.

    A section that is missing is appended, under a ``## <title>`` heading.
    """
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    if start in text and end in text.split(start, 1)[1]:
        before, rest = text.split(start, 1)
        return before + block + rest.split(end, 1)[1]
    if not text.strip():
        text = "# Benchmarks\n"
    return f"{text.rstrip()}\n\n## {TITLES.get(name, name)}\n\n{block}\n"


def summary_table(
    rows: list[Row],
    *,
    machine: str,
    command: str,
    date: str,
    load_average: float,
    python: str,
    quick: bool,
    kept: tuple[str, ...] = (),
) -> str:
    """The summary section: where and how the figures were taken, then one row each.

    `kept` names benchmarks whose rows come from an earlier run (``--only`` ran others).
    """
    earlier = f" Rows of {', '.join(kept)}: kept from an earlier run (see their sections)." if kept else ""
    lines = [
        f"Machine: {machine}; Python {python}; 1-minute load average at start "
        f"{load_average:.1f} (a shared machine inflates times).",
        f"Date: {date}. Command: `{command}`" + (" (quick sizes: a smoke run)." if quick else ".") + earlier,
        "",
        "| benchmark | figure | value | setting |",
        "|---|---|---:|---|",
    ]
    lines += [f"| {r.benchmark} | {r.figure} | {r.value} | {r.setting} |" for r in rows]
    return "\n".join(lines)


def summary_rows(text: str) -> list[Row]:
    """The rows of the summary table in BENCHMARKS.md text (none when it has no summary)."""
    start, end = "<!-- bench:summary -->", "<!-- /bench:summary -->"
    if start not in text:
        return []
    rows = []
    for line in text.split(start, 1)[1].split(end, 1)[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] in BENCHMARKS:
            rows.append(Row(*cells))
    return rows


def machine_description() -> str:
    """CPU model and the cores this process may use, memory, and the GPU if any."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        model = names[0] if names else model
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {cores} cores, {memory:.0f} GiB; GPU: {_gpu()}"


def _gpu() -> str:
    try:
        import torch
    except ImportError:
        return "none (torch missing)"
    if not torch.cuda.is_available():
        return "none"
    return torch.cuda.get_device_name(0)


def core(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_core.run` (the color core's benchmark)."""
    from bench.bench_core import SWEEP, run

    f = run(loop_pairs=1_000, extraction_images=8) if quick else run()
    sweep = " x ".join(f"{SWEEP[k]:,} {k.replace('_', ' ')}" for k in SWEEP)
    return [
        Row(
            "core",
            "Extraction",
            f"{f['extraction_images_per_s_per_core']:.1f} images/s per core",
            f"{f['extraction_image_side']}² PNG image + mask, decode and extract",
        ),
        Row(
            "core",
            "EMD (emd_rows)",
            f"{f['emd_rows_pairs_per_s']:,.0f} pairs/s",
            f"{f['pairs']:,} pairs; {f['emd_rows_speedup_vs_loop']:.1f}x an ot.emd2 loop; "
            f"identical values: {'yes' if f['identical_to_ot_emd2'] else 'NO'}",
        ),
        Row(
            "core",
            "Metric tables (5 metrics)",
            f"{f['sweep_s']:.1f} s",
            f"{f['sweep_rows']:,} rows = {sweep}",
        ),
    ], {}


def load(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_load.run`, and the "Load and faults" section."""
    from bench import bench_load

    f = (
        bench_load.run(designers=4, submissions=4, side=128, kill_designers=3, resume=False)
        if quick
        else bench_load.run()
    )
    ok = not f["load_problems"] and not f["kill_problems"] and f.get("run_identical", True)
    return [
        Row(
            "load",
            "Submit latency p50 / p95",
            f"{f['p50_ms']:.0f} / {f['p95_ms']:.0f} ms",
            f"{f['designers']} designers x {f['submissions_each']} at once through "
            f"/designer_submit of a running app.py, {f['image_side']}² sketches",
        ),
        Row(
            "load",
            "Faults (app SIGKILLed, restart, resume)",
            "all checks pass" if ok else "FAILED",
            f"{f['kill_acknowledged']} acknowledged before the kill; "
            f"{f['kill_orphans_swept']} orphaned files swept at restart",
        ),
    ], {"load": bench_load.markdown(f)}


def pace(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_load.working_pace`, and the "Working pace" section."""
    from bench import bench_load

    f = (
        bench_load.working_pace(designers=4, minutes=0.5, pace=(2.0, 6.0), side=128)
        if quick
        else bench_load.working_pace()
    )
    ok = not f["pace_problems"] and not f["pace_duplicates"]
    return [
        Row(
            "pace",
            "Submit latency p50 / p95 at a working pace",
            f"{f['pace_p50_ms']:.0f} / {f['pace_p95_ms']:.0f} ms",
            f"{f['pace_designers']} designers starting together, one coloring every "
            f"{f['pace_range_s'][0]:.0f}-{f['pace_range_s'][1]:.0f} s for {f['pace_minutes']:g} min, "
            f"start included; store checks {'pass' if ok else 'FAILED'}",
        )
    ], {"pace": bench_load.pace_markdown(f)}


def light(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_load.burst_comparison`, and its section."""
    from bench import bench_load

    size = {"designers": 4, "submissions": 4, "side": 128} if quick else {}
    # Light clients: `gradio_client` designers cost more CPU than the server on 2 cores.
    f = bench_load.burst_comparison(**size, transport="http", prepared=True)
    pool, base = f["pool"], f["baseline"]
    return [
        Row(
            "light",
            "Burst throughput; sign-in / task view p95 during it",
            f"{pool['light_submissions_per_s']:.1f} submissions/s "
            f"({pool['light_submissions_per_s'] / base['light_submissions_per_s']:.2f}x before); "
            f"{pool['light_login_invite_p95_ms']:.0f} / {pool['light_designer_state_p95_ms']:.0f} ms",
            f"{pool['light_designers']} designers submitting at once, light clients (`--light-clients`); "
            "same run before issue 13: "
            f"{base['light_submissions_per_s']:.1f} submissions/s, sign-in p95 "
            f"{base['light_login_invite_p95_ms']:.0f} ms; store checks "
            f"{'pass' if not any(v['light_problems'] for v in f.values()) else 'FAILED'}",
        )
    ], {"light": bench_load.light_markdown(f)}


def generation(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_generation.bench_generation` (GPU if present, else CPU tiny)."""
    from bench.bench_generation import bench_generation

    result = bench_generation(batch_sizes=(1, 2), repeats=1) if quick else bench_generation()
    return [
        Row(
            "generation",
            f"Generation, batch {row['batch']}",
            f"{row['images_per_s_50_steps']:.3f} images/s",
            f"{result['device']}; {result['model']}; {result['resolution']}², 50 steps "
            "(extrapolated from two step counts)",
        )
        for row in result["rows"]
    ], {}


def review(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_review.run` (expert quality control)."""
    from bench.bench_review import run

    f = run(concepts=1, colorings=15, side=256) if quick else run()
    side = f"{f['side']}²"
    return [
        Row(
            "review",
            "Store a coloring",
            f"{f['store_coloring_s']:.3f} s",
            f"median of {f['stored_colorings']}; {side} image + mask: files, extraction, rows",
        ),
        Row(
            "review",
            "Open the vote queue",
            f"{f['open_review_queue_s_per_concept']:.2f} s per concept",
            f"{f['opened_reviews']} colorings in {f['concepts']} concepts; SCD plausibility at {side}",
        ),
        Row(
            "review",
            "P_H(x|c)",
            f"{f['human_distribution_s']:.3f} s",
            f"{f['human_distribution_n']} colorings at {side}",
        ),
        Row(
            "review",
            "Blind vote (queue + vote)",
            f"{f['vote_ms']:.1f} ms",
            f"median of {f['votes']} votes on {f['vote_colorings']} colorings, WAL file database",
        ),
        Row(
            "review",
            "Agreement panel",
            f"{f['agreement_panel_s']:.3f} s",
            f"{f['decided_reviews']} decided reviews (Table 5, Fleiss' κ, Krippendorff's α)",
        ),
    ], {}


def scale(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_scale.run` (the full study's size), and its section."""
    from bench import bench_scale

    rows = bench_scale.run((0.01,), side=256) if quick else bench_scale.run()
    full = rows[-1]
    setting = (
        f"{full['concepts']:,} concepts x 5 colorings ({full['side']}²), "
        f"{full['model_distributions']:,} model distributions"
    )
    return [
        Row("scale", label, f"{full[key]:.2f} s", setting)
        for key, label in (
            ("browser_s", "Concept browser, one concept"),
            ("scoring_s", "Scoring every model distribution once (by the job, after its extraction)"),
            ("leaderboards_first_s", "Leaderboards page after a change, first look (point estimates)"),
            ("leaderboards_intervals_s", "Leaderboards page after a change, then its bootstrap intervals"),
            ("leaderboards_changed_s", "Leaderboards in one call after a change (API, CLI)"),
            ("leaderboards_s", "Leaderboards (kept; refreshed in the background after a change)"),
            ("agreement_s", "QC agreement panel"),
            ("queue_s", "Open the whole vote queue"),
            ("study_setup_s", "Study set-up (150 concepts)"),
            ("export_s", "Full export"),
        )
    ], {"scale": bench_scale.markdown(rows)}


def ray_node_loss(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_ray_node_loss.run`, and its part of "Scale-out (Ray)"."""
    from bench import bench_ray_node_loss

    f = bench_ray_node_loss.run(samples=2 if quick else 4)
    killed, intact = f["cases"]["node killed"], f["cases"]["intact"]
    row = Row(
        "ray-node-loss",
        "Two-node Ray run, second node killed mid-run",
        f"{killed['wall_s']:.1f} s vs {intact['wall_s']:.1f} s intact",
        f"{killed['items_done']}/{killed['items']} items done, {killed['redone_items']} redone; "
        f"same rows: {'yes' if f['same_rows'] else 'NO'}",
    )
    return [row], {"ray-node-loss": bench_ray_node_loss.markdown(f)}


def scale_out(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_scale_out.run`, and the "Scale-out (Ray)" section."""
    from bench import bench_scale_out

    f = bench_scale_out.run(samples=1, noop_items=50) if quick else bench_scale_out.run()
    rows = [
        Row(
            "scale-out",
            f"Tiny run, {r['label']}",
            f"{r['images_per_s']:.2f} images/s",
            f"{r['items']} images, generate + mask + extract; steady generate "
            f"{r['steady_generate_images_per_s']:.2f} images/s",
        )
        for r in f["rows"]
    ]
    rows.append(
        Row(
            "scale-out",
            "Ray cost per item",
            f"{f['noop_overhead_ms']:.1f} ms",
            f"no-op work, 1 worker; vs {bench_scale_out.REAL_SECONDS_PER_IMAGE:.0f} s per real image; "
            f"same images as in-process: {'yes' if f['identical'] else 'NO'}",
        )
    )
    return rows, {"scale-out": bench_scale_out.markdown(f)}


def adaptive(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_adaptive.run`, and the "Adaptive collection" section."""
    from bench import bench_adaptive

    f = bench_adaptive.run(3 if quick else 20)
    best, ref = f["best"]["mean_error"], f["reference"]
    value = "not reached" if best is None else f"{best['colorings']:.1f} vs {ref['colorings']:.0f}"
    return [
        Row(
            "adaptive",
            "Colorings for fixed K = 5's mean P_H error, adaptive vs fixed",
            value,
            f"{f['concepts']} concepts, simulated designers around the Schloss-lab ratings, "
            f"{f['repeats']} collections per setting",
        )
    ], {"adaptive": bench_adaptive.markdown(f)}


def crowd(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_crowd.run`, and the "Crowd" section."""
    from bench import bench_crowd

    n = 20 if quick else 200
    f = bench_crowd.run(n, 20.0 if quick else 60.0, 30.0 if quick else 120.0)
    setting = (
        f"{n} participants joining in {f['join_s']:.0f} s, a vote every 3-8 s; load {f['load_start']:.1f}"
    )
    rows = [
        Row("crowd", "Page load (join) p95", f"{f['page_p95_s'] or float('nan'):.2f} s", setting),
        Row("crowd", "Vote p95", f"{f['vote_p95_ms'] or float('nan'):.0f} ms", setting),
        Row("crowd", "Votes lost or duplicated", str(len(f["problems"])), f"{f['votes']} votes acknowledged"),
    ]
    return rows, {
        "crowd": bench_crowd.section([f], f"python -m bench --only crowd{' --quick' if quick else ''}")
    }


def explicit_validation(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_explicit_validation.bench`, and its section (the explicit-color
    rule sets on a held-out seed of the validation renders)."""
    from bench import bench_explicit_validation

    return bench_explicit_validation.bench(quick, Row)


def explicit_independent(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_explicit_independent.bench`, and its section (the explicit-color
    rule sets on Mitsuba renders made apart from the scorer)."""
    from bench import bench_explicit_independent

    return bench_explicit_independent.bench(quick, Row)


def page_size(quick: bool) -> tuple[list[Row], dict[str, str]]:
    """Rows from `bench.bench_page_size.run` (the page's weight and first render)."""
    from bench import bench_page_size

    f = bench_page_size.run(1 if quick else 5)
    return [
        Row(
            "page-size",
            "Page / config / API description",
            f"{f['page_bytes'] / 1000:.0f} / {f['config_bytes'] / 1000:.0f} / {f['info_bytes'] / 1000:.0f} kB",
            f"{f['components']} components, {f['dependencies']} dependencies; all 1,278 concepts shipped",
        ),
        Row(
            "page-size",
            "First render of the page",
            f"{f['first_render_s']:.2f} s",
            f"one GET / on a launched app, in process; median of the next {f['render_median_s']:.2f} s",
        ),
    ], {}


BENCHMARKS: dict[str, Callable[[bool], tuple[list[Row], dict[str, str]]]] = {
    "core": core,
    "load": load,
    "pace": pace,
    "light": light,
    "generation": generation,
    "review": review,
    "scale": scale,
    "scale-out": scale_out,
    "ray-node-loss": ray_node_loss,
    "adaptive": adaptive,
    "crowd": crowd,
    "explicit-validation": explicit_validation,
    "explicit-independent": explicit_independent,
    "page-size": page_size,
}


def run_all(names: list[str], quick: bool) -> tuple[list[Row], dict[str, str], bool]:
    """Run the named benchmarks; a failure becomes a row and the others still run."""
    rows, sections, ok = [], {}, True
    for name in names:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            new_rows, new_sections = BENCHMARKS[name](quick)
        except Exception as error:  # one broken benchmark must not hide the others
            traceback.print_exc()
            new_rows, new_sections, ok = (
                [Row(name, name, "FAILED", f"{type(error).__name__}: {error}")],
                {},
                False,
            )
        print(f"[bench] {name} took {time.perf_counter() - start:.0f} s", file=sys.stderr)
        rows += new_rows
        sections |= new_sections
    return rows, sections, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {list(BENCHMARKS)}"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--dry-run", action="store_true", help="print, do not write the file")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown or not names:
        parser.error(f"--only must name some of {list(BENCHMARKS)}, got {args.only!r}")
    load_average = os.getloadavg()[0]
    rows, sections, ok = run_all(names, args.quick)
    command = "python -m bench" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    text = BENCHMARKS_MD.read_text(encoding="utf-8") if BENCHMARKS_MD.exists() else ""
    kept = [row for row in summary_rows(text) if row.benchmark not in names]
    order = list(BENCHMARKS)
    sections["summary"] = summary_table(
        sorted(rows + kept, key=lambda row: order.index(row.benchmark)),
        machine=machine_description(),
        command=command,
        quick=args.quick,
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        load_average=load_average,
        python=platform.python_version(),
        kept=tuple(dict.fromkeys(row.benchmark for row in kept)),
    )
    print(sections["summary"])
    if not args.dry_run:
        for name, body in sections.items():
            text = rewrite_section(text, name, body)
        BENCHMARKS_MD.write_text(text, encoding="utf-8")
        print(f"[bench] wrote {BENCHMARKS_MD}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
