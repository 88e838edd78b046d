"""mvp_ray_rest against a real HTTP server on 127.0.0.1 that answers as Ray's dashboard routes do
(the fake cluster of tests/unit/plugins/modules/conftest.py behind http.server): URLs, query strings,
JSON bodies, the auth header, HTTP errors and a dashboard that does not answer."""
import socket

import pytest
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_rest import (
    JobsClient, RayHttpError, RayUnreachable, StateClient)

from ray_dashboard_fake import FakeRay, node, served


@pytest.fixture
def dashboard():
    """A FakeRay served over HTTP on a free port; yields (fake, address)."""
    fake = FakeRay()
    fake.nodes = [node("head0", "10.0.0.1", head=True, CPU=0.0), node("wrk1", "10.0.0.2", CPU=8.0, worker_node=100.0),
                  node("wrk2", "10.0.0.3", state="DEAD", CPU=8.0, worker_node=100.0)]

    with served(fake) as address:
        yield fake, address


def test_submit_read_stop_and_delete_a_job_over_http(dashboard):
    fake, address = dashboard
    jobs = JobsClient(address, headers={"Authorization": "Bearer s3cret"})
    asked = dict(entrypoint="python -u job.py", submission_id="job/1 x", runtime_env={"env_vars": {"A": "1"}},
                 metadata={"workload": "sft"}, entrypoint_resources={"worker_node": 1}, entrypoint_num_cpus=1.0)

    assert jobs.submit_job(**asked) == asked["submission_id"]
    (sent,) = fake.called("submit_job")
    assert sent == asked  # the None options are not sent
    job = jobs.get_job_info(asked["submission_id"])  # an id with a slash and a space is quoted
    assert job["status"] == "PENDING" and job["submission_id"] == asked["submission_id"]
    assert [row["submission_id"] for row in jobs.list_jobs()] == [asked["submission_id"]]
    assert jobs.stop_job(asked["submission_id"]) is True
    fake.logs[asked["submission_id"]] = "line 1\nline 2\n"
    assert jobs.get_job_logs(asked["submission_id"]) == fake.logs[asked["submission_id"]]
    assert jobs.delete_job(asked["submission_id"]) is True
    assert asked["submission_id"] not in fake.jobs
    assert {auth for _path, auth in fake.clients} == {"Bearer s3cret"}


def test_an_unknown_id_is_a_404_worded_as_rays_client_words_it(dashboard):
    _fake, address = dashboard
    with pytest.raises(RayHttpError) as error:
        JobsClient(address).get_job_info("nope")
    assert error.value.status == 404
    assert str(error.value).startswith("Request failed with status code 404: Job nope does not exist")


def test_a_second_submission_of_an_id_is_refused_with_rays_reason(dashboard):
    fake, address = dashboard
    fake.add_job("job-1", "RUNNING")
    with pytest.raises(RayHttpError) as error:
        JobsClient(address).submit_job(entrypoint="true", submission_id="job-1")
    assert error.value.status == 400 and "already exists" in str(error.value)


@pytest.mark.parametrize("status, hint", [(401, "environment mvp_ray_auth_env"), (403, "differs from the cluster's")])
def test_auth_failures_say_which_setting_to_fix(status, hint):
    error = RayHttpError(status, "Unauthorized", "http://h:8265/api/jobs/")
    assert hint in str(error) and error.status == status


def test_state_lists_send_filters_and_return_rays_rows(dashboard):
    fake, address = dashboard
    fake.actors = [{"actor_id": "a1", "job_id": "02000000", "state": "ALIVE"},
                   {"actor_id": "a2", "job_id": "03000000", "state": "DEAD"}]
    state = StateClient(address)

    assert state.list_nodes(address=address, detail=True) == fake.nodes
    assert state.list_actors(filters=[("job_id", "=", "03000000")]) == [fake.actors[1]]
    assert state.list_placement_groups() == []
    with pytest.raises(ValueError):
        state.list_nodes(address="http://elsewhere:8265")


def test_a_failed_state_list_says_rays_reason(dashboard):
    fake, address = dashboard
    fake.state_error = "GCS timed out"
    with pytest.raises(RuntimeError) as error:
        StateClient(address).list_nodes()
    assert not isinstance(error.value, RayHttpError) and fake.state_error in str(error.value)


def test_nothing_listening_is_unreachable_naming_the_address():
    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    address = "http://127.0.0.1:%d" % port
    with pytest.raises(RayUnreachable) as error:
        JobsClient(address, timeout=5).list_jobs()
    assert address in str(error.value)
