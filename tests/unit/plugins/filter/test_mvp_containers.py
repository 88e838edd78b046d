"""The dev inventory's container plan, rendered from the real inventory files."""
import os

import yaml

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.manager import VariableManager

from mvp_containers import mvp_container_plan

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def dev_hostvars():
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[os.path.join(ROOT, "inventories/dev")])
    manager = VariableManager(loader=loader, inventory=inventory)
    nodes = [h.name for h in inventory.groups["ray_nodes"].get_hosts()]
    return nodes, {n: manager.get_vars(host=inventory.get_host(n)) for n in nodes}


def _knob(hostvars, role, name):
    """A role knob as a play on the head sees it: the inventory's value, else the role's default."""
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        return hostvars["mvp-ray-head"].get(name, yaml.safe_load(handle)[name])


def test_dev_workers_get_four_gpus_each_and_the_head_none():
    nodes, hostvars = dev_hostvars()
    assert nodes == ["mvp-ray-head", "mvp-ray-worker-0", "mvp-ray-worker-1"]
    plan = mvp_container_plan(nodes, hostvars, {
        "image": "mvp-verl-gpu:0123456789ab", "network": "mvp-ray-net",
        "host_shared_dir": hostvars["mvp-ray-head"]["mvp_host_shared_dir"], "shared_root": "/private",
        "shm_size": "1g", "env": {"HF_HOME": "/private/hf"}, "extra_volumes": []})
    by_name = {p["name"]: p for p in plan}
    assert "device_requests" not in by_name["mvp-ray-head"]
    assert by_name["mvp-ray-worker-0"]["device_requests"] == [
        {"driver": "nvidia", "device_ids": ["0", "1", "2", "3"], "capabilities": [["gpu"]]}]
    assert by_name["mvp-ray-worker-1"]["device_requests"][0]["device_ids"] == ["4", "5", "6", "7"]
    assert all(p["volumes"][0] == "/data/mvp/private:/private" for p in plan)
    assert all(p["image"] == "mvp-verl-gpu:0123456789ab" for p in plan)
    assert hostvars["mvp-ray-worker-0"]["mvp_ray_worker_gpus"] == 4


def test_dev_builds_its_node_image_from_the_gpu_recipe():
    """dev names no prebuilt image: the docker_host role builds images/<variant>/Dockerfile FROM a verl image."""
    _, hostvars = dev_hostvars()
    head = hostvars["mvp-ray-head"]
    assert head["mvp_node_image"] == ""
    assert head["docker_host_node_image_build"] is True
    recipe = os.path.join(ROOT, "images", head["docker_host_node_image_variant"], "Dockerfile")
    assert os.path.isfile(recipe)
    assert _knob(hostvars, "docker_host", "docker_host_node_image_base").startswith("verlai/verl:")
    # The recipe installs the node requirements, so its Ray is the pin every node and the controller share.
    with open(os.path.join(ROOT, "images/node/requirements.txt"), encoding="utf-8") as handle:
        node_ray = [line.strip() for line in handle if line.startswith("ray")]
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as handle:
        controller_ray = [line.strip() for line in handle if line.startswith("ray")]
    assert node_ray and controller_ray
    assert node_ray[0].split("==")[1] == controller_ray[0].split("==")[1]
    with open(recipe, encoding="utf-8") as handle:
        assert "node-requirements.txt" in handle.read()


def _settings(hostvars, **extra):
    head = hostvars["mvp-ray-head"]
    settings = {"image": "mvp-verl-gpu:0123456789ab", "network": "mvp-ray-net",
                "host_shared_dir": head["mvp_host_shared_dir"], "shared_root": "/private",
                "shm_size": _knob(hostvars, "containers", "containers_shm_size"), "env": {}, "extra_volumes": [],
                "ipc_mode": _knob(hostvars, "containers", "containers_ipc_mode"),
                "ulimits": _knob(hostvars, "containers", "containers_ulimits")}
    settings.update(extra)
    return settings


def test_dev_containers_get_a_large_shm_and_unlimited_memlock():
    """The dev inventory (GPU) sets /dev/shm >= 16g, memlock unlimited and a large stack on every node."""
    nodes, hostvars = dev_hostvars()
    plan = mvp_container_plan(nodes, hostvars, _settings(hostvars))
    for item in plan:
        size = item["shm_size"]
        assert size.endswith("g") and int(size[:-1]) >= 16
        limits = {u.split(":")[0]: u.split(":")[1:] for u in item["ulimits"]}
        assert limits["memlock"] == ["-1", "-1"]
        assert int(limits["stack"][0]) >= 64 * 1024 * 1024
        assert "ipc_mode" not in item  # host IPC is an option, not the default


def test_ipc_host_is_an_option_and_bad_ulimits_are_refused():
    nodes, hostvars = dev_hostvars()
    plan = mvp_container_plan(nodes, hostvars, _settings(hostvars, ipc_mode="host"))
    assert {p["ipc_mode"] for p in plan} == {"host"}
    for bad in (["memlock"], ["memlock:unlimited"], [":1:1"], ["a:1:2:3"]):
        try:
            mvp_container_plan(nodes, hostvars, _settings(hostvars, ulimits=bad))
        except ValueError as err:
            assert "containers_ulimits" in str(err) and bad[0] in str(err)
        else:
            raise AssertionError("%r was accepted" % bad)


def test_cpu_settings_leave_the_plan_without_ipc_and_ulimits():
    """Empty settings add no keys, so existing CPU containers keep their plan (and are not recreated)."""
    nodes, hostvars = dev_hostvars()
    plan = mvp_container_plan(nodes, hostvars, _settings(hostvars, ipc_mode="", ulimits=[]))
    assert all("ipc_mode" not in p and "ulimits" not in p for p in plan)


def test_the_command_and_revision_are_planned_as_given_and_sleep_is_the_default():
    hostvars = {"n0": {}, "n1": {"mvp_container_name": "c1"}}
    base = {"image": "i", "network": "net", "host_shared_dir": "/h", "shared_root": "/private", "shm_size": "1g",
            "env": {}, "extra_volumes": ["/h/node:/opt/mvp/node:ro"]}
    plain = mvp_container_plan(["n0"], hostvars, base)[0]
    assert plain["command"] == ["sleep", "infinity"] and "revision" not in plain
    command = ["/py", "/opt/mvp/node/mvp_ray_node.py", "--settings", "/tmp/ray/s.json", "--status", "/tmp/ray/t.json"]
    planned = mvp_container_plan(["n0", "n1"], hostvars, dict(base, command=command, revision="abc,def"))
    assert [p["command"] for p in planned] == [command, command]
    assert [p["revision"] for p in planned] == ["abc,def", "abc,def"]
    assert planned[1]["volumes"] == ["/h:/private", "/h/node:/opt/mvp/node:ro"]
