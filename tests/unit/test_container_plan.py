"""The dev inventory's container plan, rendered from the real inventory files."""
import os

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.manager import VariableManager

from mvp_containers import mvp_container_plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dev_hostvars():
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[os.path.join(ROOT, "inventories/dev")])
    manager = VariableManager(loader=loader, inventory=inventory)
    nodes = [h.name for h in inventory.groups["ray_nodes"].get_hosts()]
    return nodes, {n: manager.get_vars(host=inventory.get_host(n)) for n in nodes}


def test_dev_workers_get_four_gpus_each_and_the_head_none():
    nodes, hostvars = dev_hostvars()
    assert nodes == ["mvp-ray-head", "mvp-ray-worker-0", "mvp-ray-worker-1"]
    plan = mvp_container_plan(nodes, hostvars, {
        "image": hostvars["mvp-ray-head"]["mvp_node_image"], "network": "mvp-ray-net",
        "host_shared_dir": hostvars["mvp-ray-head"]["mvp_host_shared_dir"], "shared_root": "/private",
        "shm_size": "1g", "env": {"HF_HOME": "/private/hf"}, "extra_volumes": []})
    by_name = {p["name"]: p for p in plan}
    assert "device_requests" not in by_name["mvp-ray-head"]
    assert by_name["mvp-ray-worker-0"]["device_requests"] == [
        {"driver": "nvidia", "device_ids": ["0", "1", "2", "3"], "capabilities": [["gpu"]]}]
    assert by_name["mvp-ray-worker-1"]["device_requests"][0]["device_ids"] == ["4", "5", "6", "7"]
    assert all(p["volumes"][0] == "/data/mvp/private:/private" for p in plan)
    assert all(p["image"] == "mvp-verl-gpu:latest" for p in plan)
    assert hostvars["mvp-ray-worker-0"]["mvp_ray_worker_gpus"] == 4
