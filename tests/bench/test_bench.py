"""``python -m bench``: its sections of BENCHMARKS.md are rewritten, the rest is kept."""

import pytest

from bench.__main__ import Row, main, rewrite_section, summary_rows, summary_table


def test_rewrite_section_replaces_only_between_its_markers():
    text = (
        "# Benchmarks\n\n## Summary\n\n<!-- bench:summary -->\nold\n<!-- /bench:summary -->"
        "\n\n## Generation\n\nwritten by hand\n"
    )
    assert rewrite_section(text, "summary", "new\n") == text.replace("\nold\n", "\nnew\n")


def test_rewrite_section_appends_a_missing_section_under_its_title():
    assert rewrite_section("", "load", "body") == (
        "# Benchmarks\n\n## Load and faults\n\n<!-- bench:load -->\nbody\n<!-- /bench:load -->\n"
    )
    assert rewrite_section("# B\n\nhand\n", "x", "y") == (
        "# B\n\nhand\n\n## x\n\n<!-- bench:x -->\ny\n<!-- /bench:x -->\n"
    )


def test_summary_table_says_where_when_and_how():
    table = summary_table(
        [Row("load", "p50", "3 ms", "6 designers")],
        machine="EPYC, 2 cores",
        command="python -m bench",
        date="2025-01-31 12:00 UTC",
        load_average=1.25,
        python="3.11.7",
        quick=False,
    )
    assert table.splitlines() == [
        "Machine: EPYC, 2 cores; Python 3.11.7; 1-minute load average at start 1.2 "
        "(a shared machine inflates times).",
        "Date: 2025-01-31 12:00 UTC. Command: `python -m bench`.",
        "",
        "| benchmark | figure | value | setting |",
        "|---|---|---:|---|",
        "| load | p50 | 3 ms | 6 designers |",
    ]


def test_unknown_benchmark_names_are_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--only", "core,nope", "--dry-run"])
    assert (
        "--only must name some of ['core', 'load', 'pace', 'light', 'generation', 'review', 'scale', 'scale-out', "
        "'ray-node-loss', 'adaptive', 'crowd', 'explicit-validation', 'explicit-independent', 'page-size'], got "
        "'core,nope'"
    ) in capsys.readouterr().err


def test_the_review_benchmark_returns_its_figures_for_the_summary(capsys):
    assert main(["--only", "review", "--quick", "--dry-run"]) == 0
    table = capsys.readouterr().out
    figures = [line.split(" | ")[1] for line in table.splitlines() if line.startswith("| review")]
    assert figures == [
        "Store a coloring",
        "Open the vote queue",
        "P_H(x|c)",
        "Blind vote (queue + vote)",
        "Agreement panel",
    ]
    assert "median of 5; 256² image" in table and "5 colorings in 1 concepts" in table
    assert "median of 45 votes on 15 colorings" in table and "15 decided reviews" in table


def test_summary_rows_reads_back_the_table_so_only_keeps_the_other_benchmarks_rows():
    rows = [Row("core", "EMD", "31,320 pairs/s", "125,538 pairs"), Row("load", "p50", "3 ms", "6 designers")]
    table = summary_table(
        rows,
        machine="EPYC",
        command="python -m bench --only load",
        date="2025-01-31 12:00 UTC",
        load_average=1.0,
        python="3.11.7",
        quick=False,
        kept=("core",),
    )
    text = rewrite_section("# Benchmarks\n", "summary", table)
    assert summary_rows(text) == rows
    assert "Command: `python -m bench --only load`. Rows of core: kept from an earlier run" in text
    assert summary_rows("# Benchmarks\n") == []


def test_generation_variants_are_timed_on_the_same_pipeline_and_compared_with_the_first():
    from bench.bench_generation import bench_generation, format_markdown

    result = bench_generation(
        model="sdxl-tiny",
        device="cpu",
        batch_sizes=(2,),
        steps=(1, 2),
        repeats=1,
        variants=("baseline", "sdpa-off", "vae-slicing+channels-last", "baseline"),
    )
    rows = result["rows"]
    assert [r["variant"] for r in rows] == ["baseline", "sdpa-off", "vae-slicing+channels-last", "baseline"]
    # No timed assertion: on a busy CPU the extrapolation to 50 steps may be undefined (nan).
    assert all(r["batch"] == 2 and min(r["seconds"].values()) > 0 for r in rows)
    # Undone before the next: the second baseline makes the first one's images exactly.
    assert rows[0]["max_abs_diff"] == rows[3]["max_abs_diff"] == 0
    assert all(r["max_abs_diff"] <= 1 for r in rows)  # the same images, to rounding on a CPU
    table = format_markdown(result)
    assert "| baseline (again) | 2 |" in table and "| sdpa-off | 2 |" in table


def test_an_unknown_generation_variant_is_refused_before_any_model_loads():
    from bench.bench_generation import bench_generation

    with pytest.raises(ValueError, match="unknown variant 'fast'; known: baseline, sdpa-off"):
        bench_generation(variants=("baseline", "compile+fast"), device="cpu")


