"""The Judge audit research view through gradio_client, on a real app server."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import app
from app import judge_audit
from evaluation.color.naming import BASIC_TERMS
from evaluation.models.tiny import build_tiny_clip, one_cpu_thread
from tests.app_server import ADMIN_PASSWORD, make_config, running_app
from tests.research_data import figure, sign_in


def test_a_researcher_audits_judges_and_gets_the_table_heatmap_and_files(tmp_path):
    assert judge_audit in app.TAB_MODULES
    config = make_config(tmp_path)
    with running_app(config) as (client, _):
        tokens = sign_in(client, ADMIN_PASSWORD, "researcher", "designer")
        table, heatmap, files = client.predict(
            tokens["researcher"], "pixel\n\nrandom\n", 30, 1, api_name="/judge_audit_run"
        )
        # The field named as the page names it (outside probe 220 read "`specs` is empty")
        with pytest.raises(Exception, match="^`Judges` is empty: name at least one judge, one per line"):
            client.predict(tokens["researcher"], " \n ", 5, 1, api_name="/judge_audit_run")
        with pytest.raises(Exception, match=r"^`Judges` lists 'random' more than once: list each judge once"):
            client.predict(tokens["researcher"], "random\npixel\nrandom", 5, 1, api_name="/judge_audit_run")
        with pytest.raises(Exception, match="`items` must be a whole number from 1 to 2,000, got 0"):
            client.predict(tokens["researcher"], "pixel", 0, 1, api_name="/judge_audit_run")
        with pytest.raises(Exception, match="judge 'clip:x' must start with one of"):
            client.predict(tokens["researcher"], "clip:x", 5, 1, api_name="/judge_audit_run")
        with pytest.raises(Exception, match="(?i)permission|role"):
            client.predict(tokens["designer"], "pixel", 5, 1, api_name="/judge_audit_run")
        # The app loads a judge from the models folder or the hub cache alone: another path on
        # the server is refused before anything opens it, and so is a model not on the machine.
        for judge, problem in (
            ("contrastive:../../etc", "not from another path on the server"),
            ("yesno:/etc/passwd", "not from another path on the server"),
            ("contrastive:tests", "not from another path on the server"),
            (
                "contrastive:openai/clip-vit-base-patch32",
                r"not on this machine: download it .*hf download",
            ),
        ):
            with pytest.raises(
                Exception, match=rf"^judge model '{judge.split(':')[1]}'(:| is) .*{problem}"
            ) as refused:
                client.predict(tokens["researcher"], f"pixel\n{judge}", 5, 1, api_name="/judge_audit_run")
            assert str(config.data_dir) not in str(refused.value)  # no server path on the page
        with one_cpu_thread():
            build_tiny_clip(config.data_dir / "models" / "tiny-clip")
        clip = client.predict(
            tokens["researcher"], "contrastive:tiny-clip", 5, 1, api_name="/judge_audit_run"
        )[0]
        assert {row[0] for row in clip["data"]} == {"contrastive:tiny-clip"}
        # In the models folder, but not a judge there: each refusal says why, not "download it".
        models = config.data_dir / "models"
        (models / "a-pipeline").mkdir()
        (models / "a-pipeline" / "model_index.json").write_text("{}")
        outside = tmp_path / "outside-clip"
        (models / "tiny-clip").rename(outside)
        (models / "linked").symlink_to(outside)
        outside.rename(models / "tiny-clip")
        for judge, problem in (
            (
                "yesno:tiny-clip",
                r"judge 'yesno:tiny-clip': the model 'tiny-clip' is a 'clip' model, not an image-text-to-text",
            ),
            (
                "contrastive:a-pipeline",
                r"judge model 'a-pipeline': the folder models/a-pipeline holds no transformers model",
            ),
            (
                "contrastive:linked",
                r"judge model 'linked': models/linked is a link that leads out of the data folder's models/",
            ),
            (f"contrastive:{models / 'tiny-clip'}", "judge model '/.*not from another path on the server"),
            (
                "contrastive:tiny-clip/../tiny-clip",
                "judge model 'tiny-clip/../tiny-clip'.*not from another path",
            ),
        ):
            with pytest.raises(Exception, match=f"^{problem}") as refused:
                client.predict(tokens["researcher"], f"pixel\n{judge}", 5, 1, api_name="/judge_audit_run")
            assert (
                "download" not in str(refused.value)
                and str(config.data_dir) not in str(refused.value).split("'")[3:]
            )
    frame = pd.DataFrame(table["data"], columns=table["headers"])
    assert list(frame["judge"].unique()) == ["pixel", "random"]
    rows = frame.set_index(["judge", "split"])
    assert rows.loc[("pixel", "all"), "pairwise_accuracy"] >= 0.95
    assert rows.loc[("random", "all"), "chance"] == 0.25
    # The heatmap shows the first judge other than the pixel reference, whose map is all
    # zeros (outside probe 220: with pixel listed first it never showed a model's failures).
    heat = figure(heatmap).data[0]
    assert list(heat.x) == list(BASIC_TERMS) and figure(heatmap).layout.title.text.startswith("random:")
    assert np.nanmax(np.asarray(heat.z, dtype=float)) > 0
    names = sorted(Path(f).name for f in files)
    assert names == ["failures-pixel.csv", "failures-random.csv", "pairs.csv", "report.html", "summary.csv"]
    written = [pd.read_csv(p) for p in (config.data_dir / "exports" / "judge-audit").glob("*/summary.csv")]
    assert len(written) == 2  # the refused audits wrote nothing
    [first] = [w for w in written if "pixel" in set(w["judge"])]
    np.testing.assert_allclose(first["pairs"], frame["pairs"])
