"""mvp_queue: a job's shape from verl's resource pool rules, whether a cluster can ever hold it, and the
first-come-first-served plan of the queue. Expected values are computed from the inputs (the verl keys
and the bundle sizes verl 0.9.1 uses: ResourcePoolManager 3 CPUs per GPU, RayResourcePool 10)."""
import shlex

import pytest

import mvp_queue

GATE = "/private/common/code/mvp_tools/mvp_gate.py"
PPO_CPUS, SFT_CPUS = 3, 10


def test_ppo_shape_is_the_global_pool_with_verls_defaults_when_unset():
    shape = mvp_queue.job_shape("verl.trainer.main_ppo", {})
    # verl's ppo_trainer.yaml: trainer.nnodes 1, trainer.n_gpus_per_node 8.
    assert shape["pools"] == [{"name": "global_pool", "nodes": 1, "gpus_per_node": 8, "cpus_per_node": 8 * PPO_CPUS}]
    assert (shape["gpus"], shape["cpus"]) == (8, 8 * PPO_CPUS)
    assert "trainer.nnodes" in shape["rule"] and "init_resource_pool_mgr" in shape["rule"]


@pytest.mark.parametrize("nodes, gpus, rm_nodes, rm_gpus", [(2, 4, 1, 2), (1, 1, 2, 1)])
def test_ppo_reward_pool_counts_only_when_enabled(nodes, gpus, rm_nodes, rm_gpus):
    base = {"trainer.nnodes": nodes, "trainer.n_gpus_per_node": str(gpus),
            "reward.reward_model.nnodes": rm_nodes, "reward.reward_model.n_gpus_per_node": rm_gpus}
    off = mvp_queue.job_shape("verl.trainer.main_ppo", base)
    assert [p["name"] for p in off["pools"]] == ["global_pool"] and off["gpus"] == nodes * gpus
    on = mvp_queue.job_shape("verl.trainer.main_ppo", dict(base, **{"reward.reward_model.enable_resource_pool": "True"}))
    assert [p["name"] for p in on["pools"]] == ["global_pool", "reward_pool"]
    assert on["gpus"] == nodes * gpus + rm_nodes * rm_gpus
    assert on["cpus"] == (nodes * gpus + rm_nodes * rm_gpus) * PPO_CPUS


def test_sft_shape_uses_its_own_defaults_and_bundles():
    assert mvp_queue.job_shape("verl.trainer.sft_trainer_ray", {})["pools"] == [
        {"name": "global_pool", "nodes": 1, "gpus_per_node": 1, "cpus_per_node": SFT_CPUS}]
    shape = mvp_queue.job_shape("verl.trainer.sft_trainer_ray", {"trainer.nnodes": 8, "trainer.n_gpus_per_node": 1})
    assert (shape["gpus"], shape["cpus"]) == (8, 8 * SFT_CPUS)
    assert mvp_queue.describe(shape) == "8 nodes x 1 GPU (10 CPUs each)"


def test_scripts_have_no_shape_and_bad_sizes_name_the_key():
    assert mvp_queue.job_shape(None, {}) is None
    assert mvp_queue.job_shape("my.own.script", {"trainer.nnodes": 4}) is None
    with pytest.raises(ValueError, match=r"^trainer.n_gpus_per_node must be a whole number"):
        mvp_queue.job_shape("verl.trainer.main_ppo", {"trainer.n_gpus_per_node": "eight"})


def test_pool_options_round_trip_through_the_gates_command_line():
    shape = mvp_queue.job_shape("verl.trainer.main_ppo", {"trainer.nnodes": 2, "trainer.n_gpus_per_node": 4,
                                                          "reward.reward_model.enable_resource_pool": True,
                                                          "reward.reward_model.nnodes": 1})
    options = mvp_queue.pool_options(shape)
    assert options[::2] == ["--pool"] * len(shape["pools"])
    back = [mvp_queue.parse_pool(value) for value in options[1::2]]
    assert [dict(p, cpus_per_node=float(p["cpus_per_node"])) for p in shape["pools"]] == back
    with pytest.raises(ValueError, match="--pool wants"):
        mvp_queue.parse_pool("global_pool=2x")


def totals(*nodes):
    """{ip: {GPU, CPU}} for workers given as (GPUs, CPUs)."""
    return {"10.0.0.%d" % (i + 1): {"GPU": float(g), "CPU": float(c)} for i, (g, c) in enumerate(nodes)}


