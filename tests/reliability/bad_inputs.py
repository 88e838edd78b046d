#!/usr/bin/env python3
"""Bad-input suite: every case must fail before any change, with a message naming the variable.

Runs real ``ansible-playbook`` commands against a running cluster (the local
inventory's, or a molecule scenario's) and, for each case, compares the shared
folder on the docker host before and after (paths, sizes and modification
times) and, for submissions, Ray's job table (JobSubmissionClient in the head). Prints a table (case, expected, observed, files changed) and exits 1
when any case does not fail as expected or changes a file.

Usage:
    python tests/reliability/bad_inputs.py --inventory inventories/local \\
        --host-shared /srv/mvp/private [--only CASE ...]
"""
import argparse
import concurrent.futures
import contextlib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from suite import differences as changed_files, head_state, listing as snapshot, print_table, skipped_row

BUSY_PORT = 18265
# A real snapshot of an older verl release from PyPI (playbooks/snapshot.yml, made only when a case needs it).
OLD_RELEASE = {"code_id": "bad-input-verl-0.8.0", "pip": "verl==0.8.0"}
PEAK_WRAPPER = ("import resource, subprocess, sys\n"
                "rc = subprocess.call(sys.argv[1:])\n"
                "print('MVP_PEAK_KIB %d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
                "sys.exit(rc)\n")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# The MLflow store folder under the shared root (mlflow_server_dir), left out of the before/after listing.
MLFLOW_STORE = re.compile(r"^mlflow$")

