# Entry points. `make demo` sets everything up on a fresh machine, runs the
# self-test job and then the main job: verl's SFT trainer, for real, on the CPU
# workers; `make test` runs every test (unit, lint, syntax, molecule).
PYTHON ?= python3
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_FORCE_COLOR ?= 0

.PHONY: setup engine demo cluster selftest sft down test unit lint sanity syntax molecule reliability faults verdicts resume queue controller-content ledger notify bench bench-scale bench-train bench-resume bench-queue bench-controller bench-ledger bench-notify bench-mlflow matrix matrix-ci mlflow-screenshot

setup: $(VENV)/.installed ## Create .venv with the pinned controller and test requirements

$(VENV)/.installed: requirements.txt requirements-test.txt roles/job_controller/files/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $@

engine: ## Make a Docker engine answer (installs docker.io and starts dockerd if needed)
	bash scripts/ensure-docker.sh

# The shared storage as the docker host sees it (the local inventory's mvp_host_shared_dir), and
# the main job's id, so the summary names it (one per make invocation).
HOST_SHARED ?= /srv/mvp/private
DEMO_ID := sft-demo-$(shell date -u +%Y%m%d-%H%M%S)

demo: setup engine ## Bring up the local cluster, run the self-test job, then train (verl SFT on CPU) and summarise it
	ansible-playbook site.yml
	ansible-playbook submit.yml -e workload=selftest
	ansible-playbook submit.yml -e workload=sft -e submission_id=$(DEMO_ID); rc=$$?; \
	  python scripts/job_summary.py --jobs-dir $(HOST_SHARED)/jobs --submission-id $(DEMO_ID); exit $$rc

cluster: setup engine ## Bring up the local cluster only
	ansible-playbook site.yml

selftest: ## Submit the self-test job to the running cluster
	ansible-playbook submit.yml -e workload=selftest

sft: ## Submit verl's SFT trainer to the running cluster (real training; CPU on the local inventory) and summarise it
	ansible-playbook submit.yml -e workload=sft -e submission_id=$(DEMO_ID); rc=$$?; \
	  python scripts/job_summary.py --jobs-dir $(HOST_SHARED)/jobs --submission-id $(DEMO_ID); exit $$rc

down: setup ## Stop Ray and remove the local containers (keeps /srv/mvp/private)
	ansible-playbook down.yml

reliability: setup engine ## Bad-input table and the catalog's GPU defaults through verl's own checks, on the local cluster (brings it up first)
	ansible-playbook site.yml
	ansible-playbook submit.yml -e workload=selftest -e submission_id=reliability-existing || true
	python tests/reliability/bad_inputs.py --inventory inventories/local --host-shared /srv/mvp/private --existing-id reliability-existing
	python tests/reliability/catalog_checks.py --head-container mvp-ray-head

faults: setup engine ## Fault table against the local cluster: kills, restarts and removes its containers (brings it up first)
	ansible-playbook site.yml
	python tests/reliability/faults.py --inventory inventories/local --host-shared /srv/mvp/private

verdicts: setup engine ## Verdict table against the local cluster: real training with faults injected (kills workers)
	ansible-playbook site.yml
	python tests/reliability/verdicts.py --inventory inventories/local --host-shared /srv/mvp/private

resume: setup engine ## Resume table against the local cluster: real SFT runs lose a worker and continue by themselves
	ansible-playbook site.yml
	python tests/reliability/resume.py --inventory inventories/local --host-shared /srv/mvp/private

matrix: setup engine ## Variation matrix: what verl's example scripts change, each trained for real, checkpointed and resumed on the local cluster; rewrites its docs table and benchmark (tests/matrix)
	ansible-playbook site.yml
	python tests/matrix/run.py --inventory inventories/local --host-shared /srv/mvp/private; rc=$$?; \
	  python tests/matrix/docs.py; exit $$rc

matrix-ci: setup engine ## The matrix's CI subset (GRPO with KL loss and its resume; build/matrix.json)
	ansible-playbook site.yml
	python tests/matrix/run.py --inventory inventories/local --host-shared /srv/mvp/private --ci

controller-content: setup engine ## The job controller runs what its role installed: a code change restarts it mid-run; the collection installed into a fresh folder runs site and submit from there
	ansible-playbook site.yml
	python tests/reliability/controller_content.py --inventory inventories/local --host-shared /srv/mvp/private

