"""bench/scale_ssh.py and bench/run.py: the N-node SSH inventory, task counts, per-node CPU, memory."""
import importlib.util
import ipaddress
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(name):
    """Import bench/<name>.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_%s" % name, os.path.join(ROOT, "bench", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scale = _load("scale_ssh")
run = _load("run")


@pytest.mark.parametrize("count, subnet, first", [(2, "10.1.2.0/24", 10), (65, "172.30.99.0/24", 10),
                                                  (5, "10.9.0.0/28", 10)])
def test_node_addresses_head_first_then_workers_from_the_first_address(count, subnet, first):
    nodes = scale.node_addresses(count, subnet, first)
    base = ipaddress.ip_network(subnet).network_address
    assert [name for name, _ in nodes] == ["mvp-scale-head"] + ["mvp-scale-worker-%d" % i for i in range(count - 1)]
    assert [address for _, address in nodes] == [str(base + first + i) for i in range(count)]


@pytest.mark.parametrize("count, subnet", [(1, "10.1.2.0/24"), (6, "10.9.0.0/28"), (246, "10.1.2.0/24")])
def test_node_addresses_refuses_a_lone_head_and_a_subnet_too_small(count, subnet):
    # /28: 16 addresses, .15 is the broadcast: from .10 there is room for 5 nodes, not 6.
    with pytest.raises(ValueError):
        scale.node_addresses(count, subnet, 10)


def test_inventory_hosts_puts_the_first_node_in_ray_head_and_the_rest_in_ray_workers():
    nodes = [("h", "10.0.0.1"), ("w0", "10.0.0.2"), ("w1", "10.0.0.3")]
    groups = scale.inventory_hosts(nodes)["all"]["children"]
    assert groups["docker_hosts"] == {"hosts": {}}
    assert groups["ray_nodes"]["children"]["ray_head"]["hosts"] == {"h": {"ansible_host": "10.0.0.1"}}
    assert groups["ray_nodes"]["children"]["ray_workers"]["hosts"] == {
        "w0": {"ansible_host": "10.0.0.2"}, "w1": {"ansible_host": "10.0.0.3"}}


def test_written_inventory_is_what_ansible_reads(tmp_path):
    nodes = scale.node_addresses(4, "10.7.0.0/24", 20)
    folder = scale.write_inventory(str(tmp_path / "inv"), nodes, "/keys/id", "tok123")
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-inventory"), "-i", folder, "--list"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    listed = json.loads(out)
    assert listed["ray_head"]["hosts"] == [nodes[0][0]]
    assert sorted(listed["ray_workers"]["hosts"]) == sorted(name for name, _ in nodes[1:])
    for name, address in nodes:
        host = listed["_meta"]["hostvars"][name]
        assert host["ansible_host"] == address
        assert host["ansible_connection"] == "ssh"
        assert host["ansible_ssh_private_key_file"] == "/keys/id"
        assert host["mvp_ray_auth_token"] == "tok123"
        assert host["mvp_ray_python"] == scale.NODE_PYTHON  # the shared defaults are linked in


def _report(tasks):
    """A callback report with one play holding ``tasks``: (name, start, end, {host: result})."""
    return {"plays": [{"tasks": [{"task": {"name": name, "duration": {"start": start, "end": end}},
                                  "hosts": hosts} for name, start, end, hosts in tasks]}]}


def test_count_tasks_counts_results_not_skipped_per_host():
    report = _report([
        ("a", "2026-11-23T10:00:00.000000Z", "2026-11-23T10:00:01.500000Z", {"h": {}, "w": {"changed": True}}),
        ("b", "2026-11-23T10:00:01.500000Z", "2026-11-23T10:00:01.750000Z", {"h": {"skipped": True}, "w": {}}),
        ("once", "2026-11-23T10:00:02.000000Z", "2026-11-23T10:00:04.000000Z", {"h": {}}),
        ("local", "2026-11-23T10:00:04.000000Z", "2026-11-23T10:00:04.100000Z", {"localhost": {}}),
    ])
    assert scale.count_tasks(report, ["h", "w", "absent"]) == {
        "h": {"ran": 2, "skipped": 1}, "w": {"ran": 2, "skipped": 0}, "absent": {"ran": 0, "skipped": 0}}
    times = scale.task_times(report)
    assert [(row["task"], row["seconds"], row["hosts"], row["skipped"]) for row in times] == [
        ("once", 2.0, 1, 0), ("a", 1.5, 2, 0), ("b", 0.25, 2, 1), ("local", 0.1, 1, 0)]


def test_task_times_leaves_out_a_task_without_a_result():
    report = {"plays": [{"tasks": [{"task": {"name": "x", "duration": {"start": "2026-11-23T10:00:00.000000Z"}},
                                    "hosts": {}}]}]}
    assert scale.task_times(report) == []


@pytest.mark.parametrize("cpu_s, nodes, tasks, expected_ms", [(12.8, 64, 10, 20.0), (9.6, 8, 8.125, 147.7),
                                                             (0.0, 8, 3, 0.0)])
def test_cpu_per_node_task_divides_by_nodes_and_tasks(cpu_s, nodes, tasks, expected_ms):
    assert scale.cpu_per_node_task(cpu_s, nodes, tasks) == pytest.approx(expected_ms, abs=0.05)
    assert scale.cpu_per_node_task(cpu_s, nodes, tasks) == round(cpu_s * 1000 / nodes / tasks, 1)


@pytest.mark.parametrize("nodes, tasks", [(0, 10), (8, 0)])
def test_cpu_per_node_task_refuses_no_nodes_or_no_tasks(nodes, tasks):
    with pytest.raises(ValueError):
        scale.cpu_per_node_task(1.0, nodes, tasks)


def test_summarize_takes_the_median_per_size_forks_and_phase():
    rows = [dict(nodes=8, forks=5, phase="bringup", wall_s=w, cpu_s=c, cpu_ssh_s=0.1, tasks_per_node=10.25,
                 cpu_ms_per_node_task=c * 1000 / 8 / 10.25) for w, c in ((10.0, 4.0), (14.0, 6.0), (11.0, 5.0))]
    rows.append(dict(rows[0], nodes=16, wall_s=30.0))
    table = scale.summarize(rows)
    assert [(r["nodes"], r["runs"], r["wall_s"], r["cpu_s"]) for r in table] == [(8, 3, 11.0, 5.0), (16, 1, 30.0, 4.0)]
    assert table[0]["cpu_ms_per_node_task"] == round(5.0 * 1000 / 8 / 10.25, 1)


@pytest.mark.parametrize("stats, expected", [
    ({"usage": 300 * 1048576, "stats": {"total_inactive_file": 100 * 1048576}}, 200.0),  # cgroup v1
    ({"usage": 150 * 1048576 + 52429, "stats": {"inactive_file": 0}}, 150.1),              # cgroup v2
    ({"usage": 64 * 1048576}, 64.0),                                                      # no cache figure
])
def test_memory_mib_leaves_the_inactive_page_cache_out(stats, expected):
    assert run.memory_mib(stats) == expected


@pytest.mark.parametrize("cpu_s, empty_s, nodes, tasks, expected_ms", [(14.0, 4.0, 64, 10, 15.6), (4.0, 4.0, 8, 10, 0.0)])
def test_per_host_task_ms_takes_the_empty_run_out(cpu_s, empty_s, nodes, tasks, expected_ms):
    assert scale.per_host_task_ms(cpu_s, empty_s, nodes, tasks) == expected_ms
    assert expected_ms == round((cpu_s - empty_s) * 1000 / nodes / tasks, 1)


@pytest.mark.parametrize("kind, tasks", [("empty", 0), ("assert", 10), ("ping", 10)])
def test_cost_playbooks_are_one_play_on_the_ray_nodes_that_ansible_accepts(tmp_path, kind, tasks):
    import yaml
    play = scale.cost_playbook(kind)
    assert len(play) == 1 and play[0]["hosts"] == "ray_nodes" and len(play[0]["tasks"]) == tasks
    path = tmp_path / ("%s.yml" % kind)
    path.write_text("---\n" + yaml.safe_dump(play, sort_keys=False))
    inventory = scale.write_inventory(str(tmp_path / "inv"), scale.node_addresses(3), "/keys/id", "t")
    listed = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
                             "--list-tasks", str(path)], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert listed.count("Cost | ") == tasks + 1  # the play's name and each task's


def _event(kind, second, role=None):
    """An ansible-runner event at ``second`` seconds past 12:00:00 UTC, of a task of ``role``."""
    data = {"role": role} if role else {}
    return {"event": kind, "created": "2026-11-27T12:00:%06.3f+00:00" % second, "event_data": data}


def test_phase_seconds_counts_each_task_until_the_next_starts_by_its_role():
    start = run._when(_event("playbook_on_start", 0))
    events = [_event("playbook_on_start", 2.0), _event("playbook_on_play_start", 2.5),
              _event("playbook_on_task_start", 3.0, "mvp.ray.containers"),
              _event("runner_on_ok", 4.0, "mvp.ray.containers"),
              _event("playbook_on_task_start", 7.0, "ray_head"),
              _event("playbook_on_play_start", 11.0),
              _event("playbook_on_task_start", 11.25, "mvp.ray.ray_worker"),
              _event("playbook_on_task_start", 15.25, "mvp.ray.some_new_role"),
              _event("playbook_on_task_start", 16.0, "mvp.ray.ray_worker"),
              _event("playbook_on_stats", 17.0)]
    phases = run.phase_seconds(events, start - 1.0, start + 17.5)
    # startup: from the process start (1 s before 12:00:00) to the first event at 2 s.
    assert phases["startup"] == pytest.approx(3.0)
    assert phases["containers"] == pytest.approx(7.0 - 3.0)
    assert phases["head"] == pytest.approx(11.0 - 7.0)
    assert phases["workers"] == pytest.approx((15.25 - 11.25) + (17.0 - 16.0))
    # the playbook's and plays' own steps, the unknown role, and the tail after the stats.
    assert phases["other"] == pytest.approx((2.5 - 2.0) + (3.0 - 2.5) + (11.25 - 11.0) + (16.0 - 15.25) + 0.5)
    assert sum(phases.values()) == pytest.approx(17.5 + 1.0)


def test_phase_seconds_maps_every_cluster_role_to_a_named_phase():
    roles = sorted(name for name in os.listdir(os.path.join(ROOT, "roles")))
    played = set()
    with open(os.path.join(ROOT, "playbooks", "cluster.yml")) as handle:
        text = handle.read()
    for role in roles:
        if "mvp.ray.%s\n" % role in text:
            played.add(role)
    assert played and played <= set(run.PHASES), sorted(played - set(run.PHASES))
    assert set(run.PHASES.values()) <= set(run.PHASE_ORDER)
