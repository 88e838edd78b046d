"""mvp_mlflow against an HTTP server on 127.0.0.1 answering MLflow's REST routes (tests/unit/plugins/mlflow_fake.py):
one experiment per workload, one run per run name continued by its restarted attempts, artifacts through the
server's proxy, the verdict on an ended job's run, the auth headers of MLflow's own client."""
import base64
import json

import pytest
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_mlflow import (
    MlflowClient, MlflowHttpError, MlflowUnreachable, auth_headers, credentials_headers, job_run, metric_key,
    metrics_batches, record_verdict, ui_url)

from mlflow_fake import FakeMlflow
from ray_dashboard_fake import served


@pytest.fixture
def tracking():
    """A FakeMlflow served over HTTP; yields (fake, client)."""
    fake = FakeMlflow()
    with served(fake) as address:
        yield fake, MlflowClient(address, headers={})


def test_a_first_attempt_makes_the_workloads_experiment_and_a_run_named_after_it(tracking):
    fake, client = tracking
    run = job_run(client, "sft", "sft-1", "sft-1", {"mvp.code_id": "verl-0.9.1", "mvp.model": None},
                  {"resolved_config.yaml": "trainer:\n  total_epochs: 1\n"})
    assert run["experiment_id"] == fake.experiments["sft"] and run["run_name"] == "sft-1"
    assert run["continued"] is False and run["submission_ids"] == ["sft-1"]
    tags = fake.tags(run["run_id"])
    assert tags["mvp.code_id"] == "verl-0.9.1" and "mvp.model" not in tags
    assert tags["mvp.submission_ids"] == "sft-1" and tags["mvp.attempt"] == "sft-1"
    key = "%s/%s/artifacts/sft-1/resolved_config.yaml" % (run["experiment_id"], run["run_id"])
    assert fake.artifacts == {key: "trainer:\n  total_epochs: 1\n"}


def test_a_restarted_attempt_continues_the_run_through_a_child_run_and_extends_the_chain(tracking):
    fake, client = tracking
    first = job_run(client, "sft", "sft-1", "sft-1")
    assert first["attempt_run_id"] == first["run_id"]
    fake.runs[first["run_id"]]["info"]["status"] = "FAILED"
    second = job_run(client, "sft", "sft-1", "sft-1-r1")
    assert second["run_id"] == first["run_id"] and second["continued"] is True
    assert second["submission_ids"] == ["sft-1", "sft-1-r1"]
    assert fake.tags(first["run_id"])["mvp.submission_ids"] == "sft-1,sft-1-r1"
    assert fake.runs[first["run_id"]]["info"]["status"] == "RUNNING"
    # verl logs its (changed) config as params where it logs: a child of the run, named after the attempt.
    child = fake.runs[second["attempt_run_id"]]
    assert second["attempt_run_id"] != first["run_id"] and child["info"]["run_name"] == "sft-1-r1"
    assert fake.tags(second["attempt_run_id"])["mlflow.parentRunId"] == first["run_id"]
    assert list(fake.experiments) == ["Default", "sft"]


def test_a_restarted_attempts_steps_after_its_checkpoint_join_the_runs_curve(tracking, tmp_path):
    fake, client = tracking
    job_run(client, "sft", "sft-1", "sft-1")
    second = job_run(client, "sft", "sft-1", "sft-1-r1")
    record = tmp_path / "mlflow_run.json"
    record.write_text(json.dumps(dict(second, tracking_uri=client.address)))
    rows = [{"step": step, "data": {"train/loss": 6.0 - step / 2, "train/total_tokens(B)": step * 1e-6,
                                    "note": "text", "bad": float("nan")}} for step in range(3, 9)]
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    done = record_verdict(str(record), {"verdict": "trained", "summary": "trained 8 of 8 steps"}, str(metrics),
                          after_step=4)
    copied = fake.metrics[second["run_id"]]
    expected = [(r["step"], "train/loss", r["data"]["train/loss"]) for r in rows if r["step"] > 4]
    assert sorted((m["step"], m["key"], m["value"]) for m in copied if m["key"] == "train/loss") == expected
    assert {m["key"] for m in copied} == {"train/loss", "train/total_tokens_B_"}
    assert done.startswith("tagged %s (copied %d values" % (second["run_id"], len(copied)))
    for run_id in (second["run_id"], second["attempt_run_id"]):
        assert fake.runs[run_id]["info"]["status"] == "FINISHED" and fake.tags(run_id)["mvp.verdict"] == "trained"