ledger: setup engine ## GPU-hour ledger against the local cluster: a run of set phases lands in its buckets within 1 s; ledger.yml's per-owner sums equal the runs' (since the first case's start)
	ansible-playbook site.yml
	rm -f build/ledger-mark
	python tests/reliability/ledger.py --inventory inventories/local --host-shared /srv/mvp/private --mark build/ledger-mark

notify: setup engine ## Webhooks against the local cluster: a receiver on this host's loopback gets each run's verdict within 10 s; the controller killed before a send; the receiver 503 then 200
	ansible-playbook site.yml
	python tests/reliability/notify.py --inventory inventories/local --host-shared /srv/mvp/private

queue: setup engine ## Queue table against the local cluster: jobs of three shapes and priorities at once, a too-big one, preemption after a checkpoint, a busy start
	ansible-playbook site.yml
	python tests/reliability/jobqueue.py --inventory inventories/local --host-shared /srv/mvp/private

bench-queue: setup engine ## Seconds from a job's end to the next queued job's trainer start, the gate's cost, a preemption's phases (bench/results/queue.json)
	ansible-playbook site.yml
	python tests/reliability/jobqueue.py --inventory inventories/local --host-shared /srv/mvp/private --only "shared cluster" preempted --seconds-out bench/results/queue.json

bench-resume: setup engine ## A lost worker: each phase to the next attempt's first step, median of 3, beside the raw scripts' manual recovery; steps lost (bench/resume.py)
	ansible-playbook site.yml
	python bench/resume.py

bench-controller: setup engine ## The job controller's memory and head requests per minute with 1 and 20 runs (bench/results/controller.json)
	ansible-playbook site.yml
	python bench/controller.py --runs 20

bench-notify: setup ## Webhooks at the unit level: verdict to first delivery attempt with 1 and 20 runs, the pass while a receiver hangs (bench/results/notify.json)
	python bench/notify.py --rounds 30 --out bench/results/notify.json

bench-request: setup ## The strict request reader against yaml.safe_load, and its refusals of hostile documents (bench/results/request_read.json)
	python bench/request_read.py --repeat 100

bench-ledger: setup ## ledger.yml's summing over 1,000 job directories made in a tmp folder: seconds, peak RSS (bench/results/ledger.json); the job controller's passes keeping the ledgers of 1 and 20 running runs (bench/results/ledger_controller.json)
	python bench/ledger.py
	python bench/ledger_controller.py

bench-mlflow: setup engine ## What MLflow tracking adds per training step: CPU SFT with and without it, alternating (bench/results/mlflow.json)
	ansible-playbook site.yml
	python bench/mlflow.py

bench: setup engine ## Benchmarks (bench/run.py); writes bench/results/latest.json
	python bench/run.py

bench-scale: setup engine ## Ansible side over SSH against 8-64 sshd-only nodes x forks 5/16/64, then real Ray workers 1-16 with idle memory (bench/scale_ssh.py); writes bench/results/scale-ssh.json
	python bench/scale_ssh.py --sizes 8 16 32 64 --forks 5 16 64 --skip 32x5 --skip 64x5 --ray-sizes 1 4 8 16 --out bench/results/scale-ssh.json

bench-train: setup engine ## Training jobs through submit.yml vs ray job submit (bench/train.py), sft then grpo
	ansible-playbook site.yml
	python bench/train.py --workload sft --repeat 2
	python bench/train.py --workload grpo --repeat 1 --out bench/results/train-grpo.json

mlflow-screenshot: setup ## Headless Chromium (Debian's; apt-get installs it if missing) screenshot of the newest sft job's MLflow run page with its train/loss chart, checked for size, non-blank pixels and text (build/mlflow-run.png)
	python tests/ui/mlflow_screenshot.py --jobs-dir $(HOST_SHARED)/jobs --out build/mlflow-run.png

test: setup engine ## Every test: unit, lint, ansible-test sanity, syntax checks, molecule
	bash tests/run.sh

unit: setup
	bash tests/run.sh unit

lint: setup
	bash tests/run.sh lint

sanity: setup ## ansible-test sanity on the collection's plugins (own venv in build/)
	bash tests/run.sh sanity

syntax: setup
	bash tests/run.sh syntax

molecule: setup engine
	bash tests/run.sh molecule