def write(path, text):
    """Write ``text`` to ``path`` and return the path."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def write_bytes(path, data):
    """Write ``data`` (bytes) to ``path`` and return the path."""
    with open(path, "wb") as handle:
        handle.write(data)
    return path


# A 437-byte JobSpec whose aliases expand to 10 ** 7 strings under one trainer override (issue 50).
BOMB = ("workload: sft\n"
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
        "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
        "trainer_overrides: {data.x_files: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]}\n")
# The play's peak memory a refusal may take (the largest process of its tree); the bomb took 4.3 GB before.
PEAK_MIB_LIMIT = 1024


def cases(tmp, existing_id):
    """The bad-input table: (name, playbook, extra args, expected substring of the output[, module the
    head's Python must import for the check to run: the case is skipped without it])."""
    no_workers = write(os.path.join(tmp, "no-workers.yml"),
                       "all:\n  children:\n    ray_head:\n      hosts:\n        h0: {}\n"
                       "    ray_workers:\n      hosts: {}\n")
    two_heads = write(os.path.join(tmp, "two-heads.yml"),
                      "all:\n  children:\n    ray_head:\n      hosts:\n        h0: {}\n        h1: {}\n"
                      "    ray_workers:\n      hosts:\n        w0: {}\n")
    bad_yaml = write(os.path.join(tmp, "bad.yaml"), "workload: selftest\n  submission_id: [oops\n")
    model = ["-e", "model=bad-input-model"]
    return [
        ("unknown workload", "submit.yml", ["-e", "workload=nope"], "field 'workload': unknown workload"),
        ("submission id with /", "submit.yml", ["-e", "workload=selftest", "-e", "submission_id=a/b"],
         "field 'submission_id'"),
        ("submission id with ..", "submit.yml", ["-e", "workload=selftest", "-e", "submission_id=.."],
         "field 'submission_id'"),
        ("submission id with spaces", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"submission_id": "my job"}'], "field 'submission_id'"),
        ("existing submission id", "submit.yml", ["-e", "workload=selftest", "-e", "submission_id=" + existing_id],
         "submission_id '%s' is taken" % existing_id),
        ("missing code snapshot", "submit.yml", ["-e", "workload=selftest", "-e", "code_id=no-such-code"],
         "code_path /private/common/code/verl/no-such-code is not a code snapshot"),
        ("snapshot without mvp_marker.py", "submit.yml",
         ["-e", "workload=selftest", "-e", "code_id=bad-input-no-marker"],
         "bad-input-no-marker is not a code snapshot (needs mvp_marker.py"),
        ("misspelled trainer override", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", '{"trainer_overrides": {"trainer.total_epoch": 1}}'],
         "Could not override 'trainer.total_epoch'"),
        ("wrong type in an override", "submit.yml",
         ["-e", "workload=ppo"] + model + ["-e", '{"trainer_overrides": {"trainer.total_epochs": "many"}}'],
         "'trainer.total_epochs' expects int"),
        # The device and the shape given in the request: the same case holds on an inventory whose
        # site overrides train on CPU (local: trainer.device=cpu, 2 logical GPUs) and in molecule.
        ("GPU request larger than the cluster", "submit.yml", ["-e", "workload=grpo"] + model + [
            "-e", '{"trainer_overrides": {"trainer.device": "cuda", "trainer.nnodes": 4, "trainer.n_gpus_per_node": 2}}'],
         "trainer.nnodes * trainer.n_gpus_per_node = 8 GPUs, but Ray reports"),
        ("save_freq 0", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"trainer.save_freq": 0}}'],
         "field 'trainer_overrides.trainer.save_freq'"),
        ("wandb logger without a key", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"trainer.logger": ["console", "wandb"]}}'],
         "set mvp_wandb_api_key"),
        ("empty ray_workers", "site.yml", ["-i", no_workers], "at least one in ray_workers (found 0)"),
        ("two hosts in ray_head", "site.yml", ["-i", two_heads], "exactly one host in ray_head (found 2"),
        # --limit ray_nodes: the nodes as the platform gives them (prod), no container is (re)made.
        ("shared_root missing", "site.yml", ["--limit", "ray_nodes", "-e", "mvp_shared_root=/no/such/shared"],
         "/no/such/shared (mvp_shared_root) is missing"),
        ("shared_root read-only", "site.yml", ["--limit", "ray_nodes", "-e", "mvp_shared_root=/sys/fs"],
         "/sys/fs (mvp_shared_root) is not a writable directory"),
        ("image missing", "site.yml",
         ["-e", "mvp_node_image=mvp-no-such-image:0", "-e", "docker_host_node_image_build=false"],
         "Node image 'mvp-no-such-image:0' (mvp_node_image) is not on"),
        # Another service listens on the port asked for the dashboard (started by prepare()).
        ("port already taken on the head", "site.yml", ["-e", "mvp_ray_dashboard_port=%d" % BUSY_PORT],
         "Port %d (mvp_ray_dashboard_port) is already taken on the head by python3 (pid" % BUSY_PORT),
        ("malformed JobSpec YAML", "submit.yml", ["-e", "jobspec=" + bad_yaml],
         "jobspec %s: is not valid YAML" % bad_yaml),
        ("unknown JobSpec key", "submit.yml",
         ["-e", "jobspec=" + write(os.path.join(tmp, "typo.yaml"), "workload: selftest\nworklaod: x\n")],
         "field 'worklaod': unknown key"),
        ("repeat 0", "submit.yml", ["-e", "workload=selftest", "-e", "repeat=0"],
         "repeat must be a whole number >= 1 (got 0)"),
        ("resume_from an unknown job", "submit.yml", ["-e", "workload=sft"] + model + ["-e", "resume_from=no-such-job"],
         "field 'resume_from': no job directory /private/jobs/no-such-job"),
        ("resume_from a job of another workload", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", "resume_from=" + existing_id],
         "field 'resume_from': %s is a selftest job, this is sft" % existing_id),
        ("resume_from a job without checkpoint", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", "resume_from=bad-input-sft-no-ckpt"],
         "field 'resume_from': bad-input-sft-no-ckpt saved no checkpoint"),
        ("resume_from another world size", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", "resume_from=bad-input-sft-ws3"],
         "field 'resume_from': bad-input-sft-ws3 was trained with world size 3"),
        # Every request field typed; what the project owns is refused, not silently replaced.
        ("workload in another case", "submit.yml", ["-e", "workload=SFT"], "field 'workload': unknown workload 'SFT'"),
        ("ray block not a mapping", "submit.yml", ["-e", "workload=selftest", "-e", '{"ray": "fast"}'],
         "field 'ray': is a text, not a mapping"),
        ("ray.address of another cluster", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"ray": {"address": "http://10.9.9.9:8265"}}'],
         "field 'ray.address': 'http://10.9.9.9:8265' is not this cluster's Jobs API"),
        ("entrypoint_resources without the worker resource", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"ray": {"entrypoint_resources": {"GPU": 1}}}'],
         "field 'ray.entrypoint_resources': does not ask for worker_node"),
        ("entrypoint_num_cpus 0", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"ray": {"entrypoint_num_cpus": 0}}'],
         "field 'ray.entrypoint_num_cpus': 0 is not a positive number"),
        ("runtime_env working_dir", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"ray": {"runtime_env": {"working_dir": "/etc"}}}'],
         "field 'ray.runtime_env.working_dir': would upload a folder"),
        ("runtime_env pip", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"ray": {"runtime_env": {"pip": ["requests"]}}}'],
         "field 'ray.runtime_env.pip'"),
        ("env_vars PYTHONPATH", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"env_vars": {"PYTHONPATH": "/tmp"}}'],
         "field 'env_vars.PYTHONPATH': is set by the project for every job. Fix: drop it; use code_id"),
        ("env_vars MVP_JOB_DIR", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"env_vars": {"MVP_JOB_DIR": "/tmp"}}'],
         "field 'env_vars.MVP_JOB_DIR': is set by the project"),
        ("env_vars with the internal token", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"env_vars": {"MVP_INTERNAL_TOKEN": "x"}}'],
         "field 'env_vars.MVP_INTERNAL_TOKEN': is set by the project for every job. Fix: drop it; use ray_worker_secret"),
        ("env_vars not a mapping", "submit.yml", ["-e", "workload=selftest", "-e", "env_vars=A=1"],
         "field 'env_vars': is a text, not a mapping"),
        ("env_vars value a list", "submit.yml", ["-e", "workload=selftest", "-e", '{"env_vars": {"A": [1]}}'],
         "field 'env_vars.A': is a list, not a text"),
        ("data file as a trainer override", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"data.train_files": "/etc/x.parquet"}}'],
         "field 'trainer_overrides.data.train_files': is set by the job spec builder. Fix: drop it; use dataset"),
        ("checkpoint folder as a trainer override", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"trainer.default_local_dir": "/tmp/c"}}'],
         "field 'trainer_overrides.trainer.default_local_dir': is set by the job spec builder"),
        ("model path as a trainer override", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"model.path": "/tmp/m"}}'],
         "field 'trainer_overrides.model.path': is set by the job spec builder. Fix: drop it; use model"),
        ("trainer_overrides for the selftest", "submit.yml",
         ["-e", "workload=selftest", "-e", '{"trainer_overrides": {"trainer.total_epochs": 1}}'],
         "field 'trainer_overrides': workload selftest is a script of the project"),
        ("dataset outside datasets/", "submit.yml", ["-e", "workload=sft"] + model + ["-e", "dataset=../../etc"],
         "field 'dataset': '../../etc' is not valid"),
        ("code_id with a path", "submit.yml", ["-e", "workload=selftest", "-e", "code_id=../verl/x"],
         "field 'code_id': '../verl/x' is not valid"),
        ("JobSpec with a list as ray", "submit.yml",
         ["-e", "jobspec=" + write(os.path.join(tmp, "ray-list.yaml"), "workload: selftest\nray: [1]\n")],
         "field 'ray': is a list, not a mapping"),
        # Issue 28: what verl would refuse only after the model is loaded, or would run unsafely.
        ("model outside common/models", "submit.yml", ["-e", "workload=sft", "-e", "model=../../../etc"],
         "field 'model': '../../../etc' leads to /etc, outside /private/common/models"),
        ("logger list written as a string with wandb", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"trainer.logger": "[console,wandb]"}}'],
         "field 'trainer_overrides.trainer.logger': asks for wandb but no W&B API key is configured"),
        ("zero node count", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", '{"trainer_overrides": {"trainer.nnodes": 0}}'],
         "field 'trainer_overrides.trainer.nnodes': must be a whole number >= 1, got 0"),
        ("negative epoch count", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"trainer.total_epochs": -1}}'],
         "field 'trainer_overrides.trainer.total_epochs': must be a whole number >= 1, got -1"),
        ("GRPO with one response per prompt", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", '{"trainer_overrides": {"actor_rollout_ref.rollout.n": 1}}'],
         "field 'trainer_overrides.actor_rollout_ref.rollout.n': algorithm.adv_estimator=grpo compares"),
        ("Hydra output folder outside the job", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", '{"trainer_overrides": {"hydra.run.dir": "/etc"}}'],
         "field 'trainer_overrides.hydra.run.dir': is set by the job spec builder"),
        ("Hydra sweep folder outside the job", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", '{"trainer_overrides": {"hydra.sweep.dir": "/etc"}}'],
         "field 'trainer_overrides.hydra.sweep.dir': '/etc' is outside the job directory"),
        ("path override outside the shared storage", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", '{"trainer_overrides": {"trainer.rollout_data_dir": "/tmp/r"}}'],
         "field 'trainer_overrides.trainer.rollout_data_dir': '/tmp/r' is outside the shared storage"),
        ("reward function outside user/code", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", "reward_fn_path=/private/datasets/gsm8k/train.parquet"],
         "field 'reward_fn_path': /private/datasets/gsm8k/train.parquet is outside /private/user/code"),
        # Read on the head from the parquet schema (pyarrow in the nodes' venv).
        ("dataset that does not fit the workload", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", "dataset=gsm8k_sft"],
         "dataset gsm8k_sft does not fit workload grpo: /private/datasets/gsm8k_sft/train.parquet has no column "
         "prompt (data.prompt_key)", "pyarrow"),
        # verl's own start-up check on the head (needs torch in the nodes' venv: the verl-cpu image).
        ("batch smaller than verl's mini batch", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", '{"trainer_overrides": {"data.train_batch_size": 3}}'],
         "verl.utils.config.validate_config: ValueError: train_batch_size (3) must be >= "
         "actor.ppo_mini_batch_size", "torch"),
        # Issue 40: verl's own start-up steps before the weights, run on the head (need torch there too).
        ("model folder that holds no model", "submit.yml",
         ["-e", "workload=grpo", "-e", "model=bad-input-no-model"],
         "actor_rollout_ref.model.path=/private/common/models/bad-input-no-model: "
         "verl.workers.config.HFModelConfig", "torch"),
        ("fewer data rows than one batch", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", "dataset=bad-input-few-rows",
                                             "-e", '{"trainer_overrides": {"data.train_batch_size": 4}}'],
         "data.train_batch_size=4: data.train_files hold 2 rows (parquet metadata), fewer than one batch", "torch"),
        ("reward pool of no GPU", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", '{"trainer_overrides": {"reward.reward_model.enable_resource_pool": '
                                           'true, "reward.reward_model.n_gpus_per_node": 0}}'],
         "PPOTrainer._init_resource_pool_mgr): ValueError: config.reward.reward_model.n_gpus_per_node must be "
         "greater than 0", "torch"),
        # Issue 24: room on the shared storage for the k + 1 checkpoints the job keeps (the model's
        # parameters estimated on the head from bad-input-model's config.json).
        ("no room for the checkpoints kept", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", "submit_job_checkpoints_keep=1000000000000"],
         "no room on the shared storage for this job's checkpoints: one checkpoint is about"),
        # Issue 50: the request read strictly and within bounds, before anything else looks at it (the time and the
        # play's peak memory are in the table: the bomb took minutes and 4.3 GB before). Issue 62: a JobSpec takes
        # no anchors, aliases or merge keys at all, refused at the first one.
        ("JobSpec whose aliases expand to 10^7 strings", "submit.yml",
         ["-e", "jobspec=" + write(os.path.join(tmp, "bomb.yaml"), BOMB)],
         "anchor &a on line 2"),
        ("JobSpec with a merge key", "submit.yml", ["-e", "jobspec=" + write(
            os.path.join(tmp, "merge.yaml"), "workload: sft\ntrainer_overrides:\n  <<: {trainer.nnodes: 1}\n")],
         "merge key '<<' on line 3"),
        ("JobSpec larger than the size limit", "submit.yml",
         ["-e", "jobspec=" + write(os.path.join(tmp, "big.yaml"), "workload: selftest\n" + "#" * 300000 + "\n")],
         "262144 bytes"),
        ("JobSpec that is not UTF-8", "submit.yml", ["-e", "jobspec=" + write_bytes(
            os.path.join(tmp, "latin1.yaml"), "workload: selftest\nmodel: caf\u00e9\n".encode("latin-1"))],
         "is not UTF-8 text: byte offset 29 (line 2)"),
        ("JobSpec key given twice", "submit.yml", ["-e", "jobspec=" + write(
            os.path.join(tmp, "twice.yaml"), "workload: sft\nmodel: bad-input-model\nworkload: grpo\n")],
         "key 'workload' is given twice in one mapping (line 1 and line 3)"),
        ("-e file key given twice", "submit.yml", ["-e", "@" + write(
            os.path.join(tmp, "twice-e.yml"), "workload: sft\nmodel: bad-input-model\nmodel: other\n")],
         "Found duplicate mapping key 'model'"),
        ("submission id with a trailing newline", "submit.yml", ["-e", "jobspec=" + write(
            os.path.join(tmp, "newline.yaml"), 'workload: selftest\nsubmission_id: "heldout-newline\\n"\n')],
         "field 'submission_id': 'heldout-newline\\n' does not match"),
        ("reward file linked out of user/code", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", "reward_fn_path=/private/user/code/bad-input-link.py"],
         "reward_fn_path /private/user/code/bad-input-link.py resolves to /private/common/bad-input-reward.py, "
         "outside /private/user/code (/private/user/code/bad-input-link.py is a link to ../../common/bad-input-reward.py)"),
        ("model linked out of the shared storage", "submit.yml", ["-e", "workload=sft", "-e", "model=bad-input-escape"],
         "model /private/common/models/bad-input-escape resolves to /etc, outside /private"),
        ("reward file with a syntax error", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", "reward_fn_path=/private/user/code/bad-input-syntax.py"],
         "reward_fn_path /private/user/code/bad-input-syntax.py does not compile: SyntaxError: '(' was never closed at "
         "line 2"),
        ("reward file without compute_score", "submit.yml",
         ["-e", "workload=grpo"] + model + ["-e", "reward_fn_path=/private/user/code/bad-input-no-fn.py"],
         "has no function compute_score"),
        # Issue 51: a snapshot of a verl release the nodes' platform layer does not declare (the CPU plugin of the
        # verl-cpu image runs >=0.9.0,<0.10); only where the head's Python has that plugin.
        ("snapshot of a release the platform does not run", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", "code_id=bad-input-old-release"],
         "code_id bad-input-old-release is verl 0.8.0, outside the releases this cluster's platform layer runs",
         "mvp_verl_cpu"),
        # Issue 51: the same release accepted at the user's risk: verl 0.8.0's own code (a real snapshot of its
        # PyPI wheel, made by snapshot.yml: OLD_RELEASE) asks Ray for a resource named after its device, which no
        # node offers; the placement groups it would ask for are compared whole with the nodes' offers.
        ("snapshot whose resource request no node offers", "submit.yml",
         ["-e", "workload=sft"] + model + ["-e", "code_id=" + OLD_RELEASE["code_id"],
                                           "-e", "accept_unsupported_release=true"],
         "the snapshot's own code asks Ray for resource 'cpu'", "mvp_verl_cpu"),
        ("report without runs", "report.yml", [], "Name the runs: -e submission_ids=A,B"),
        ("report of an unknown job", "report.yml", ["-e", "submission_ids=no-such-job"],
         "no job directory for no-such-job under /private/jobs"),
        ("report with a foreign baseline", "report.yml",
         ["-e", "submission_ids=" + existing_id, "-e", "baseline=no-such-job"],
         "baseline no-such-job is not one of the runs (%s)" % existing_id),
    ]


