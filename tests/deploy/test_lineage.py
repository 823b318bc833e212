"""Protects the audit trail: `hrbench verify` names any edited file, `hrbench lineage` shows the chain."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance
from typer.testing import CliRunner

from hrbench.cli import app
from pipelines.materialize import run_study
from hrbench.catalogue import table_key
from hrbench.lineage import stored_sha256
from hrbench.storage import store_for
from tests.conftest import copy_output, store_table, stored_keys, stored_table
from tests.deploy.conftest import DEPLOY, write_study


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, DagsterInstance]:
    root = tmp_path_factory.mktemp("lineage")
    study = write_study(root, ["steady", "rotting"])
    instance = DagsterInstance.ephemeral()
    run_study(study, root / "out", instance=instance, progress=False)
    return root / "out", instance


@pytest.fixture
def copy(finished, tmp_path: Path) -> Path:
    target = tmp_path / "out"
    copy_output(finished[0], target, ignore=shutil.ignore_patterns(".dagster", "cache"))
    return target


def _cli(*args: str):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_verify_passes_on_a_fresh_output(finished):
    code, output = _cli("verify", str(finished[0]))
    assert code == 0, output
    assert "every hash matches" in output and "trial rows matched to the journal" in output


def test_verify_names_an_edited_trial_table(copy: Path):
    key = "tables/baseline/natural_trials/rotting/tiny-chain.parquet"
    table = stored_table(copy, key)
    table.loc[0, "passed"] = not table.loc[0, "passed"]  # a reviewer's nightmare: one outcome flipped
    store_table(copy, key, table)
    code, output = _cli("verify", str(copy))
    assert code == 1
    assert "MISMATCH tables/baseline/natural_trials/rotting/tiny-chain.parquet" in output and "changed after" in output


def test_verify_catches_a_table_edited_together_with_its_lineage_record(copy: Path):
    key = "tables/checkpoint_trials/steady/tiny-chain.parquet"
    table = stored_table(copy, key)
    table["passed"] = ~table["passed"]  # every outcome flipped
    store_table(copy, key, table)
    record = "lineage/checkpoint_trials/steady/tiny-chain.json"
    body = json.loads(store_for(copy).get(record))
    body["sha256"] = stored_sha256(copy, key)  # covering the tracks
    store_for(copy).put(record, json.dumps(body).encode())
    code, output = _cli("verify", str(copy))
    assert code == 1
    assert "MISMATCH tables/checkpoint_trials/steady/tiny-chain.parquet" in output and "in the journal" in output


def test_verify_names_an_edited_preregistration(copy: Path):
    store = store_for(copy)  # the stored copy (the output directory itself, or the bucket)
    body = json.loads(store.get("preregistration.json"))
    body["study"]["trials"]["natural"] = 1000
    store.put("preregistration.json", json.dumps(body).encode())
    code, output = _cli("verify", str(copy))
    assert code == 1 and "MISMATCH preregistration.json" in output and "edited after it was frozen" in output


def test_verify_names_an_edited_agent_registration(copy: Path):
    store = store_for(copy)
    body = json.loads(store.get("registrations/steady.json"))
    body["config"]["sim"]["skill"] = 0.99
    store.put("registrations/steady.json", json.dumps(body).encode())
    code, output = _cli("verify", str(copy))
    assert code == 1 and "MISMATCH registrations/steady.json" in output


def test_lineage_shows_the_chain_expected_before_observed(finished):
    out = finished[0]
    code, output = _cli("lineage", str(out))
    assert code == 0, output
    prereg = json.loads((out / "preregistration.json").read_text())
    assert prereg["prereg_sha256"] in output and prereg["code"]["source_sha256"][:12] in output
    for agent in ("steady", "rotting"):
        registration = json.loads((out / "registrations" / f"{agent}.json").read_text())
        assert f"agent {agent}  registration {registration['agent_sha256'][:12]}" in output
    assert output.count("expected before observed") == 2 and "ORDER NOT SHOWN" not in output
    assert "tiny-chain:" in output and "Γ=" in output
    # the report's inputs, the four it reads from the stores among them (issue 22)
    report = output[output.index("report report.html, summary.json"):]
    for table in ("baseline/natural_trials", "baseline/stage_estimates", "baseline/observed_success",
                  "baseline/horizon_residuals", "sensitivity_sweep", "resource_accounting"):
        assert re.search(rf"^  {table} +\d+ tables, \d+ rows, last written ", report, re.MULTILINE), (table, report)


def test_materializations_carry_hashes_run_ids_relative_paths_and_input_versions(finished):
    out, instance = finished
    record = instance.fetch_materializations(AssetKey(DEPLOY.asset_key("baseline/horizon_residuals")), limit=1).records[0]
    meta = {k: getattr(v, "value", v) for k, v in record.asset_materialization.metadata.items()}
    assert meta["prereg_sha256"] == json.loads((out / "preregistration.json").read_text())["prereg_sha256"]
    agent = record.asset_materialization.partition
    assert meta["agent_sha256"] == json.loads((out / "registrations" / f"{agent}.json").read_text())["agent_sha256"]
    assert meta["run_id"] == record.run_id and not Path(meta["path"]).is_absolute()
    assert meta["path"] == f"tables/baseline/horizon_residuals/{agent}.parquet"
    assert set(meta) >= {"input/checkpoint_trials", "input/baseline/natural_trials", "input/baseline/expected_success",
                         "residuals", "forest_plot", "rows"}
    assert "| agent | condition |" in meta["residuals"] and "data:image/png;base64," in meta["forest_plot"]
    tags = record.asset_materialization.tags or {}
    assert tags.get("dagster/code_version") == meta["code_version"]


def test_a_finished_study_run_again_launches_nothing_and_changes_nothing(finished, tmp_path: Path):
    out, instance = finished
    study = Path(json.loads((out / "study_source.json").read_text())["study_file"])
    before = len(instance.get_runs())
    tables = {k: stored_sha256(out, k) for k in stored_keys(out, "tables")}
    run_study(study, out, instance=instance, progress=False)
    assert len(instance.get_runs()) == before  # every step's tables are intact under this protocol
    assert {k: stored_sha256(out, k) for k in stored_keys(out, "tables")} == tables


def test_blocking_check_refuses_a_table_whose_hashes_match_no_registration(copy: Path):
    from pipelines.builder import build_definitions
    from assets.checks import REGISTERED, registration_problems

    assert registration_problems(copy, "baseline/horizon_residuals", ["steady", "rotting"]) == []
    key = "tables/baseline/horizon_residuals/steady.parquet"
    table = stored_table(copy, key)
    table["agent_sha256"] = "0" * 64  # a table from some other registration of "steady"
    store_table(copy, key, table)
    assert registration_problems(copy, "baseline/horizon_residuals", ["steady", "rotting"]) == [
        f"steady: agent_sha256 is not the stored registration "
        f"{json.loads((copy / 'registrations' / 'steady.json').read_text())['agent_sha256'][:12]}"]
    prereg = "tables/baseline/natural_trials/rotting/tiny-chain.parquet"
    table = stored_table(copy, prereg)
    table["prereg_sha256"] = "f" * 64
    store_table(copy, prereg, table)
    assert "is not the stored pre-registration" in registration_problems(copy, "baseline/natural_trials", ["rotting|tiny-chain"])[0]
    study = Path(json.loads((copy / "study_source.json").read_text())["study_file"])
    specs = [spec for c in build_definitions(study, copy).asset_checks for spec in c.check_specs
             if spec.name == REGISTERED]
    assert {table_key(s.asset_key.path) for s in specs} == {
        "checkpoint_trials", *(f"baseline/{n}" for n in ("natural_trials", "stage_estimates", "expected_success",
                                                         "observed_success", "horizon_residuals"))}
    assert all(s.blocking for s in specs)