def shape(nodes, gpus, cpus_each=None, name="global_pool"):
    return mvp_queue.shape_of_pools([{"name": name, "nodes": nodes, "gpus_per_node": gpus,
                                      "cpus_per_node": gpus * 3 if cpus_each is None else cpus_each}])


@pytest.mark.parametrize("want, have, fits", [
    ((2, 1), [(1, 16), (1, 16)], True),
    ((8, 1), [(1, 16), (1, 16)], False),     # the reported deadlock: 8 single-GPU groups on 2 workers
    ((2, 2), [(4, 96)], True),               # two groups of one pool may share a node with room
    ((1, 4), [(2, 96), (2, 96)], False),     # 4 GPUs in total, none on one node
])
def test_shape_problem_compares_with_the_workers_totals(want, have, fits):
    job = shape(*want)
    problem = mvp_queue.shape_problem(job, totals(*have), ["trainer.nnodes", "trainer.n_gpus_per_node"])
    assert (problem == "") == fits
    if not fits:
        assert mvp_queue.describe(job) in problem and "(%g GPUs in all)" % (want[0] * want[1]) in problem
        assert "trainer.nnodes / trainer.n_gpus_per_node" in problem
        for ip, res in totals(*have).items():
            assert "%s: %g GPU, %g CPU" % (ip, res["GPU"], res["CPU"]) in problem


def test_pack_uses_best_fit_so_a_big_group_still_finds_its_node():
    # A 1-GPU group goes to the 1-GPU node, leaving the 2-GPU node whole for the 2-GPU group.
    two = mvp_queue.shape_of_pools([{"name": "a", "nodes": 1, "gpus_per_node": 1, "cpus_per_node": 1},
                                    {"name": "b", "nodes": 1, "gpus_per_node": 2, "cpus_per_node": 1}])
    left, placed = mvp_queue.pack(two, totals((2, 8), (1, 8)))
    assert placed == {"10.0.0.1": ["b"], "10.0.0.2": ["a"]}
    assert left == {"10.0.0.1": {"GPU": 0.0, "CPU": 7.0}, "10.0.0.2": {"GPU": 0.0, "CPU": 7.0}}


def entry(pools=(), locks=(), priority=None):
    words = ["python", "-u", GATE]
    for pool in pools:
        words += ["--pool", pool]
    for lock in locks:
        words += ["--lock", lock]
    if priority is not None:
        words += ["--priority", str(priority)]
    words += ["--log", "/x/logs/driver.log", "--", "python", "-u", "mvp_entry.py", "--", "python", "-m", "m",
              "--lock", "not-the-gates", "--priority", "999"]
    return " ".join(shlex.quote(w) for w in words)


def job(sid, start_s, pools=(), locks=(), status="RUNNING", priority=None, **more):
    return dict({"submission_id": sid, "status": status, "start_time": int(start_s * 1000), "type": "SUBMISSION",
                 "entrypoint": entry(pools, locks, priority)}, **more)


def test_gate_options_read_only_the_gates_own_arguments():
    options = mvp_queue.gate_options(entry(["global_pool=2x1:10"], ["transfer_queue"]))
    assert options == {"pools": [mvp_queue.parse_pool("global_pool=2x1:10")], "locks": ["transfer_queue"],
                       "priority": 0, "since": None}
    assert mvp_queue.gate_options(entry(["g=1x1:1"], priority=-100))["priority"] == -100
    assert mvp_queue.gate_options(entry(["g=1x1:1"], priority="high"))["priority"] == 0
    assert mvp_queue.gate_options("python -u mvp_entry.py -- python -m x") is None
    assert mvp_queue.gate_options("python 'unbalanced") is None


def states(entries):
    return {e["submission_id"]: (e["state"], e["position"]) for e in entries}