def prepare(host_shared, head_container):
    """Create the fixtures the cases need: folders on the shared storage (before the first
    snapshot) and, in the head container, a listener on BUSY_PORT; return that listener's cleanup."""
    listener = subprocess.Popen(["docker", "exec", head_container, "python3", "-m", "http.server",
                                 "--bind", "0.0.0.0", str(BUSY_PORT)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["docker", "exec", head_container, "python3", "-c",
                    "import socket, time\nfor _ in range(100):\n    try:\n"
                    "        socket.create_connection(('127.0.0.1', %d), 1).close(); break\n"
                    "    except OSError:\n        time.sleep(0.1)" % BUSY_PORT], check=True)

    def cleanup():
        subprocess.run(["docker", "exec", head_container, "pkill", "-f", "http.server --bind 0.0.0.0 %d" % BUSY_PORT],
                       check=False)
        listener.wait(timeout=30)
    os.makedirs(os.path.join(host_shared, "common/models/bad-input-model"), exist_ok=True)
    # A decoder's dimensions only (no weights): the room check estimates its parameters from them.
    # A model_type and the tokenizer of a prepared tiny model make it a folder verl reads (issue 40: a head
    # with torch reads the model folder as verl does; the cases with this model are about something else).
    write(os.path.join(host_shared, "common/models/bad-input-model/config.json"),
          '{"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 128, '
          '"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 256, "vocab_size": 512, "tie_word_embeddings": true}\n')
    tokenizers = sorted(glob.glob(os.path.join(host_shared, "hf/local/*/tokenizer.json")))
    if tokenizers:
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
            source = os.path.join(os.path.dirname(tokenizers[0]), name)
            if os.path.isfile(source):
                shutil.copyfile(source, os.path.join(host_shared, "common/models/bad-input-model", name))
    # A model folder that holds no model (no config, no tokenizer).
    os.makedirs(os.path.join(host_shared, "common/models/bad-input-no-model"), exist_ok=True)
    write(os.path.join(host_shared, "common/models/bad-input-no-model/README.md"), "not a model\n")
    # A prepared dataset with the workload's columns but fewer rows than one batch.
    gsm8k = os.path.join(host_shared, "datasets/gsm8k")
    if os.path.isfile(os.path.join(gsm8k, "train.parquet")):
        import pyarrow.parquet as pq
        os.makedirs(os.path.join(host_shared, "datasets/bad-input-few-rows"), exist_ok=True)
        for name in ("train.parquet", "test.parquet"):
            pq.write_table(pq.read_table(os.path.join(gsm8k, name)).slice(0, 2),
                           os.path.join(host_shared, "datasets/bad-input-few-rows", name))
    # Reward files: one linked out of user/code (relative, so it resolves alike on the host and in the nodes), one
    # with a syntax error on line 2, one without verl's function; and a model linked out of the shared storage.
    os.makedirs(os.path.join(host_shared, "user/code"), exist_ok=True)
    write(os.path.join(host_shared, "common/bad-input-reward.py"), "def compute_score(**kwargs):\n    return 0.0\n")
    for link, target in (("user/code/bad-input-link.py", "../../common/bad-input-reward.py"),
                         ("common/models/bad-input-escape", "/etc")):
        if not os.path.islink(os.path.join(host_shared, link)):
            os.symlink(target, os.path.join(host_shared, link))
    write(os.path.join(host_shared, "user/code/bad-input-syntax.py"), "import math\ndef compute_score(\n")
    write(os.path.join(host_shared, "user/code/bad-input-no-fn.py"), "def score(**kwargs):\n    return 0.0\n")
    old = os.path.join(host_shared, "common/code/verl/bad-input-old-release")
    os.makedirs(os.path.join(old, "verl/version"), exist_ok=True)
    write(os.path.join(old, "mvp_marker.py"), 'MARKER = "bad-input-old-release"\n')
    write(os.path.join(old, "verl/__init__.py"), "")
    write(os.path.join(old, "verl/version/version"), "0.8.0\n")
    broken = os.path.join(host_shared, "common/code/verl/bad-input-no-marker/verl")
    os.makedirs(broken, exist_ok=True)
    write(os.path.join(broken, "__init__.py"), "")
    # Earlier sft jobs to resume from: one that saved no checkpoint, one trained by 3 processes (a complete
    # checkpoint as verl's FSDP checkpoint manager writes it: every kind for ranks 0..2, and the tracker file).
    for name, ckpt in (("bad-input-sft-no-ckpt", None), ("bad-input-sft-ws3", "global_step_2")):
        os.makedirs(os.path.join(host_shared, "jobs", name, "config"), exist_ok=True)
        write(os.path.join(host_shared, "jobs", name, "config/job_spec.json"), '{"workload": "sft"}\n')
        if ckpt:
            folder = os.path.join(host_shared, "jobs", name, "checkpoints", ckpt)
            os.makedirs(folder, exist_ok=True)
            for kind in ("model", "optim", "extra_state"):
                for rank in range(3):
                    write(os.path.join(folder, "%s_world_size_3_rank_%d.pt" % (kind, rank)), "shard")
            write(os.path.join(host_shared, "jobs", name, "checkpoints", "latest_checkpointed_iteration.txt"),
                  ckpt.rsplit("_", 1)[1])
    return cleanup


def head_imports(head_container, python, module):
    """Whether the head's Python imports ``module`` (some checks run only with it there)."""
    return subprocess.run(["docker", "exec", head_container, python, "-c", "import " + module],
                          capture_output=True, check=False).returncode == 0


def ray_job_ids(head_container, python, address):
    """Submission ids in Ray's job table, read in the head container (suite.head_state)."""
    state = head_state(head_container, python, address, "/tmp/ray/mvp_auth_token")  # mvp_ray_auth_token_path
    if state is None:
        raise RuntimeError("Ray's job table could not be read in %s at %s" % (head_container, address))
    return {job["submission_id"] for job in state["jobs"]}


def make_old_release(inventory):
    """Make OLD_RELEASE's snapshot as a user would (snapshot.yml, its source a pip requirement); skip: exists."""
    run = subprocess.run(["ansible-playbook", "-i", inventory, os.path.join(ROOT, "playbooks/snapshot.yml"),
                          "--tags", "verl_snapshot", "-e", json.dumps({"verl_snapshot_sources": [OLD_RELEASE]})],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    if run.returncode != 0:
        raise SystemExit("snapshot.yml could not make %s (rc=%s): %s" % (OLD_RELEASE, run.returncode,
                                                                       (run.stdout + run.stderr)[-2000:]))


def run_case(args, case):
    """Run one case: its playbook must fail with the expected message and change no file and no Ray job.

    :returns: the table row (name, expected, observed, files changed, PASS or FAIL).
    """
    name, playbook, extra, expected = case[:4]
    inventory = ["-i", args.inventory] if "-i" not in extra else []
    # The MLflow tracking server's store (<shared_root>/mlflow) belongs to a running service whose log
    # grows with every request; a refused job never reaches it (ray_job makes the run after the checks).
    before = snapshot(args.host_shared, skip_dir=MLFLOW_STORE)
    jobs_before = ray_job_ids(args.head_container, args.ray_python, args.address) if playbook == "submit.yml" else set()
    # The play runs under a small wrapper that prints the peak memory of its process tree (RUSAGE_CHILDREN:
    # the largest descendant waited for) on its last line of stderr.
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", PEAK_WRAPPER, "ansible-playbook"] + inventory
                          + [os.path.join(ROOT, playbook)] + extra,
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    seconds = time.monotonic() - start
    stderr, _, peak = proc.stderr.rstrip("\n").rpartition("\n")
    peak_mib = int(peak.split()[-1]) // 1024 if peak.startswith("MVP_PEAK_KIB") else -1
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, stderr)
    changed = changed_files(before, snapshot(args.host_shared, skip_dir=MLFLOW_STORE))
    if playbook == "submit.yml":  # a refused submission leaves no Ray job either
        changed += ["ray job " + j for j in sorted(ray_job_ids(args.head_container, args.ray_python,
                                                               args.address) - jobs_before)]
    output = proc.stdout + proc.stderr
    found = " ".join(expected.split()) in " ".join(output.split())
    ok = proc.returncode != 0 and found and not changed and 0 <= peak_mib <= PEAK_MIB_LIMIT
    observed = ("failed, message found" if proc.returncode and found else
                "failed, message NOT found" if proc.returncode else "did NOT fail")
    if peak_mib > PEAK_MIB_LIMIT or peak_mib < 0:
        observed += ", peak memory %s MiB (limit %d)" % (peak_mib, PEAK_MIB_LIMIT)
    if not ok:
        print("--- %s: rc=%s changed=%s\n%s" % (name, proc.returncode, changed[:10], output[-3000:]), file=sys.stderr)
    return (name, expected, observed, len(changed), "%.1f" % seconds, peak_mib, "PASS" if ok else "FAIL")


def main():
    """Run the table and print it; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", default=os.path.join(ROOT, "inventories/local"))
    parser.add_argument("--host-shared", default="/srv/mvp/private",
                        help="the shared folder as seen on the docker host")
    parser.add_argument("--existing-id", required=True, help="a submission id that already exists")
    parser.add_argument("--only", nargs="*", help="run only these case names")
    parser.add_argument("--expect-skipped", nargs="*", default=[],
                        help="cases this scenario cannot run (the head lacks the module they need): listed as "
                             "SKIPPED; any other skipped case fails the table")
    parser.add_argument("--ray-python", default="/opt/mvp/venv/bin/python", help="Python with ray in the head")
    parser.add_argument("--address", default="http://127.0.0.1:8265", help="the Jobs API as seen in the head")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (each must change nothing)")
    parser.add_argument("--head-container", default="mvp-ray-head",
                        help="the head's container (a listener on port %d is started in it)" % BUSY_PORT)
    args = parser.parse_args()
    cleanup = prepare(args.host_shared, args.head_container)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.callback(cleanup)
        todo, skipped, importable = [], [], {}
        table = cases(tmp, args.existing_id)
        unknown = sorted((set(args.only or []) | set(args.expect_skipped)) - {case[0] for case in table})
        if unknown:
            print("no such case: %s" % ", ".join(unknown), file=sys.stderr)
            return 2
        for case in table:
            if args.only and case[0] not in args.only:
                continue
            if len(case) > 4:
                if case[4] not in importable:
                    importable[case[4]] = head_imports(args.head_container, args.ray_python, case[4])
                if not importable[case[4]]:
                    skipped.append(skipped_row(case[0], case[3], "%s is not importable on the head" % case[4],
                                               case[0] in args.expect_skipped))
                    continue
            todo.append(case)
        if any("code_id=" + OLD_RELEASE["code_id"] in case[2] for case in todo):
            make_old_release(args.inventory)
        # Cases run a few at a time: each must change nothing, so a change seen while two ran fails both.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(lambda case: run_case(args, case), todo)) + skipped
    failures = sum(row[-1] not in ("PASS", "SKIPPED") for row in rows)
    rows = [row if len(row) == 7 else row[:4] + ("-", "-") + row[4:] for row in rows]
    return print_table(("case", "expected message", "observed", "files changed", "seconds", "peak MiB", "result"), rows,
                       "bad inputs", failures, skipped=sum(row[-1] == "SKIPPED" for row in rows))

if __name__ == "__main__":
    sys.exit(main())
