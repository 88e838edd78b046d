"""mvp_submit_check.look (the look of ray_job's ``check``) against a fake of Ray's dashboard (Jobs REST API, State
API) over HTTP: the paths that are missing, whether the job directory exists, the status of a job Ray already has
with the id, the ALIVE nodes, the parquet columns of the datasets and the room for the checkpoints; it
changes nothing and raises (SubmitCheckError, keeping what it found) only when Ray cannot be read.
"""
import pytest

from ansible_collections.mvp.ray.plugins.module_utils.cluster import mvp_ray
from ansible_collections.mvp.ray.plugins.module_utils.request import mvp_submit_check

ADDRESS = "http://127.0.0.1:8265"


def look(tmp_path, auth_token=None, **options):
    """Run the look for submission job-1 (job directory under ``tmp_path``) with the options ray_job passes."""
    options = dict({"submission_id": "job-1", "job_dir": str(tmp_path / "jobs" / "job-1"), "paths": {},
                    "resource": "worker_node"}, **options)
    client, state = mvp_ray.clients(ADDRESS, auth_token)
    return mvp_submit_check.look(options, client, state, ADDRESS)


def test_missing_paths_are_named_and_empty_ones_skipped(fake_ray, tmp_path):
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")  # a link counts, where it points does not
    paths = {"model": str(tmp_path / "models" / "m"), "train_files": str(tmp_path / "datasets" / "train.parquet"),
             "reward_fn_path": "", "marker": str(tmp_path / "link")}

    result = look(tmp_path, paths=paths)

    assert result["missing"] == {"train_files": paths["train_files"]}
    assert result["job_dir_exists"] is False and not (tmp_path / "jobs").exists()


def test_an_existing_job_dir_is_reported(fake_ray, tmp_path):
    (tmp_path / "jobs" / "job-1").mkdir(parents=True)

    assert look(tmp_path)["job_dir_exists"] is True


@pytest.mark.parametrize("status", [None, "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"])
def test_a_job_ray_has_with_the_id_is_named_with_its_status(fake_ray, tmp_path, status):
    if status:
        fake_ray.add_job("job-1", status)
    fake_ray.add_job("job-2", "RUNNING")

    result = look(tmp_path, auth_token="s3cret")

    assert result["existing_job"] == status
    assert fake_ray.clients and {auth for _path, auth in fake_ray.clients} == {"Bearer s3cret"}
    assert fake_ray.calls == []  # nothing submitted, stopped or deleted


def test_the_summary_counts_alive_workers_and_gpus(fake_ray, tmp_path, cluster_nodes):
    alive = [n for n in cluster_nodes if n["state"] == "ALIVE"]
    workers = [n for n in alive if n["resources_total"].get("worker_node", 0) > 0]

    summary = look(tmp_path)["summary"]

    assert summary["worker_ips"] == sorted(n["node_ip"] for n in workers)
    assert [n["node_id"] for n in summary["alive_workers"]] == [n["node_id"] for n in workers]
    assert summary["head"]["node_ip"] == [n for n in alive if n["is_head_node"]][0]["node_ip"]
    assert summary["total_gpus"] == sum(n["resources_total"].get("GPU", 0) for n in alive)


def test_the_offers_and_the_cluster_totals_are_the_alive_nodes_schedulable_resources(fake_ray, tmp_path, cluster_nodes):
    # Issue 51: what the placement groups verl asks for are compared with (mvp_refuse.placement_request_problem),
    # and what Ray's cluster_resources() answers the snapshot's code on the head
    alive = [n for n in cluster_nodes if n["state"] == "ALIVE"]

    offers = look(tmp_path)["offers"]

    assert offers == {n["node_ip"]: {k: v for k, v in n["resources_total"].items() if not k.startswith("node:")
                                     and k not in ("memory", "object_store_memory")} for n in alive}
    totals = mvp_submit_check.cluster_totals(cluster_nodes)
    assert totals["CPU"] == sum(n["resources_total"].get("CPU", 0) for n in alive)
    assert totals["GPU"] == sum(n["resources_total"].get("GPU", 0) for n in alive)


def test_unreadable_nodes_fail_naming_the_address_and_keep_what_was_found(fake_ray, tmp_path):
    fake_ray.state_error = "dashboard down"
    paths = {"model": str(tmp_path / "absent")}

    with pytest.raises(mvp_submit_check.SubmitCheckError) as error:
        look(tmp_path, paths=paths)

    assert str(error.value).startswith("Cannot list Ray nodes at %s: " % ADDRESS)
    assert str(error.value).endswith("%s. Is the cluster up (site.yml)?" % fake_ray.state_error)
    assert error.value.result["missing"] == paths


def test_a_job_table_error_other_than_an_unknown_id_fails(fake_ray, tmp_path):
    fake_ray.info_error = "Internal Server Error"

    with pytest.raises(mvp_submit_check.SubmitCheckError) as error:
        look(tmp_path)

    assert str(error.value) == "Cannot read Ray job job-1 at %s: Request failed with status code 500: %s." % (
        ADDRESS, fake_ray.info_error)


