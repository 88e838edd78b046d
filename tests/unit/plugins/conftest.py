"""Fixtures shared by the plugin tests (modules, module_utils): a fake cluster behind mvp_ray_rest."""
import pytest
from ansible_collections.mvp.ray.plugins.module_utils.cluster import mvp_ray_rest
from ray_dashboard_fake import FakeRay, node


@pytest.fixture
def cluster_nodes():
    """A head that runs no jobs, two ALIVE workers carrying worker_node and a DEAD one."""
    return [node("head0", "10.0.0.1", head=True, CPU=0.0),
            node("wrk1", "10.0.0.2", CPU=8.0, worker_node=100.0),
            node("wrk2", "10.0.0.3", CPU=8.0, GPU=2.0, worker_node=100.0),
            node("wrk3", "10.0.0.4", state="DEAD", CPU=8.0, worker_node=100.0)]


@pytest.fixture
def fake_ray(monkeypatch, cluster_nodes):
    """A fake of Ray's dashboard (Jobs REST API and State API) behind ``open_url`` of module_utils
    mvp_ray_rest, holding ``cluster_nodes``; Ray's token variables are unset for the test."""
    fake = FakeRay()
    fake.nodes = list(cluster_nodes)
    monkeypatch.setattr(mvp_ray_rest, "open_url", fake.open_url)
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    return fake