def test_metrics_are_sent_in_batches_of_at_most_a_thousand(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps({"step": s, "data": {"k%d" % i: i for i in range(30)}})
                                 for s in range(1, 101)))
    batches = metrics_batches(str(metrics))
    assert [len(b) for b in batches] == [1000, 1000, 1000] and batches[0][0]["step"] == 1


@pytest.mark.parametrize("name, key", [("train/loss", "train/loss"), ("train/total_tokens(B)", "train/total_tokens_B_"),
                                       ("a//b", "a/b"), ("val-core/acc@1", "val-core/acc_at_1"),
                                       ("timing:gen s", "timing:gen s")])
def test_metric_names_take_the_form_verl_gives_them_in_mlflow(name, key):
    assert metric_key(name) == key


def test_two_runs_of_one_workload_share_its_experiment(tracking):
    fake, client = tracking
    one, two = job_run(client, "grpo", "g-1", "g-1"), job_run(client, "grpo", "g-2", "g-2")
    assert one["experiment_id"] == two["experiment_id"] and one["run_id"] != two["run_id"]


def test_the_verdict_of_an_ended_job_goes_on_its_run(tracking, tmp_path):
    fake, client = tracking
    run = job_run(client, "sft", "sft-1", "sft-1")
    record = tmp_path / "mlflow_run.json"
    record.write_text(json.dumps(dict(run, tracking_uri=client.address)))
    assert record_verdict(str(record), {"verdict": "failed", "cause": "node_lost", "summary": "lost 10.0.0.3"}) \
        == "tagged %s" % run["run_id"]
    assert fake.runs[run["run_id"]]["info"]["status"] == "FAILED"
    assert fake.tags(run["run_id"])["mvp.cause"] == "node_lost"
    record_verdict(str(record), {"verdict": "trained", "cause": None, "summary": "trained 8 of 8 steps"})
    assert fake.runs[run["run_id"]]["info"]["status"] == "FINISHED"


def test_a_running_job_or_an_untracked_one_is_left_alone(tracking, tmp_path):
    fake, client = tracking
    run = job_run(client, "sft", "sft-1", "sft-1")
    record = tmp_path / "mlflow_run.json"
    record.write_text(json.dumps(dict(run, tracking_uri=client.address)))
    calls = len(fake.calls)
    assert record_verdict(str(record), {"verdict": "running"}).endswith("left as it is")
    assert record_verdict(str(tmp_path / "missing.json"), {"verdict": "trained"}) == ""
    assert len(fake.calls) == calls


def test_a_server_that_does_not_answer_is_named(tmp_path):
    client = MlflowClient("http://127.0.0.1:9", headers={}, timeout=2)
    assert client.healthy() is False
    with pytest.raises(MlflowUnreachable, match="127.0.0.1:9"):
        job_run(client, "sft", "sft-1", "sft-1")


def test_an_http_error_keeps_mlflows_error_code(tracking):
    _fake, client = tracking
    with pytest.raises(MlflowHttpError) as caught:
        client.call("GET", "/api/2.0/mlflow/no-such-route")
    assert caught.value.status == 404 and caught.value.error_code == "ENDPOINT_NOT_FOUND"


def test_an_artifact_uri_the_server_does_not_proxy_is_refused(tracking):
    _fake, client = tracking
    with pytest.raises(ValueError, match="artifacts-destination"):
        client.upload_text("file:///tmp/mlruns/0/abc/artifacts", "a.txt", "x")


