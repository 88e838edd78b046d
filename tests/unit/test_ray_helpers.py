"""Unit tests of the pure parts of the Ray modules (no cluster needed)."""
from ansible.module_utils.mvp_ray import auth_headers, node_ip_for, node_to_dict, summarize
from ray_job import pending_message, status_of

NODES = [
    node_to_dict({"node_id": "h", "node_ip": "10.0.0.1", "is_head_node": True, "state": "ALIVE",
                  "resources_total": {"memory": 1.0, "node:__internal_head__": 1.0}}),
    node_to_dict({"node_id": "w0", "node_ip": "10.0.0.2", "is_head_node": False, "state": "ALIVE",
                  "resources_total": {"CPU": 2.0, "GPU": 4.0, "worker_node": 100.0}}),
    node_to_dict({"node_id": "w1", "node_ip": "10.0.0.3", "is_head_node": False, "state": "DEAD",
                  "resources_total": {"CPU": 2.0, "GPU": 4.0, "worker_node": 100.0}}),
]


def test_summary_counts_alive_workers_and_gpus_only():
    summary = summarize(NODES, "worker_node")
    assert summary["head"]["node_ip"] == "10.0.0.1"
    assert summary["worker_ips"] == ["10.0.0.2"]
    assert summary["total_gpus"] == 4.0


def test_driver_node_id_maps_to_ip():
    assert node_ip_for(NODES, "w0") == "10.0.0.2"
    assert node_ip_for(NODES, "missing") is None
    assert node_ip_for(NODES, None) is None


def test_status_strings_from_enum_or_plain():
    assert status_of({"status": "JobStatus.RUNNING"}) == "RUNNING"
    assert status_of({"status": "PENDING"}) == "PENDING"


def test_pending_message_names_the_missing_resource():
    params = {"pending_timeout": 30, "entrypoint_resources": {"gpu_node": 1}, "entrypoint_num_cpus": 1}
    msg = pending_message({"submission_id": "j1"}, params, NODES)
    assert "j1" in msg and '{"gpu_node": 1}' in msg and '"worker_node": 100.0' in msg
    assert "node:__internal_head__" not in msg


def test_auth_header_only_with_a_token():
    assert auth_headers(None) == {}
    assert auth_headers("t0k") == {"Authorization": "Bearer t0k"}


def test_job_info_or_none_maps_an_unknown_id_to_none_and_raises_other_errors():
    import pytest

    from ansible.module_utils.mvp_ray import job_info_or_none

    class Client(object):
        def __init__(self, error=None):
            self.error = error

        def get_job_info(self, submission_id):
            if self.error:
                raise self.error
            return {"submission_id": submission_id}

    assert job_info_or_none(Client(), "a") == {"submission_id": "a"}
    assert job_info_or_none(Client(RuntimeError("Job a does not exist")), "a") is None
    assert job_info_or_none(Client(RuntimeError("Request failed with status code 404")), "a") is None
    with pytest.raises(RuntimeError):
        job_info_or_none(Client(RuntimeError("Request failed with status code 500")), "a")
