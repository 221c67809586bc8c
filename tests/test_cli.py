"""The command line ``python -m evaluation``, end to end on tiny models (CPU, offline)."""

import subprocess
import sys

import pandas as pd
import pytest

from evaluation.__main__ import COMMANDS, main
from evaluation.color.naming import names_of_uw71
from evaluation.models.registry import PROJECT_ROOT

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    assert main(["build-tiny", "--models-dir", str(root)]) == 0
    return root


def _storage(tmp_path):
    return ["--db", str(tmp_path / "db.sqlite"), "--data-dir", str(tmp_path / "data")]


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
    assert main(["extract", "--run", "r", *_storage(tmp_path)]) == 0
    assert "8 distribution(s) written for run 'r'" in capsys.readouterr().out

    out_dir = tmp_path / "scores"
    assert main(["score", "--run", "r", "--out", str(out_dir), *_storage(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert (
        "8 distribution(s) scored against 'uw71-ratings' (2 concept(s) with a human distribution)" in printed
    )
    assert (
        "Table 1: probabilistic distribution alignment" in printed
        and "Table 2: deterministic feature alignment" in printed
    )
    header = [line.split() for line in printed.splitlines() if line.startswith(("type", "style", "metric"))]
    assert header[0] == ["type", "Original", "Visual", "state", "Emotional"]
    assert header[1] == ["style"] + ["Natural", "Clipart"] * 3
    assert (
        header[2] == ["metric"] + ["PCC", "EMD", "ED"] * 6 and header[5] == ["metric"] + ["DCA", "ΔHue"] * 6
    )
    long = pd.read_csv(out_dir / "scores_long.csv")
    assert len(long) == 8 and set(long["concept"]) == {"apple", "banana"}
    names = names_of_uw71().set_index("color_index")
    for column in ("dominant_human", "dominant_model"):  # each bin followed by its names
        at = list(long.columns).index(column)
        assert list(long.columns[at + 1 : at + 3]) == [f"{column}_name", f"{column}_basic"]
        assert list(long[f"{column}_basic"]) == list(names.loc[long[column], "basic_term"])
    table1 = pd.read_csv(out_dir / "table1.csv", header=[0, 1, 2], index_col=0)
    assert list(table1.index) == ["tiny-random"]
    assert pd.read_csv(out_dir / "exclusions.csv").to_dict("records") == [
        {"model": "tiny-random", "n_segmented": 16, "n_ok": 16, "n_no_detection": 0, "n_empty_mask": 0}
    ]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
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
        (
            ["generate", "--run", "r", "--model", "tiny-random", "--concepts", "unicorn"],
            "--concepts names unknown concepts ['unicorn']",
        ),
        (
            ["generate", "--run", "r", "--model", "tiny-random", "--styles", "oil"],
            "--styles must be a comma-separated subset",
        ),
        (["generate", "--run", "r"], "no run named 'r'; known runs: []"),
        (["score", "--run", "r"], "no model distributions stored for run='r'"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, argv, message):
    assert main([*argv, *_storage(tmp_path)]) == 2
    assert message in capsys.readouterr().err


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