def test_the_head_reads_columns_from_the_parquet_schema(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rl = pa.table({"data_source": ["a"], "prompt": [[{"role": "user", "content": "q"}]],
                   "reward_model": [{"style": "rule", "ground_truth": "1"}]})
    sft = pa.table({"messages": [[{"role": "user", "content": "q"}]]})
    for name, table in (("rl", rl), ("sft", sft)):
        (tmp_path / name).mkdir()
        for base in ("train.parquet", "test.parquet"):
            pq.write_table(table, str(tmp_path / name / base))
    (tmp_path / "partial").mkdir()
    pq.write_table(rl, str(tmp_path / "partial" / "train.parquet"))
    files = {"data.train_files": str(tmp_path / "sft" / "train.parquet"),
             "data.val_files": str(tmp_path / "sft" / "test.parquet")}
    columns, prepared, skipped = mvp_submit_check.dataset_columns({"dir": str(tmp_path), "files": files})
    assert skipped is None
    assert columns == {"data.train_files": ["messages"], "data.val_files": ["messages"]}
    assert sorted(prepared) == ["rl", "sft"]  # "partial" lacks test.parquet
    assert prepared["rl"]["train.parquet"] == ["data_source", "prompt", "reward_model", "reward_model.style",
                                               "reward_model.ground_truth"]
    missing, _, _ = mvp_submit_check.dataset_columns({"dir": str(tmp_path), "files": {"x": str(tmp_path / "no")}})
    assert missing == {"x": None}


def test_room_counts_the_model_and_the_jobs_folders_free_bytes(fake_ray, tmp_path):
    import json
    import os
    import struct
    model = tmp_path / "common" / "models" / "m"
    model.mkdir(parents=True)
    (tmp_path / "jobs").mkdir()
    header = json.dumps({"w": {"dtype": "F32", "shape": [3, 5], "data_offsets": [0, 60]},
                         "b": {"dtype": "F32", "shape": [5], "data_offsets": [60, 80]}}).encode()
    (model / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 80)
    room = {"model_path": str(model), "shared_root": str(tmp_path)}

    found = look(tmp_path, room=room)["room"]

    stat = os.statvfs(str(tmp_path / "jobs"))
    assert found["params"] == 3 * 5 + 5 and found["files_bytes"] == 8 + len(header) + 80
    assert found["path"] == str(tmp_path / "jobs") and found["total_bytes"] == stat.f_blocks * stat.f_frsize
    assert abs(found["free_bytes"] - stat.f_bavail * stat.f_frsize) < 64 * 1024 * 1024  # the disk is shared
    missing = look(tmp_path, room=dict(room, model_path=str(tmp_path / "none")))["room"]
    assert missing["params"] is None and missing["free_bytes"] is not None
    assert look(tmp_path)["room"] is None


def test_a_link_out_of_its_folder_is_named_with_where_it_leads_and_links_inside_are_fine(fake_ray, tmp_path):
    root = tmp_path / "private"
    (root / "user" / "code").mkdir(parents=True)
    (root / "hf" / "tiny").mkdir(parents=True)
    (root / "common" / "models").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "reward.py").write_text("def compute_score(**kw):\n    return 0.0\n")
    (root / "user" / "code" / "reward.py").symlink_to(outside / "reward.py")
    (root / "common" / "models" / "tiny").symlink_to(root / "hf" / "tiny")  # as ray_model links models
    (root / "user" / "code" / "sub").symlink_to(outside)  # a folder link: what lies below it escapes too
    confine = [
        {"field": "reward_fn_path", "path": str(root / "user/code/reward.py"), "root": str(root / "user/code")},
        {"field": "model", "path": str(root / "common/models/tiny"), "root": str(root)},
        {"field": "trainer_overrides.x_file", "path": str(root / "user/code/sub/new.txt"), "root": str(root)},
        {"field": "trainer_overrides.y_dir", "path": str(root / "jobs/job-1/not-yet"), "root": str(root)},
    ]

    escaped = look(tmp_path, confine=confine)["escaped"]

    assert [item["field"] for item in escaped] == ["reward_fn_path", "trainer_overrides.x_file"]
    assert escaped[0]["link"] == str(root / "user/code/reward.py")
    assert escaped[0]["target"] == str(outside / "reward.py")
    assert escaped[0]["resolved"] == str(outside / "reward.py")
    assert escaped[1]["link"] == str(root / "user/code/sub") and escaped[1]["resolved"] == str(outside / "new.txt")


def test_the_reward_file_is_imported_in_the_given_python_with_the_snapshot_first(fake_ray, tmp_path):
    import sys
    snapshot = tmp_path / "snap"
    (snapshot / "verl").mkdir(parents=True)
    (snapshot / "verl" / "__init__.py").write_text("MARK = 'snapshot'\n")
    good = tmp_path / "good.py"
    good.write_text("import verl\nassert verl.MARK == 'snapshot'\n\ndef compute_score(data_source, solution_str, "
                    "ground_truth, extra_info=None):\n    return 1.0\n")
    broken = tmp_path / "broken.py"
    lines = ["import verl", "", "def compute_score(data_source, solution_str, ground_truth, extra_info=None)", ""]
    broken.write_text("\n".join(lines))
    reward = {"python": sys.executable, "snapshot": str(snapshot), "name": "compute_score", "kwargs": {}}

    assert look(tmp_path, reward=dict(reward, path=str(good)))["reward_problem"] == ""
    problem = look(tmp_path, reward=dict(reward, path=str(broken)))["reward_problem"]
    assert "SyntaxError" in problem and "line %d" % (lines.index(lines[2]) + 1) in problem and str(broken) in problem
    absent = look(tmp_path, reward=dict(reward, path=str(tmp_path / "absent.py")))
    assert absent["reward_problem"] == "" and absent["reward_seconds"] is None  # named by the missing paths