def test_plan_admits_first_come_first_served_and_nobody_overtakes():
    cluster = totals((1, 16), (1, 16))
    jobs = [job("grpo", 20, ["global_pool=1x1:3"], ["transfer_queue"]),
            job("sft", 10, ["global_pool=2x1:10"]),
            job("small", 30, ["global_pool=1x1:3"]),
            job("done", 1, ["global_pool=2x1:10"], status="SUCCEEDED"),
            job("selftest", 5, status="RUNNING", entrypoint="python -u selftest.py"),
            {"submission_id": None, "status": "RUNNING", "type": "DRIVER", "entrypoint": entry(["g=1x1:1"])}]
    plan = mvp_queue.plan(jobs, cluster)
    assert states(plan) == {"sft": ("admitted", 1), "grpo": ("waiting", 2), "small": ("waiting", 3)}
    by_id = {e["submission_id"]: e for e in plan}
    assert "held by sft (2 nodes x 1 GPU (10 CPUs each))" in by_id["grpo"]["waits_for"]
    # small fits nowhere either, but would fit before grpo once one GPU frees: it still waits behind grpo.
    assert by_id["small"]["waits_for"].startswith("its turn: grpo is ahead")
    # sft ends: grpo is admitted on one worker; small fits the other one, and no lock stops it.
    after = mvp_queue.plan([dict(j, status="SUCCEEDED") if j["submission_id"] == "sft" else j for j in jobs], cluster)
    assert states(after) == {"grpo": ("admitted", 1), "small": ("admitted", 2)}


def test_plan_applies_locks_and_lets_an_unfit_job_wait_without_blocking():
    cluster = totals((4, 96), (4, 96))
    jobs = [job("a", 1, ["global_pool=1x1:3"], ["transfer_queue"]), job("b", 2, ["global_pool=1x1:3"], ["transfer_queue"]),
            job("c", 3, ["global_pool=1x1:3"])]
    plan = mvp_queue.plan(jobs, cluster)
    assert states(plan) == {"a": ("admitted", 1), "b": ("waiting", 2), "c": ("waiting", 3)}
    assert plan[1]["waits_for"] == "lock transfer_queue, held by a"
    # A job no ALIVE worker set can hold (a lost node) waits, and the jobs behind it go on.
    jobs = [job("huge", 1, ["global_pool=3x4:12"]), job("d", 2, ["global_pool=1x1:3"])]
    plan = mvp_queue.plan(jobs, cluster)
    assert states(plan) == {"huge": ("waiting", 1), "d": ("admitted", 2)}
    assert plan[0]["waits_for"].startswith("workers that can hold 3 nodes x 4 GPUs")


def test_admit_needs_the_plan_and_what_ray_itself_reports_free():
    cluster = totals((1, 16), (1, 16))
    (mine,) = mvp_queue.plan([job("sft", 1, ["global_pool=2x1:10"])], cluster)
    assert mvp_queue.admit(mine, cluster) == (True, "")
    # Something outside the queue holds a GPU of one worker: Ray's own view says no.
    busy = dict(cluster, **{"10.0.0.2": {"GPU": 0.0, "CPU": 16.0}})
    go, why = mvp_queue.admit(mine, busy)
    assert not go and "held outside the queue" in why and "10.0.0.2: 0 GPU, 16 CPU" in why
    waiting = {"state": "waiting", "waits_for": "its turn: x is ahead of it in the queue and waits"}
    assert mvp_queue.admit(waiting, cluster) == (False, waiting["waits_for"])


def test_queue_rows_take_the_gates_own_record():
    cluster = totals((1, 16), (1, 16))
    plan = mvp_queue.plan([job("sft", 1, ["global_pool=2x1:10"]), job("grpo", 2, ["global_pool=1x1:3"])], cluster)
    rows = mvp_queue.queue_rows(plan, {"sft": {"state": "admitted", "since": "t0", "admitted_at": "t1"},
                                       "grpo": {"state": "waiting", "since": "t2", "waits_for": "own words"}})
    assert [(r["submission_id"], r["state"], r["waits_for"]) for r in rows] == [
        ("sft", "started", ""), ("grpo", "queued", "own words")]
    assert mvp_queue.row_line(rows[1]) == "2. grpo: queued since t2, shape 1 node x 1 GPU (3 CPUs each); waits for own words"
    assert mvp_queue.row_line(rows[0]).startswith("1. sft: started at t1")


def test_pool_options_carry_a_priority_other_than_zero_and_the_gate_reads_it_back():
    shape = mvp_queue.shape_of_pools([mvp_queue.parse_pool("global_pool=1x1:3")])
    assert "--priority" not in mvp_queue.pool_options(shape)
    assert mvp_queue.pool_options(shape, 0) == mvp_queue.pool_options(shape)
    words = ["python", GATE] + mvp_queue.pool_options(shape, 100) + ["--log", "l", "--", "p"]
    assert mvp_queue.gate_options(" ".join(words))["priority"] == 100


