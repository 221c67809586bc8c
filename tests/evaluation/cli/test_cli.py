"""The command line ``python -m evaluation``, end to end on tiny models (CPU, offline)."""

import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from bench.bench_ray_node_loss import outcome, recorded
from evaluation.__main__ import COMMANDS, forget_made_database, main
from evaluation.color.naming import names_of_uw71
from evaluation.models.registry import PROJECT_ROOT
from storage import open_db
from storage.shown import shown_path
from tests.disks import fill, tmpfs
from tests.research_data import tiny_grid_argv, tiny_grid_reference, tiny_models, tiny_paths  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    assert main(["build-tiny", "--models-dir", str(root)]) == 0
    return root


def _storage(tmp_path):
    return ["--db", str(tmp_path / "db.sqlite"), "--data-dir", str(tmp_path / "data")]


# A folder no test makes: a tiny model was built there, at any path --source named.
ROOT_MISSING = "/nonexistent/colorconcept-model"
# A new run of the tiny model, on the CPU, that the cases below complete with a bad option.
TINY_RUN = ["generate", "--run", "r", "--model", "tiny-random", "--concepts", "apple", "--device", "cpu"]


def _generate(tmp_path, models, *extra):
    return main(
        [
            "generate",
            "--run",
            "r",
            "--model",
            "tiny-random",
            "--source",
            str(models / "tiny-random"),
            "--concepts",
            "apple,banana",
            "--cfg",
            "2,7.5",
            "--samples",
            "2",
            "--device",
            "cpu",
            *extra,
            *_storage(tmp_path),
        ]
    )