def test_the_write_lock_tracer_times_each_transaction_of_a_process_and_writes_them_when_terminated(tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys

    from bench.app_process import ROOT
    from bench.bench_load import LOCK_TRACER

    trace = tmp_path / "lock.json"
    script = (
        "import sys, time\n"
        "from storage import open_db, transaction\n"
        f"db = open_db({str(tmp_path / 's.sqlite')!r})\n"
        "for i in range(3):\n"
        "    with transaction(db):\n"
        "        time.sleep(0.05)\n"
        "print('done', flush=True)\n"
        "while True:\n"
        "    time.sleep(0.2)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{LOCK_TRACER}{os.pathsep}{ROOT}",
        "COLORCONCEPT_BENCH_LOCK_TRACE": str(trace),
    }
    process = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "done"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == -signal.SIGTERM  # dumped, then ended as SIGTERM does
    finally:
        process.kill()
    lock = json.loads(trace.read_text())
    assert len(lock["waits"]) == len(lock["holds"]) == 3
    assert all(hold >= 0.05 for hold in lock["holds"]) and all(wait >= 0 for wait in lock["waits"])


def test_bench_scale_keeps_its_study_to_open_in_the_app_when_asked(tmp_path):
    """A full-size rehearsal (README, BENCHMARKS.md) needs the bench's database kept: with
    ``--keep`` it stays, at the schema the app opens; a folder already holding one is refused."""
    import json
    import subprocess
    import sys

    import numpy as np

    from annotation.assignment import IS_CHECK
    from evaluation.color import metrics
    from storage import open_db
    from storage.schema import MIGRATIONS

    command = [sys.executable, "-m", "bench.bench_scale", "--fractions", "0.002", "--side", "32"]
    done = subprocess.run(
        [*command, "--keep", str(tmp_path / "kept")], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = tmp_path / "kept" / "0.002" / "data"
    assert f"kept: python app.py --db {data / 'colorconcept.sqlite'} --data-dir {data}" in done.stdout
    db = open_db(data / "colorconcept.sqlite")
    try:
        assert db.execute("select count(*) from colorings").fetchone()[0] == 15  # 3 concepts x 5
        # Three experts' votes on the same colorings, so a rehearsal shows agreement statistics,
        # and every other coloring's review open for an expert to try (at most half voted: at
        # 5 % every review was decided, an outside tester found).
        voted = "select coloring_id from qc_votes group by coloring_id having count(distinct expert_id) = 3"
        decided = len(db.execute(voted).fetchall())
        still_open = db.execute("select count(*) from reviews where status = 'open'").fetchone()[0]
        assert decided % 5 == 0 and 0 < decided < 15 and decided + still_open == 15
        assert db.execute("select max(version) from schema_version").fetchone()[0] == len(MIGRATIONS)
        # Its participants prefer a side: always "left" split every pair evenly, as each side
        # is shown left equally often, and Table 3 was blank (outside probe 222).
        truth = {
            k: np.array(json.loads(p))
            for k, p in db.execute("select concept_key, p from study_ground_truths")
        }
        candidates = {
            (k, m): np.array(json.loads(p))
            for k, m, p in db.execute("select concept_key, model, p from study_candidates")
        }
        votes = db.execute(
            "select p.concept_key, p.a, p.b, j.winner from judgments j join study_pairs p on p.id = j.pair_id "
            f"where not {IS_CHECK}"
        ).fetchall()
        nearer = [
            {"a": a, "b": b}[winner] == min((a, b), key=lambda m: metrics.emd(truth[key], candidates[key, m]))
            for key, a, b, winner in votes
        ]
        assert len(nearer) >= 12 and np.mean(nearer) > 0.65, np.mean(nearer)
    finally:
        db.close()
    again = subprocess.run(
        [*command, "--keep", str(tmp_path / "kept")], capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 2 and "is not empty: give a new or empty folder" in again.stderr


def test_bench_research_views_refuses_a_database_that_is_not_there(tmp_path, capsys):
    from bench import bench_research_views

    with pytest.raises(SystemExit) as stopped:
        bench_research_views.main(["--db", str(tmp_path / "none.sqlite"), "--data-dir", str(tmp_path)])
    assert stopped.value.code == 2
    assert "is not a file: give the database bench_scale --keep printed" in capsys.readouterr().err


def test_bench_placement_times_a_small_study_and_refuses_bad_sizes(capsys):
    from bench import bench_placement

    assert bench_placement.main(["--pairs", "40", "--people", "0,3", "--trials", "5", "--repeats", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split(" | ")[:2] for row in rows] == [["| 0", "40"], ["| 3", "40"]]
    for argv, said in (
        (["--people", "x"], "--people must be comma-separated"),
        (["--pairs", "0"], "--pairs must be 1"),
    ):
        with pytest.raises(SystemExit) as stopped:
            bench_placement.main(argv)
        assert stopped.value.code == 2 and said in capsys.readouterr().err