def test_plan_puts_waiting_jobs_of_a_higher_priority_first_but_never_ahead_of_a_started_one():
    cluster = totals((1, 16), (1, 16))
    one = ["global_pool=1x1:3"]
    jobs = [job("low-running", 1, one, priority=-100), job("normal-a", 2, one), job("normal-b", 3, one),
            job("high", 4, one, priority=100), job("low-late", 5, one, priority=-100)]
    # low-running's gate started its trainer: it holds one worker whatever the priorities.
    plan = mvp_queue.plan(jobs, cluster, started={"low-running"})
    assert [e["submission_id"] for e in plan] == ["low-running", "high", "normal-a", "normal-b", "low-late"]
    assert states(plan) == {"low-running": ("admitted", 1), "high": ("admitted", 2), "normal-a": ("waiting", 3),
                            "normal-b": ("waiting", 4), "low-late": ("waiting", 5)}
    by_id = {e["submission_id"]: e for e in plan}
    assert [by_id[s]["priority"] for s in ("low-running", "high", "normal-a")] == [-100, 100, 0]
    # within a priority nobody overtakes: normal-b waits behind normal-a, low-late behind both.
    assert by_id["normal-b"]["waits_for"].startswith("its turn: normal-a is ahead")
    assert by_id["low-late"]["waits_for"].startswith("its turn: normal-a is ahead")
    # Not yet started (no record): the order is by priority for every job, then by submission time.
    plan = mvp_queue.plan(jobs, cluster)
    assert [e["submission_id"] for e in plan] == ["high", "normal-a", "normal-b", "low-running", "low-late"]


def test_plan_without_priorities_is_first_come_first_served_whatever_started():
    cluster = totals((1, 16), (1, 16))
    jobs = [job("c", 3, ["global_pool=1x1:3"]), job("a", 1, ["global_pool=2x1:10"]), job("b", 2, ["global_pool=1x1:3"])]
    for started in (set(), {"a"}):
        assert [e["submission_id"] for e in mvp_queue.plan(jobs, cluster, started)] == ["a", "b", "c"]


def test_started_ids_are_the_jobs_whose_gate_admitted_them():
    assert mvp_queue.started_ids({"a": {"state": "admitted"}, "b": {"state": "waiting"}, "c": "junk", "d": {}}) == {"a"}
    assert mvp_queue.started_ids(None) == set()


def test_since_keeps_a_continued_runs_place_in_the_queue():
    shape = mvp_queue.shape_of_pools([mvp_queue.parse_pool("global_pool=2x1:10")])
    words = ["python", GATE] + mvp_queue.pool_options(shape, -100, 1000.5) + ["--log", "l", "--", "p"]
    assert mvp_queue.gate_options(" ".join(words))["since"] == 1000.5
    assert "--since" not in mvp_queue.pool_options(shape, -100)
    cluster = totals((1, 16), (1, 16))
    jobs = [job("holder", 1, ["global_pool=2x1:10"]), job("b", 5, ["global_pool=2x1:10"], priority=-100),
            # submitted after b (start_time 9 s) but continuing a run first submitted at 2 s:
            dict(job("a-r1", 9, ["global_pool=2x1:10"]), entrypoint=" ".join(words))]
    plan = mvp_queue.plan(jobs, cluster, started={"holder"})
    assert [e["submission_id"] for e in plan] == ["holder", "b", "a-r1"]  # b (5 s) before a-r1 (its since: 1000.5 s)
    jobs[2]["entrypoint"] = jobs[2]["entrypoint"].replace("1000.500", "2.000")
    plan = mvp_queue.plan(jobs, cluster, started={"holder"})
    assert [e["submission_id"] for e in plan] == ["holder", "a-r1", "b"]
    assert plan[1]["start_time"] == 2000.0


def admitted_at(*pairs):
    return {sid: {"started_at": float(t)} for sid, t in pairs}