def test_build_tiny_writes_the_three_models(models):
    assert sorted(p.name for p in models.iterdir()) == ["tiny-grounding-dino", "tiny-random", "tiny-sam"]
    assert (models / "tiny-random" / "model_index.json").is_file()
    assert (models / "tiny-sam" / "config.json").is_file()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_generate_segment_extract_score_end_to_end(tmp_path, models, capsys):
    assert _generate(tmp_path, models) == 0
    assert "run 'r': 16 images over 1 model(s), 2 concept(s), 2 style(s)" in capsys.readouterr().out
    segment = [
        "segment",
        "--run",
        "r",
        "--detector",
        str(models / "tiny-grounding-dino"),
        "--sam",
        str(models / "tiny-sam"),
        "--box-threshold",
        "0",
        "--text-threshold",
        "0",
        "--device",
        "cpu",
        *_storage(tmp_path),
    ]
    assert main(segment) == 0
    assert (
        "tiny-random: 16 usable, 0 without detection, 0 with an empty mask (of 16)" in capsys.readouterr().out
    )
    # Masked once: another threshold is refused, naming it, and changes nothing.
    looser = [*segment]
    looser[looser.index("--box-threshold") + 1] = "0.5"
    assert main(looser) == 2
    assert "differs in ['box_threshold']: give the run's own masking to go on" in capsys.readouterr().err
    assert main(segment) == 0 and "0 image(s) segmented" in capsys.readouterr().out
    # A run masked by code before schema 16 has no recorded masking: a command refused for
    # weights this machine lacks records none (it recorded its own, which then refused the
    # masking that had made the run's masks: an outside check of an upgrade).
    db = sqlite3.connect(tmp_path / "db.sqlite")
    with db:
        db.execute("update runs set masking = null where name = 'r'")
    missing = [*segment]
    missing[missing.index("--detector") + 1] = "IDEA-Research/grounding-dino-base"
    assert main(missing) == 2
    assert "is not on this machine" in capsys.readouterr().err
    assert db.execute("select masking from runs where name = 'r'").fetchone() == (None,)
    db.close()
    assert main(segment) == 0 and "0 image(s) segmented" in capsys.readouterr().out
    assert main(["extract", "--run", "r", *_storage(tmp_path)]) == 0
    assert "8 distribution(s) written for run 'r'" in capsys.readouterr().out

    out_dir = tmp_path / "scores"
    assert main(["score", "--run", "r", "--out", str(out_dir), *_storage(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert (
        "8 distribution(s) scored against 'uw71-ratings' (2 concept(s) with a human distribution)" in printed
    )
    # The default source is named, with what its flat rows do to EMD and ED.
    assert "Reference set 'uw71-ratings', imported: Schloss" in printed and "nearly flat" in printed
    assert (
        "Table 1: probabilistic distribution alignment" in printed
        and "Table 2: deterministic feature alignment (dominant color)" in printed
    )
    assert "Models average different concept sets" not in printed  # one model: nothing to compare
    table1, table2 = printed.split("Table 2:")[0], printed.split("Table 2:")[1].split("intervals")[0]
    assert _header(table1, "type") == ["Original", "Visual", "state", "Emotional"]
    assert _header(table1, "style") == ["Natural", "Clipart"] * 3
    assert _header(table1, "metric") == ["PCC", "EMD", "ED"] * 6
    assert _header(table2, "metric") == ["DCA", "ΔHue"] * 6
    long = pd.read_csv(out_dir / "scores_long.csv")
    assert len(long) == 8 and set(long["concept"]) == {"apple", "banana"}
    names = names_of_uw71().set_index("color_index")
    for column in ("dominant_human", "dominant_model"):  # each bin followed by its names
        at = list(long.columns).index(column)
        assert list(long.columns[at + 1 : at + 3]) == [f"{column}_name", f"{column}_basic"]
        assert list(long[f"{column}_basic"]) == list(names.loc[long[column], "basic_term"])
    table1 = pd.read_csv(out_dir / "table1.csv")
    assert set(table1["model"]) == {"tiny-random"} and set(table1["n_resamples"]) == {1000}
    assert pd.read_csv(out_dir / "exclusions.csv").to_dict("records") == [
        {"model": "tiny-random", "n_segmented": 16, "n_ok": 16, "n_no_detection": 0, "n_empty_mask": 0}
    ]


def test_score_on_a_run_whose_every_image_was_excluded_says_so_and_writes_the_exclusions(tmp_path, capsys):
    """It said "pick a source that covers its concepts", wrote nothing and printed no
    exclusion counts: the source was not the cause (outside probe 148)."""
    from storage import ensure_schema
    from tests.research_data import store_segmented_run

    db = open_db(tmp_path / "db.sqlite")
    ensure_schema(db)
    store_segmented_run(
        db,
        tmp_path / "data",
        "nodet",
        {
            ("m", "apple", "natural", 7.5): [None],
            ("m", "banana", "natural", 7.5): [None],
            ("k", "apple", "natural", 7.5): [None, (200, 20, 30)],
        },
    )
    db.close()
    out_dir = tmp_path / "scores"
    assert (
        main(
            ["score", "--run", "nodet", "--model", "m", "--resamples", "0", "--out", str(out_dir)]
            + _storage(tmp_path)
        )
        == 2
    )
    printed = capsys.readouterr()
    # Another model of the run has a usable image; --model m asks for m's, all excluded: the
    # check had looked at the whole run and let the score blame the source again.
    assert printed.err.strip().splitlines()[-1] == (
        "python -m evaluation score: error: every image of model 'm' in run 'nodet' was excluded by the masking (2 without a "
        "detection, 0 with an empty mask), so no model distribution has a color to score: segment again with a "
        "lower box threshold, or another segmenter"
    )
    assert "\nExcluded images (no detection / empty mask) per model\n" in printed.out
    assert pd.read_csv(out_dir / "exclusions.csv").to_dict("records") == [
        {"model": "m", "n_segmented": 2, "n_ok": 0, "n_no_detection": 2, "n_empty_mask": 0}
    ]
    assert sorted(p.name for p in out_dir.iterdir()) == ["exclusions.csv"]


def _header(text: str, level: str) -> list[str]:
    """The labels of one header row of a printed table, over all its wrapped blocks."""
    words = [w for line in text.splitlines() if line.startswith(level) for w in line.split()[1:]]
    return [w for w in words if w != "\\"]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_value_given_twice_counts_once_as_on_the_evaluate_tab(tmp_path, models, capsys):
    """Outside probe 186: --concepts apple,apple or --cfg 2,2 failed with a traceback (a run's
    items are unique)."""
    twice = ["--model", "tiny-random", "--styles", "natural, natural", "--concepts", "apple, banana, apple"]
    assert _generate(tmp_path, models, *twice, "--cfg", "7.5, 2, 7.50") == 0
    assert "run 'r': 8 images over 1 model(s), 2 concept(s), 1 style(s)" in capsys.readouterr().out
    with sqlite3.connect(tmp_path / "db.sqlite") as db:
        rows = db.execute("select distinct model, concept, style, cfg from run_items order by concept, cfg")
        assert rows.fetchall() == [
            ("tiny-random", c, "natural", cfg) for c in ("apple", "banana") for cfg in (2.0, 7.5)
        ]


def test_generating_again_resumes_and_redoes_nothing(tmp_path, models, capsys):
    assert _generate(tmp_path, models) == 0
    assert _generate(tmp_path, models) == 0
    assert "0 image(s) generated; 0 failed" in capsys.readouterr().out
    assert main(["generate", "--run", "r", "--device", "cpu", *_storage(tmp_path)]) == 0
    assert "0 image(s) generated" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["generate", "--run", "r", "--model", "nope"], "unknown model 'nope'; the registry has ["),
        (  # --concepts and --cfg take lists; --model one key each (outside probe 228)
            ["generate", "--run", "r", "--model", "tiny-random,tiny-random-b"],
            "unknown model 'tiny-random,tiny-random-b' (one model per --model: --model tiny-random "
            "--model tiny-random-b); the registry has [",
        ),
        (  # one of them unknown too: the hint, and the registry names which are known
            ["generate", "--run", "r", "--model", "tiny-random,nosuch,"],
            "unknown model 'tiny-random,nosuch,' (one model per --model: --model tiny-random --model "
            "nosuch); the registry has [",
        ),
        (
            ["generate", "--run", "r", "--model", "tiny-random", "--concepts", "unicorn"],
            "--concepts names unknown concepts ['unicorn']",
        ),
        (  # said only that 'Apple' is unknown; a reference CSV's row says what to write
            ["generate", "--run", "r", "--model", "tiny-random", "--concepts", "Apple,rotten  apple"],
            "--concepts names unknown concepts ['Apple' (write 'apple'), 'rotten  apple' (write 'rotten apple')]",
        ),
        (  # A 10,000-character name was echoed whole (outside probe 124).
            ["generate", "--run", "r", "--model", "tiny-random", "--concepts", "x" * 10_000],
            "--concepts names unknown concepts ['" + "x" * 80 + "'… (10000 characters)]; keys are",
        ),
        (
            ["generate", "--run", "r", "--model", "tiny-random", "--styles", "oil"],
            "--styles must be a comma-separated subset",
        ),
        # A resume (no --model) of a run in no database: refused, and no empty database left
        *[
            (
                [command, "--run", "r"],
                "(give --db PATH; `generate`, `run` or `explicit` with --model make one)",
            )
            for command in ("generate", "run", "explicit")
        ],
        (["score", "--run", "r"], "no database at "),  # a mistyped --db is not made anew
        # Each refused before the run is stored: refused after, they left a run that could never run.
        (
            TINY_RUN + ["--cfg", "nan"],
            "--cfg must be guidance scales in (0, 100], comma-separated, got 'nan'",
        ),
        (TINY_RUN + ["--cfg", "inf"], "--cfg must be guidance scales in (0, 100]"),
        (TINY_RUN + ["--cfg", ""], "--cfg must be guidance scales in (0, 100], comma-separated, got ''"),
        (TINY_RUN + ["--cfg=-3"], "--cfg must be guidance scales in (0, 100]"),
        (TINY_RUN + ["--steps", "0"], "--steps must be a whole number, 1 or more, at most 1,000, got 0"),
        (
            TINY_RUN + ["--resolution", "7"],
            "--resolution must be a positive multiple of 8, at most 4,096, got 7",
        ),
        # A 20,000-pixel side held 9.5 GB and grew; a billion steps were stored (outside probe 124).
        (
            TINY_RUN + ["--resolution", "20000"],
            "--resolution must be a positive multiple of 8, at most 4,096, got 20,000",
        ),
        (
            TINY_RUN + ["--steps", "1000000000"],
            "--steps must be a whole number, 1 or more, at most 1,000, got 1,000,000,000",
        ),
        (TINY_RUN + ["--batch-size=-2"], "--batch-size must be a whole number, 1 or more, got -2"),
        (
            TINY_RUN + ["--steps", "\u0661\u0660"],
            "argument --steps: must be a whole number, got '\u0661\u0660'",
        ),
        (TINY_RUN + ["--device", "tpu"], "--device must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
        (
            TINY_RUN + ["--concepts", " , "],
            "--concepts names no concept, got ' , '; leave it out for all 1,278",
        ),
        (
            TINY_RUN + ["--source", str(ROOT_MISSING)],
            f"--source '{ROOT_MISSING}': no diffusers pipeline there",
        ),
        (["generate", "--run", "r", "--model", "sdxl", "--concepts", "apple"], "The run was not started"),
        (["run", "--run", "r", "--model", "tiny-random", "--concepts", "apple"], "The run was not started"),
        (
            [
                "explicit",
                "--run",
                "r",
                "--model",
                "tiny-random",
                "--segmenter",
                "tiny-random",
                "--presence-threshold",
                "nan",
            ],
            "argument --presence-threshold: must be a number from 0 to 1, got 'nan'",
        ),
        # Each named the library's parameter (`samples`, `workers`, ...), not the option typed
        # (outside probe 204); a --ray-wait of nan was taken, and a stage left without a node
        # never stopped waiting.
        (TINY_RUN + ["--samples", "0"], "argument --samples: must be a whole number, 1 or more, got 0"),
        (TINY_RUN + ["--samples", "two"], "argument --samples: must be a whole number, 1 or more, got 'two'"),
        (TINY_RUN + ["--workers=-1"], "argument --workers: must be a whole number, 1 or more, got -1"),
        (
            TINY_RUN + ["--ray-wait=-1"],
            "argument --ray-wait: must be a number of seconds, 0 or more, got '-1'",
        ),
        (
            TINY_RUN + ["--ray-wait", "nan"],
            "argument --ray-wait: must be a number of seconds, 0 or more, got 'nan'",
        ),
        (
            TINY_RUN + ["--samples", "9" * 20],
            "one run makes at most 1,000,000",
        ),  # after the database was made
        # Read as the counts read numbers: float() took these (outside probe 208).
        *[
            (
                TINY_RUN + ["--ray-wait", wait],
                f"argument --ray-wait: must be a number of seconds, 0 or more, got {wait!r}",
            )
            for wait in ("1_000", "1e999", "inf", "\u0665")
        ],
        (
            ["segment", "--run", "r", "--box-threshold", "0_5"],
            "argument --box-threshold: must be a number from 0 to 1",
        ),
        (
            ["segment", "--run", "r", "--box-threshold", "2"],
            "argument --box-threshold: must be a number from 0 to 1",
        ),
        (["robustness", "--sample", "0"], "argument --sample: must be a whole number, 1 or more, got 0"),
        *[
            (
                ["explicit", "--run", "r", "--model", "tiny-random", "--size", size],
                f"argument --size: must be 'full', 'compact' or a whole number of prompts per color, 1 or more, "
                f"got {size!r}",
            )
            for size in ("0", "-1", "most")
        ],
        (
            ["explicit", "--run", "r", "--model", "tiny-random", "--samples", "0"],
            "argument --samples: must be a whole number, 1 or more, got 0",
        ),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, argv, message):
    try:
        status = main([*argv, *_storage(tmp_path)])
    except SystemExit as exit:  # argparse's own refusals (an option's type)
        status = exit.code
    assert status == 2
    err = capsys.readouterr().err
    # One line: argparse's usage block came first, 21 lines for `run` (outside probe 236).
    assert message in err and err.count("\n") == 1, err
    # Nothing is left, not even the new database a refused run had made (outside probe 208).
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_database_a_refused_command_made_stays_once_anything_is_stored_in_it(tmp_path):
    """`forget_made_database` removes only a database with nothing in it but its schema: one
    that another process (the app started on the same path) wrote in meanwhile stays."""
    import argparse

    from evaluation.cli import open_db as open_run_db

    for stored in (False, True):
        args = argparse.Namespace(
            db=tmp_path / f"db{stored}.sqlite", data_dir=tmp_path / "data", command="run"
        )
        db = open_run_db(args, create=True)
        if stored:
            db["settings"].insert({"key": "k", "value": "v"})
        forget_made_database(args)
        assert args.db.exists() is stored and (tmp_path / f"db{stored}.sqlite.lock").exists() is stored


def test_a_refused_run_given_a_link_or_new_folders_leaves_the_link_and_nothing_else(tmp_path, capsys):
    """Given a --db link to a file not there yet, the clean-up removed the link and left the
    new database at its target; given folders not there yet, it left them (outside probe 209)."""
    too_many = ["--samples", "9" * 20, "--data-dir", str(tmp_path / "data")]
    (tmp_path / "links").mkdir()
    link = tmp_path / "links" / "link.sqlite"
    link.symlink_to(tmp_path / "links" / "target.sqlite")
    assert main([*TINY_RUN, *too_many, "--db", str(link)]) == 2
    assert sorted(p.name for p in (tmp_path / "links").iterdir()) == ["link.sqlite"] and link.is_symlink()
    assert main([*TINY_RUN, *too_many, "--db", str(tmp_path / "new" / "sub" / "db.sqlite")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["links"]
    assert capsys.readouterr().err.count("one run makes at most 1,000,000") == 2


def test_a_resume_of_a_run_the_database_lacks_names_the_runs_it_has(tmp_path, capsys):
    sqlite3.connect(tmp_path / "db.sqlite").close()
    assert main(["generate", "--run", "r", *_storage(tmp_path)]) == 2
    assert (
        "no run named 'r'; known runs, newest first: none; a new run needs --model" in capsys.readouterr().err
    )


@pytest.mark.parametrize("command", ["score", "robustness", "extract --run r", "segment --run r"])
def test_a_data_dir_that_is_or_lies_under_a_plain_file_is_refused_by_every_command(tmp_path, capsys, command):
    """`score` ended in the OS's "Not a directory"; `extract` and `robustness` did not check."""
    sqlite3.connect(tmp_path / "db.sqlite").close()
    plain = tmp_path / "plain"
    plain.write_text("x")
    for data_dir, why in [
        (plain, "is a plain file, not a folder"),
        (plain / "d", f"lies under the plain file {str(plain)!r}"),
    ]:
        assert main([*command.split(), "--db", str(tmp_path / "db.sqlite"), "--data-dir", str(data_dir)]) == 2
        err = capsys.readouterr().err
        assert (
            err
            == f"python -m evaluation {command.split()[0]}: error: --data-dir {str(data_dir)!r} {why}; give a folder\n"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite", "plain"]


def test_a_database_that_is_not_sqlite_is_refused_and_nothing_is_written_beside_it(tmp_path, capsys):
    png = tmp_path / "notdb.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert main(["score", "--db", str(png), "--data-dir", str(tmp_path / "data")]) == 2
    assert f"--db '{png}' is not an SQLite database" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notdb.png"]


@pytest.mark.parametrize(
    "command",
    ["score", "explicit --run r --model tiny-random --segmenter tiny-random --objects car --colors red"],
)
def test_a_database_path_that_is_a_folder_is_one_line_and_leaves_no_lock_beside_it(tmp_path, capsys, command):
    """SQLite's "unable to open database file" came out as a traceback, with an empty
    ``.lock`` file left beside the folder (outsider 104)."""
    folder = tmp_path / "runs"
    folder.mkdir()
    assert main([*command.split(), "--db", str(folder), "--data-dir", str(tmp_path / "data")]) == 2
    assert capsys.readouterr().err == (
        f"python -m evaluation {command.split()[0]}: error: --db {str(folder)!r} is a folder; "
        "give the path of a database file in it\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"] and not any(folder.iterdir())


def test_a_file_the_command_cannot_write_or_read_is_one_line(tmp_path, capsys):
    sqlite3.connect(tmp_path / "db.sqlite").close()
    assert main(["score", "--reference-csv", str(tmp_path / "nope.csv"), *_storage(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"python -m evaluation score: error: --reference-csv {shown_path(tmp_path / 'nope.csv')}: no such file or directory\n"
        and "Traceback" not in err
    )


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_run_stopped_by_sigterm_says_so_exits_143_and_resumes(tiny_models, tmp_path, capsys):
    """A supervisor's stop ends the command as Ctrl-C does, in one line, with the shell's
    status for SIGTERM (143; it was Ctrl-C's 130), and the same command resumes."""
    argv = tiny_grid_argv(tiny_paths(tiny_models), tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "evaluation", *argv],
        cwd=PROJECT_ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while recorded(tmp_path / "db.sqlite") == 0 and process.poll() is None:
            time.sleep(0.1)  # until the first image is recorded: mid-run
        process.send_signal(signal.SIGTERM)
        err = process.communicate(timeout=300)[1]
    finally:
        process.kill()
    assert process.returncode == 143, err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "python -m evaluation run: stopped (SIGTERM); what was recorded stays: the same command again "
        "resumes a run"
    )
    assert main(argv) == 0
    items, stored = outcome(tmp_path)
    assert len(items) == 16 and {r["status"] for r in items} == {"segmented"} and len(stored) == 8
    # A resume given another masking, whose weights this machine lacks, is refused for the
    # masking (what the run may not take), not for the weights: that came first and misled.
    other = [*argv]
    other[other.index("--detector") + 1] = "IDEA-Research/grounding-dino-base"
    capsys.readouterr()
    assert main(other) == 2
    err = capsys.readouterr().err
    assert "the masking given now differs in ['detector']: give the run's own masking to go on" in err
    # ... naming the options that give it (it named only the recorded fields)
    tiny = tiny_paths(tiny_models)
    assert err.strip().endswith(
        f"its options: --detector {tiny['tiny-grounding-dino']} --sam {tiny['tiny-sam']} "
        "--box-threshold 0 --text-threshold 0"
    ), err
    assert "weights" not in err


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_run_that_fills_its_disk_ends_in_one_line_and_resumes_to_the_same_rows(
    tiny_models, tiny_grid_reference, tmp_path, capsys
):
    """A full disk mid-run is said in one line with what to do (it ended in a traceback), and
    the same command after space is freed ends as the run that never met it."""
    # lazy: a run holds its database's lock file open for the life of its process (here pytest's)
    with tmpfs(tmp_path / "disk", "16m", lazy=True) as disk:
        argv = tiny_grid_argv(tiny_paths(tiny_models), disk)
        filler = fill(disk, leave=1_000_000)  # room for the schema and a few images
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == (
            "python -m evaluation run: error: a disk it writes to is full (database or disk is full); "
            "what was recorded stays: free some space beside the database and the data folder, then the "
            "same command again goes on where it stopped"
        )
        assert recorded(disk / "db.sqlite") > 0  # it stopped mid-run
        filler.unlink()
        assert outcome(disk) != outcome(tiny_grid_reference)
        assert main(argv) == 0
        assert outcome(disk) == outcome(tiny_grid_reference)  # nothing lost, nothing twice


def test_every_command_has_help_and_the_module_runs():
    result = subprocess.run(
        [sys.executable, "-m", "evaluation", "--help"],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=True,
    )
    for name in COMMANDS:
        assert name in result.stdout


def _scored_grid(tmp_path):
    """Two models over three scales; m-a paints apples red only at its middle scale 4."""
    import numpy as np
    import sqlite_utils

    import storage
    from evaluation.color.colorspace import srgb_to_lab
    from evaluation.color.palette import nearest_uw71
    from storage import human
    from tests.research_data import one_hot, store_segmented_run

    red, green, yellow = (200, 30, 30), (40, 160, 60), (230, 210, 40)
    db = sqlite_utils.Database(tmp_path / "db.sqlite")
    storage.ensure_schema(db)
    cells = {}
    for cfg in (2.0, 4.0, 6.0):
        cells[("m-a", "apple", "natural", cfg)] = [red, red] if cfg == 4.0 else [green, green]
        cells[("m-b", "apple", "natural", cfg)] = [green, red]
        cells[("m-a", "banana", "natural", cfg)] = [yellow, yellow]
        cells[("m-b", "banana", "natural", cfg)] = [yellow, yellow, green]
    store_segmented_run(db, tmp_path / "data", "grid", cells)
    bin_of = {rgb: int(nearest_uw71(srgb_to_lab(np.array(rgb, dtype=np.uint8)))) for rgb in (red, yellow)}
    truth = {"apple": one_hot(bin_of[red]), "banana": one_hot(bin_of[yellow])}
    human.store_reference(db, "lab", truth, "two concepts rated by our lab")
    return db, truth


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_score_uses_the_leaderboards_scale_and_states_its_intervals(tmp_path, capsys):
    from evaluation.analysis import bootstrap, results
    from evaluation.concepts import load_concepts
    from evaluation.pipeline import runs
    from storage import human

    db, truth = _scored_grid(tmp_path)
    out = tmp_path / "scores"
    argv = ["score", "--reference", "lab", "--out", str(out), *_storage(tmp_path)]
    assert main([*argv, "--resamples", "200", "--seed", "7"]) == 0
    printed = capsys.readouterr().out
    assert "Tables 1-2 at each model's recommended guidance scale (its middle stored one): m-a 4, m-b 4." in (
        printed
    )
    stated = bootstrap.Resampling(n_resamples=200, seed=7).describe()
    assert stated in printed and "Adjacent models:" in printed
    assert "1.000 [1.000, 1.000]" in printed  # m-a's apple and banana at scale 4: PCC 1, no spread
    # the same tables and intervals as the Leaderboards tab computes (results.analyses)
    app = results.analyses(
        runs.model_distributions(db),
        truth,
        load_concepts(),
        resampling=bootstrap.Resampling(n_resamples=200, seed=7),
    )
    written = pd.read_csv(out / "table1.csv")
    expected = app.table1.to_csv_frame().assign(
        source="lab", cfg=4.0, runs="grid", resampled_concepts=2, ci=0.95, n_resamples=200, seed=7
    )
    pd.testing.assert_frame_equal(written, expected, check_dtype=False)
    assert set(pd.read_csv(out / "scores_long.csv")["source"]) == {"lab"}
    # Kept in the store as the app keeps them (outside probe 110: an export after a run and
    # score from the command line had an empty scores table).
    stored = {(r["model"], r["concept"], r["cfg"]) for r in db["scores"].rows_where("source = ?", ["lab"])}
    assert stored == {(r["model"], r["concept"], r["cfg"]) for r in runs.model_distributions(db)}
    pcc = written.set_index(["model", "metric"]).loc[("m-b", "pcc")]
    assert pcc["lo"] < pcc["value"] < pcc["hi"]  # m-b differs between apple and banana
    ranking = pd.read_csv(out / "ranking.csv")
    assert set(ranking[["better", "worse"]].itertuples(index=False, name=None)) == {("m-a", "m-b")}
    assert set(ranking["n_resamples"]) == {200} and set(ranking["seed"]) == {7}

    assert main([*argv, "--cfg", "mean", "--resamples", "0"]) == 0
    printed = capsys.readouterr().out
    assert "Tables 1-2 average each concept over its guidance scales (--cfg mean)." in printed
    assert "No intervals (--resamples 0)." in printed
    pooled = pd.read_csv(out / "table1.csv").set_index(["model", "metric"])
    assert pooled.loc[("m-a", "pcc"), "value"] < 1.0 and "lo" not in pooled.columns
    assert pooled["n_resamples"].isna().all() and pooled["resampled_concepts"].isna().all()
    assert set(pooled["cfg"]) == {"mean"}
    assert "note:" not in printed  # the same source again: nothing to say
    # Another source into the same folder replaces the tables, and says so (it was silent).
    human.store_reference(db, "lab2", truth, "the same two concepts, another lab")
    other = ["score", "--reference", "lab2", "--out", str(out), "--resamples", "0", *_storage(tmp_path)]
    assert main(other) == 0
    assert (
        f"note: {out} held the tables scored against 'lab'; they are replaced by those against 'lab2' "
        "(give another --out to keep both)\n"
    ) in capsys.readouterr().out
    assert set(pd.read_csv(out / "table1.csv")["source"]) == {"lab2"}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--resamples", "5"], "--resamples/--seed: `n_resamples` must be a whole number of at least 10"),
        (["--cfg", "lots"], "--cfg must be 'recommended', 'mean' or a guidance scale, got 'lots'"),
    ],
)
def test_score_refuses_bad_intervals_and_scales_before_reading(tmp_path, capsys, extra, message):
    assert main(["score", *extra, *_storage(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "db.sqlite").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--reference", "nosuch"],
            "--reference must be one of ['designers', 'lab', 'uw71-ratings'], got 'nosuch'",
        ),
        (["--model", "m-c"], "--model 'm-c' has no distribution in any run; stored models: ['m-a', 'm-b']"),
        (
            ["--model", "m-c", "--run", "grid"],
            "--model 'm-c' has no distribution in run 'grid'; stored models: ['m-a', 'm-b']",
        ),
    ],
)
def test_score_names_the_option_and_what_it_may_be(tmp_path, capsys, extra, message):
    """An unknown source was "`source` must be one of", and an unknown model said "run
    `extract` first" (outside probe 88)."""
    _scored_grid(tmp_path)
    argv = ["score", "--reference", "lab", *extra, *_storage(tmp_path)]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().endswith(message)


def test_score_of_an_unknown_run_says_so_alone(tmp_path, capsys):
    """The reference set's paragraph on how to read its scores came first, above the one
    line that said nothing was scored (outside probe 169)."""
    _scored_grid(tmp_path)
    capsys.readouterr()
    assert main(["score", "--run", "nosuch", *_storage(tmp_path)]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err.strip().endswith("no run named 'nosuch'; known runs, newest first: grid")


def test_a_reference_csv_never_writes_over_another_set(tmp_path, capsys):
    """Loaded under the shipped set's label, two rows once replaced its apple and banana, and
    the default source of every table became a mix of two sources."""
    from evaluation.analysis.reference import UW71_RATINGS_SOURCE
    from storage import human, open_db

    _scored_grid(tmp_path)[0].close()
    csv = tmp_path / "ours.csv"
    csv.write_text(",".join(["", *map(str, range(71))]) + "\napple," + ",".join(["1"] + ["0"] * 70) + "\n")
    argv = ["score", "--reference-csv", str(csv), *_storage(tmp_path)]
    assert main([*argv, "--reference", UW71_RATINGS_SOURCE]) == 2
    err = capsys.readouterr().err
    assert f"the reference set '{UW71_RATINGS_SOURCE}' exists already (70 concepts" in err
    assert "store the new set under another label" in err
    db = open_db(tmp_path / "db.sqlite")
    try:
        shipped = human.vectors(db, UW71_RATINGS_SOURCE)
        assert len(shipped) == 70 and shipped["apple"][0] != 1.0  # untouched
        # A new label stores the set; the same set again is no change; another set under it is refused.
        human.store_reference(db, "ours", {"apple": np.eye(71)[0]}, "ours")
        assert human.store_reference(db, "ours", {"apple": np.eye(71)[0]}, "ours") == 1
        with pytest.raises(ValueError, match="the reference set 'ours' exists already"):
            human.store_reference(db, "ours", {"banana": np.eye(71)[1]}, "ours, later")
        assert sorted(human.vectors(db, "ours")) == ["apple"]
    finally:
        db.close()
    # A row the benchmark has no concept for is stored and said never to be compared.
    csv.write_text(csv.read_text() + "robot," + ",".join(["1"] * 70 + ["2"]) + "\n")
    assert main([*argv, "--reference", "ours-plus", "--resamples", "0"]) == 0
    out = capsys.readouterr().out
    assert (
        "stored 2 reference distributions as 'ours-plus'\n1 of them name no concept of the benchmark and are never compared: 'robot'\n"
        in out
    )
    # The same file again changes nothing, and says so (it said "stored").
    assert main([*argv, "--reference", "ours-plus", "--resamples", "0"]) == 0
    assert "the reference set 'ours-plus' holds these 2 distributions already: nothing changed" in (
        capsys.readouterr().out
    )
    csv.write_text(csv.read_text().replace("apple,", "Apple,"))
    assert main([*argv, "--reference", "ours-typo"]) == 2
    assert "ours.csv row 2: no concept is named 'Apple'; write 'apple'" in capsys.readouterr().err


def test_an_out_that_is_a_file_is_refused_as_such_before_a_reference_csv_is_stored(tmp_path, capsys):
    """It said "error: File exists: PATH" (an outside tester read it as an existing folder
    refused), after the CSV given with it had been stored."""
    from storage import human, open_db

    _scored_grid(tmp_path)[0].close()
    csv = tmp_path / "ours.csv"
    csv.write_text(",".join(["", *map(str, range(71))]) + "\napple," + ",".join(["1"] + ["0"] * 70) + "\n")
    afile = tmp_path / "afile"
    afile.write_text("kept\n")
    for out, problem in (
        (afile, "is a plain file, not a folder"),
        (afile / "s", f"lies under the plain file '{afile}'"),
    ):
        argv = ["score", "--reference-csv", str(csv), "--reference", "ours", "--out", str(out)]
        assert main([*argv, *_storage(tmp_path)]) == 2
        assert (
            capsys.readouterr()
            .err.strip()
            .endswith(f"--out '{out}' {problem}; give a folder (new, or one to add to)")
        )
    # The other commands that write a folder refuse it so as well, before their work.
    votes = tmp_path / "votes.csv"
    votes.write_text(
        "pair_id,concept,model_a,model_b,chosen,participant_id,design_background,attention_check,attention_passed\n"
        + "".join(f"p1,apple,a,b,{'ab'[k % 2]},p{k},true,false,\n" for k in range(4))
    )
    for command in (
        ["robustness", *_storage(tmp_path)],
        ["judge-audit", "--judge", "pixel", "--items", "1"],
        ["judgments", str(votes)],  # refused before its analysis (it said "File exists" after it)
    ):
        assert main([*command, "--out", str(afile)]) == 2
        assert (
            capsys.readouterr()
            .err.strip()
            .endswith(f"--out '{afile}' is a plain file, not a folder; give a folder (new, or one to add to)")
        )
    assert afile.read_text() == "kept\n"
    db = open_db(tmp_path / "db.sqlite")
    try:
        assert "ours" not in human.reference_sources(db)
    finally:
        db.close()


@pytest.mark.parametrize("command", ["score", "robustness", "build-tiny", "judge-audit"])
def test_a_negative_seed_is_refused_naming_its_option(tmp_path, capsys, command):
    with pytest.raises(SystemExit) as stopped:
        main([command, "--seed=-1"])
    assert stopped.value.code == 2
    assert "argument --seed: must be a whole number from 0 to 2**63 - 1, got -1" in capsys.readouterr().err


def test_concept_stages_refuse_an_explicit_run_and_bad_registries_name_their_file(tmp_path, capsys):
    from evaluation.explicit.mode import create_explicit_run
    from evaluation.explicit.prompts import build_prompts
    from evaluation.models.registry import load_registry
    from evaluation.pipeline.runs import connect

    db = connect(tmp_path / "db.sqlite")
    prompts = build_prompts(tasks=["color_name"], systems=["iscc-nbs-l1"], size=1, seed=0)[:2]
    create_explicit_run(db, "e1", [load_registry()["tiny-random"]], prompts, samples=1, settings={})
    db.close()
    for command in (["extract"], ["segment"], ["score"]):
        assert main([*command, "--run", "e1", *_storage(tmp_path)]) == 2
        assert "run 'e1' is an explicit-color run; its stages run with `python -m evaluation explicit`" in (
            capsys.readouterr().err
        )
    assert main(["segment", "--run", "e1", "--batch-size", "0", *_storage(tmp_path)]) == 2
    assert "--batch-size must be a whole number, 1 or more, got 0" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("models = [nope")
    assert main([*TINY_RUN, "--registry", str(bad), *_storage(tmp_path)]) == 2
    assert f"registry '{bad}' is not valid TOML: " in capsys.readouterr().err


def test_a_tiny_model_is_built_in_the_data_folders_models(tmp_path, capsys):
    """The help says --data-dir holds models/; the tiny models went to the checkout's data/."""
    assert main([*TINY_RUN, "--samples", "1", "--cfg", "7.5", *_storage(tmp_path)]) == 0
    assert (tmp_path / "data" / "models" / "tiny-random" / "model_index.json").is_file()
    assert "2 image(s) generated; 0 failed" in capsys.readouterr().out  # two styles


def test_the_data_folder_comes_from_the_environment_as_the_database_does(tmp_path, capsys, monkeypatch):
    """The app and `python -m annotation` read both variables; rows here and files elsewhere
    would leave the app unable to find a run's images."""
    monkeypatch.setenv("COLORCONCEPT_DB", str(tmp_path / "db.sqlite"))
    monkeypatch.setenv("COLORCONCEPT_DATA_DIR", str(tmp_path / "data"))
    assert main([*TINY_RUN, "--samples", "1", "--cfg", "7.5", "--styles", "natural"]) == 0
    assert (tmp_path / "data" / "models" / "tiny-random" / "model_index.json").is_file()
    db = open_db(tmp_path / "db.sqlite")
    try:
        [row] = db.query("select image_path from run_items")
    finally:
        db.close()
    assert (tmp_path / "data" / row["image_path"]).is_file()


def _file_hashes(folder) -> dict[str, str]:
    """Each file under `folder` (relative to its parent, POSIX) and its SHA-256."""
    return {
        p.relative_to(folder.parent).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


def _items(db_path) -> dict[int, tuple]:
    db = open_db(db_path)
    try:
        return {
            r["id"]: (r["status"], r["image_path"], r["image_sha256"])
            for r in db.query("select * from run_items")
        }
    finally:
        db.close()


# Two images of the tiny model, its folder copied into the data folder (no build).
SMALL_RUN = [*TINY_RUN, "--samples", "2", "--cfg", "7.5", "--styles", "natural"]


def _small_run(models, root) -> list[str]:
    shutil.copytree(models / "tiny-random", root / "data" / "models" / "tiny-random")
    return ["--db", str(root / "db.sqlite"), "--data-dir", str(root / "data")]


def test_a_moved_data_folder_resumes_with_its_own_tiny_model_and_writes_nothing_at_the_old_place(
    tmp_path, models, capsys
):
    """A run records the folder its tiny model was built in (outside probe 88: a resume after
    moving the data folder built the model again at the old path)."""
    old, new = tmp_path / "old", tmp_path / "new"
    assert main([*SMALL_RUN, *_small_run(models, old)]) == 0
    first = _items(old / "db.sqlite")
    db = open_db(old / "db.sqlite")  # stopped before its last image, as a SIGTERM leaves it
    with db.conn:
        db.execute("update run_items set status = 'pending', image_path = null where id = ?", [max(first)])
    db.close()
    shutil.move(old, new)
    capsys.readouterr()
    # The first command line again: the run recorded no path of the old place (outside probe
    # 91: it recorded the absolute folder, and this was refused as another configuration).
    assert main([*SMALL_RUN, "--db", str(new / "db.sqlite"), "--data-dir", str(new / "data")]) == 0
    assert "1 image(s) generated; 0 failed" in capsys.readouterr().out
    assert not old.exists()
    assert _items(new / "db.sqlite") == first  # the same seed, the same bytes on a CPU
    db = open_db(new / "db.sqlite")
    [config] = [row["config"] for row in db.query("select config from runs")]
    db.close()
    assert '"source": "models/tiny-random"' in config and str(tmp_path) not in config


def test_another_databases_data_folder_is_refused_before_anything_is_stored_or_written(
    tmp_path, models, capsys
):
    """Outside probe 189: a command given another study's data folder (a forgotten --data-dir:
    the default) wrote its run's files there, and that study's next start set them aside as
    unnamed. It is refused as the app's start and `python -m annotation backup` refuse it."""
    from storage import ownership
    from storage.settings import setting_once

    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*SMALL_RUN, *_small_run(models, a)]) == 0
    db = open_db(a / "db.sqlite")  # then an app started on it, and claimed its folder
    instance = ownership.instance_name(setting_once(db, ownership.INSTANCE_SECRET, lambda: "a" * 24))
    db.close()
    ownership.claim(a / "data", a / "db.sqlite", instance)

    def listing():
        return {p: p.read_bytes() for p in sorted((a / "data").rglob("*")) if p.is_file()}

    before = listing()
    capsys.readouterr()
    held = (
        f"the data folder {str(a / 'data')!r} holds the files of another database (instance {instance}, "
        f"last started from {str((a / 'db.sqlite').resolve())!r}), not of {str(b / 'db.sqlite')!r}"
    )
    fix = "give this database's data folder (--data-dir), or that database (--db); nothing was changed"
    assert main([*SMALL_RUN, "--db", str(b / "db.sqlite"), "--data-dir", str(a / "data")]) == 2
    assert capsys.readouterr().err == (
        f"python -m evaluation generate: error: {held} (a new database): `python -m evaluation generate` "
        f"would write this database's files among that study's, where that study's app would set them aside "
        f"as unnamed; {fix}\n"
    )
    assert not b.exists() and listing() == before
    # B's own run, in its own folder: a database no app started, which names its files (of
    # another concept: the same run would name A's files too, the same bytes at the same paths).
    assert main([*(x if x != "apple" else "banana" for x in SMALL_RUN), *_small_run(models, b)]) == 0
    assert main(["extract", "--run", "r", "--db", str(b / "db.sqlite"), "--data-dir", str(b / "data")]) == 0
    b_items = _items(b / "db.sqlite")
    capsys.readouterr()
    for command, does in [
        (
            "extract",
            "would write this database's files among that study's, where that study's app would set "
            "them aside as unnamed",
        ),
        ("score", "would take that study's files for this database's"),
    ]:
        assert main([command, "--run", "r", "--db", str(b / "db.sqlite"), "--data-dir", str(a / "data")]) == 2
        assert capsys.readouterr().err == (
            f"python -m evaluation {command}: error: {held} (a database no app has started): "
            f"`python -m evaluation {command}` {does}; {fix}\n"
        )
    assert listing() == before and _items(b / "db.sqlite") == b_items
    # A folder from before the owner file: its stored files, none named by B.
    (a / "data" / ownership.OWNER_FILE).unlink()
    assert main(["extract", "--run", "r", "--db", str(b / "db.sqlite"), "--data-dir", str(a / "data")]) == 2
    assert re.fullmatch(
        rf"python -m evaluation extract: error: the data folder '{re.escape(str(a / 'data'))}' holds \d+ stored "
        rf"files and '{re.escape(str(b / 'db.sqlite'))}' \(a database no app has started\) names none of them: "
        r"it is another database's folder, and `python -m evaluation extract` would write .*; give this "
        r"database's data folder .*\(if that database is gone for good, move the folder's files away first\)\n",
        capsys.readouterr().err,
    )
    # Each database on its own folder goes on as before.
    assert main(["extract", "--run", "r", "--db", str(a / "db.sqlite"), "--data-dir", str(a / "data")]) == 0


def test_a_lost_run_image_blocks_a_backup_with_the_way_back_and_generate_makes_it_again(
    tmp_path, models, capsys
):
    from annotation import backup

    storage = _small_run(models, tmp_path)
    assert main([*SMALL_RUN, *storage]) == 0
    first = _items(tmp_path / "db.sqlite")
    lost = tmp_path / "data" / first[min(first)][1]
    lost.unlink()
    db = open_db(tmp_path / "db.sqlite")
    with pytest.raises(backup.BackupError) as refusal:
        backup.backup(db, tmp_path / "data", tmp_path / "backup")
    db.close()
    assert str(refusal.value) == (
        f"the database names {first[min(first)][1]!r}, missing from the data folder; nothing was backed up. "
        "An evaluation run makes its lost images, masks and pixel summaries again: `python -m evaluation run "
        f"--run NAME --db {tmp_path / 'db.sqlite'} --data-dir {tmp_path / 'data'}` (`explicit` for an "
        "explicit-color run), for 'r'. Any file can be copied back from an earlier backup's files/ folder, "
        "or from the data folder's orphans/, where a start moves files that no row names (same path under it); "
        "or back up everything else, listing the missing ones: `python -m annotation --db "
        f"{tmp_path / 'db.sqlite'} --data-dir {tmp_path / 'data'} backup --allow-missing DIR`"
    )
    assert not (tmp_path / "backup").exists()
    capsys.readouterr()
    assert main(["generate", "--run", "r", "--device", "cpu", *storage]) == 0
    assert "1 image(s) generated; 0 failed" in capsys.readouterr().out
    assert lost.is_file() and _items(tmp_path / "db.sqlite") == first
    db = open_db(tmp_path / "db.sqlite")
    assert backup.backup(db, tmp_path / "data", tmp_path / "backup").files == 2
    db.close()


def test_a_lost_image_that_comes_out_different_is_refused_in_one_line_and_its_row_is_kept(
    tmp_path, models, capsys
):
    """A GPU need not repeat its bytes: here the recorded hash is another's, as a GPU's would be."""
    storage = _small_run(models, tmp_path)
    assert main([*SMALL_RUN, *storage]) == 0
    db = open_db(tmp_path / "db.sqlite")
    with db.conn:
        db.execute(
            "update run_items set image_sha256 = ? where id = (select min(id) from run_items)", ["0" * 64]
        )
    db.close()
    first = _items(tmp_path / "db.sqlite")
    (tmp_path / "data" / first[min(first)][1]).unlink()
    capsys.readouterr()
    assert main(["generate", "--run", "r", "--device", "cpu", *storage]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            f"error: run 'r': 1 of its 1 lost image(s) came out different from the recorded ones (item(s) "
            f"{min(first)}): what the run made from them came from the lost files; put those back from a backup, "
            "or make the run again under a new name"
        )
    )
    assert _items(tmp_path / "db.sqlite") == first
    # Nor is the image made again left behind: at the recorded path it hid the loss from the
    # next run (14 of them stayed after such a refusal: outside probe 200).
    images = {p.relative_to(tmp_path / "data").as_posix() for p in (tmp_path / "data").rglob("*.png")}
    assert images == {path for _, path, _ in first.values()} - {first[min(first)][1]}
    assert main(["generate", "--run", "r", "--device", "cpu", *storage]) == 2  # still lost, and said


def test_a_lost_mask_and_pixel_summary_are_made_again_by_a_resumed_run(tmp_path, models, capsys):
    storage = _small_run(models, tmp_path)
    for name in ("tiny-grounding-dino", "tiny-sam"):
        shutil.copytree(models / name, tmp_path / "data" / "models" / name)
    assert main(["run", *SMALL_RUN[1:], "--segmenter", "tiny-random", *storage]) == 0
    db = open_db(tmp_path / "db.sqlite")
    rows = [dict(r) for r in db.query("select * from run_items order by id")]
    stored = [dict(r) for r in db.query("select * from model_distributions")]
    db.close()
    assert all(r["status"] == "segmented" and r["summary_path"] for r in rows)
    lost = [tmp_path / "data" / rows[0]["mask_path"], tmp_path / "data" / rows[1]["summary_path"]]
    for path in lost:
        path.unlink()
    capsys.readouterr()
    assert main(["run", "--run", "r", "--device", "cpu", *storage]) == 0  # masked as the run was
    assert all(path.is_file() for path in lost)
    db = open_db(tmp_path / "db.sqlite")
    assert [dict(r) for r in db.query("select * from run_items order by id")] == rows
    assert [dict(r) for r in db.query("select * from model_distributions")] == stored
    db.close()
    # `segment --run` alone masks as the run was masked, too (it took the paper's masker).
    lost[0].unlink()
    assert main(["segment", "--run", "r", "--device", "cpu", *storage]) == 0
    assert lost[0].is_file() and "1 image(s) segmented" in capsys.readouterr().out
    # A lost mask that comes out different is refused and removed; the pixel summary, which
    # was not lost, stays (the removal of strays took it too: outside probe 201).
    db = open_db(tmp_path / "db.sqlite")
    with db.conn:
        db.execute("update run_items set mask_sha256 = ? where id = ?", ["b" * 64, rows[0]["id"]])
    db.close()
    before = _file_hashes(tmp_path / "data" / "runs")
    lost[0].unlink()
    assert main(["segment", "--run", "r", "--device", "cpu", *storage]) == 2
    assert "1 of its 1 lost mask(s) or pixel summary(ies) came out different" in capsys.readouterr().err
    assert _file_hashes(tmp_path / "data" / "runs") == {
        path: digest for path, digest in before.items() if path != rows[0]["mask_path"]
    }