@pytest.mark.parametrize("env, expected", [
    ({}, {}),
    ({"MLFLOW_TRACKING_TOKEN": "t0k"}, {"Authorization": "Bearer t0k"}),
    ({"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": "pw"},
     {"Authorization": "Basic " + base64.b64encode(b"admin:pw").decode("ascii")}),
    ({"MLFLOW_TRACKING_USERNAME": "admin"}, {}),
])
def test_auth_headers_follow_mlflows_client_variables(env, expected):
    assert auth_headers(env) == expected


def test_the_ui_links_use_the_uis_own_routes():
    assert ui_url("http://10.0.0.5:5000/", "3", "abc") == "http://10.0.0.5:5000/#/experiments/3/runs/abc"
    assert ui_url("http://10.0.0.5:5000", "3") == "http://10.0.0.5:5000/#/experiments/3"


def test_the_heads_modules_take_the_credentials_from_the_servers_auth_config(tmp_path):
    config = tmp_path / "mlflow_auth.ini"
    config.write_text("[mlflow]\ndefault_permission = READ\nadmin_username = mvp\nadmin_password = p%w=1\n")
    assert credentials_headers(str(config)) == {
        "Authorization": "Basic " + base64.b64encode(b"mvp:p%w=1").decode("ascii")}
    assert credentials_headers("") == {} and credentials_headers(str(tmp_path / "missing.ini")) == {}
    config.write_text("[mlflow]\nadmin_username = mvp\n")
    assert credentials_headers(str(config)) == {}


LEDGER = {"version": 1, "run": "sft-1", "state": "ended", "owner": "alice", "team": "nlp", "project": None,
          "computed_at": 1795909710.0, "gpu_seconds_held": 7200.0, "goodput": 0.75,
          "buckets": {"startup": 900.0, "productive": 5400.0, "recomputed": 900.0, "unaccounted": 0.0}}


def test_the_ledger_goes_on_the_run_once_as_tags_and_gpu_hour_metrics(tracking):
    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_mlflow import log_ledger
    fake, client = tracking
    run = job_run(client, "sft", "sft-1", "sft-1")
    settings = dict(run, tracking_uri=client.address)
    done = log_ledger(settings, [run["run_id"]], LEDGER)
    tags = fake.tags(run["run_id"])
    assert (tags["mvp.owner"], tags["mvp.team"]) == ("alice", "nlp") and "mvp.project" not in tags
    logged = {m["key"]: m["value"] for m in fake.metrics[run["run_id"]]}
    expected = {"ledger/gpu_hours_held": LEDGER["gpu_seconds_held"] / 3600, "ledger/goodput": LEDGER["goodput"]}
    expected.update(("ledger/%s_gpu_hours" % k, v / 3600) for k, v in LEDGER["buckets"].items())
    assert logged == pytest.approx(expected)
    assert done == "ledger on %s: tags, %d metrics" % (run["run_id"], len(expected))
    assert {m["timestamp"] for m in fake.metrics[run["run_id"]]} == {int(LEDGER["computed_at"] * 1000)}
    # Again with the same ledger (the record step, then the controller's final ledger): nothing logged twice.
    assert log_ledger(settings, [run["run_id"]], LEDGER).endswith(": tags, 0 metrics")
    assert len(fake.metrics[run["run_id"]]) == len(expected)


def test_a_running_runs_ledger_sets_only_the_tags(tracking):
    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_mlflow import log_ledger
    fake, client = tracking
    run = job_run(client, "sft", "sft-1", "sft-1")
    done = log_ledger(dict(run, tracking_uri=client.address), [run["run_id"]], dict(LEDGER, state="running"))
    assert fake.tags(run["run_id"])["mvp.owner"] == "alice" and not fake.metrics.get(run["run_id"])
    assert "none before the run ended" in done
    assert log_ledger({}, [run["run_id"]], LEDGER) == ""