def test_victims_are_the_fewest_lowest_most_recently_started_jobs_that_make_room():
    # Four single-GPU workers, four single-node jobs running; a high 2-node job waits.
    cluster = totals((1, 16), (1, 16), (1, 16), (1, 16))
    one = ["global_pool=1x1:3"]
    jobs = [job("low-old", 1, one, priority=-100), job("low-new", 2, one, priority=-100), job("normal", 3, one),
            job("low-newest", 4, one, priority=-100), job("high", 9, ["global_pool=2x1:3"], priority=100)]
    started = {"low-old", "low-new", "normal", "low-newest"}
    plan = mvp_queue.plan(jobs, cluster, started)
    assert mvp_queue.preemptor(plan, cluster)["submission_id"] == "high"
    candidates = admitted_at(("low-old", 10), ("low-new", 20), ("normal", 15), ("low-newest", 30))
    choice = mvp_queue.choose_victims(plan, cluster, candidates)
    # Two GPUs are needed: two victims, both low, the two started last.
    assert [v["submission_id"] for v in choice["victims"]] == ["low-newest", "low-new"]
    # low-new not a candidate (preemptible: false, or not followed): passed over; the lowest priority goes first,
    # low-old (-100) before normal (0) although normal started later.
    choice = mvp_queue.choose_victims(plan, cluster, admitted_at(("low-old", 10), ("normal", 15), ("low-newest", 30)))
    assert [v["submission_id"] for v in choice["victims"]] == ["low-newest", "low-old"]


def test_one_big_victim_beats_two_small_ones_and_equal_priority_never_preempts():
    cluster = totals((1, 16), (1, 16))
    jobs = [job("low-two", 1, ["global_pool=2x1:10"], priority=-100), job("high", 5, ["global_pool=1x1:10"], priority=100)]
    plan = mvp_queue.plan(jobs, cluster, {"low-two"})
    choice = mvp_queue.choose_victims(plan, cluster, admitted_at(("low-two", 1)))
    assert [v["submission_id"] for v in choice["victims"]] == ["low-two"]
    # Equal priorities: first come, first served, no preemption.
    same = [job("a", 1, ["global_pool=2x1:10"]), job("b", 5, ["global_pool=1x1:10"])]
    plan = mvp_queue.plan(same, cluster, {"a"})
    assert mvp_queue.choose_victims(plan, cluster, admitted_at(("a", 1))) is None
    # A lower waiting job never preempts a higher running one.
    up = [job("high-run", 1, ["global_pool=2x1:10"], priority=100), job("low", 5, ["global_pool=1x1:10"], priority=-100)]
    assert mvp_queue.choose_victims(mvp_queue.plan(up, cluster, {"high-run"}), cluster, admitted_at(("high-run", 1))) is None


def test_no_preemption_when_nothing_waits_for_resources_or_victims_cannot_make_room():
    cluster = totals((1, 16), (1, 16))
    # The waiting job fits at once: admitted, nobody to serve.
    jobs = [job("low", 1, ["global_pool=1x1:3"], priority=-100), job("high", 5, ["global_pool=1x1:3"], priority=100)]
    assert mvp_queue.choose_victims(mvp_queue.plan(jobs, cluster, {"low"}), cluster, admitted_at(("low", 1))) is None
    # It waits for a lock: no preemption frees a lock.
    jobs = [job("low", 1, ["global_pool=1x1:3"], ["tq"], priority=-100),
            job("high", 5, ["global_pool=1x1:3"], ["tq"], priority=100)]
    plan = mvp_queue.plan(jobs, cluster, {"low"})
    assert plan[1]["waits_for"].startswith("lock ") and mvp_queue.choose_victims(plan, cluster, admitted_at(("low", 1))) is None
    # The only victim's release is not enough (the rest is held by a job that may not be preempted).
    jobs = [job("keep", 1, ["global_pool=1x1:3"]), job("low", 2, ["global_pool=1x1:3"], priority=-100),
            job("high", 5, ["global_pool=2x1:3"], priority=100)]
    plan = mvp_queue.plan(jobs, cluster, {"keep", "low"})
    assert mvp_queue.choose_victims(plan, cluster, admitted_at(("low", 2))) is None
    # A shape the workers can never hold waits without blocking: it preempts nobody.
    jobs = [job("low", 1, ["global_pool=1x1:3"], priority=-100), job("huge", 5, ["global_pool=4x1:3"], priority=100)]
    assert mvp_queue.choose_victims(mvp_queue.plan(jobs, cluster, {"low"}), cluster, admitted_at(("low", 1))) is None
