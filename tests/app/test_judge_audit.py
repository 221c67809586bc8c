"""The Judge audit research view through gradio_client, on a real app server."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import app
from app import judge_audit
from evaluation.color.naming import BASIC_TERMS
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
        with pytest.raises(Exception, match="`items` must lie in 1-2000"):
            client.predict(tokens["researcher"], "pixel", 0, 1, api_name="/judge_audit_run")
        with pytest.raises(Exception, match="judge 'clip:x' must start with one of"):
            client.predict(tokens["researcher"], "clip:x", 5, 1, api_name="/judge_audit_run")
        with pytest.raises(Exception, match="(?i)permission|role"):
            client.predict(tokens["designer"], "pixel", 5, 1, api_name="/judge_audit_run")
    frame = pd.DataFrame(table["data"], columns=table["headers"])
    assert list(frame["judge"].unique()) == ["pixel", "random"]
    rows = frame.set_index(["judge", "split"])
    assert rows.loc[("pixel", "all"), "pairwise_accuracy"] >= 0.95
    assert rows.loc[("random", "all"), "chance"] == 0.25
    heat = figure(heatmap).data[0]
    assert list(heat.x) == list(BASIC_TERMS) and "pixel" in figure(heatmap).layout.title.text
    names = sorted(Path(f).name for f in files)
    assert names == ["failures-pixel.csv", "failures-random.csv", "pairs.csv", "report.html", "summary.csv"]
    written = list((config.data_dir / "exports" / "judge-audit").glob("*/summary.csv"))
    assert len(written) == 1
    np.testing.assert_allclose(pd.read_csv(written[0])["pairs"], frame["pairs"])
