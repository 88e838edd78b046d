#!/usr/bin/env bash
# tests/run.sh [stage...]: run the test stages (default: all) and fail if any fails.
# Stages: unit (pytest), lint (yamllint, ansible-lint production profile, antsibull-docs and
# antsibull-changelog lint),
# sanity (ansible-test sanity on the collection's plugins, scripts/sanity.sh),
# syntax (--syntax-check of every playbook with every inventory),
# molecule (full-stack scenarios with real containers and a real Ray cluster).
# Expects the project venv on PATH (make test does that).
set -uo pipefail
cd "$(dirname "$0")/.."

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(unit lint sanity syntax molecule)
passed=0
failed=0
failed_names=()

stage_unit() { python -m pytest -q tests/unit; }
# The collection's documentation (modules, filters, roles' argument specs: schema, markup,
# references) with antsibull-docs, beside ansible-lint so the stage takes no longer; then the
# changelog fragments and the release file with antsibull-changelog.
stage_lint() {
  local rc=0 docs_log docs_pid
  docs_log=$(mktemp)
  antsibull-docs lint-collection-docs --plugin-docs . >"$docs_log" 2>&1 &
  docs_pid=$!
  yamllint --strict . && ansible-lint --profile production || rc=1
  if wait "$docs_pid"; then
    echo "antsibull-docs lint-collection-docs --plugin-docs .: ok"
  else
    echo "antsibull-docs lint-collection-docs --plugin-docs .: FAILED"; rc=1
  fi
  cat "$docs_log"; rm -f "$docs_log"
  antsibull-changelog lint && antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml || rc=1
  return $rc
}
stage_sanity() { bash scripts/sanity.sh; }
stage_syntax() {
  local rc=0 inv pbs
  # Every playbook with every inventory, one ansible-playbook run per inventory (the unit stage's
  # test_collection checks the installed copy the same way).
  pbs=$(ls *.yml playbooks/*.yml | grep -vx galaxy.yml)
  for inv in inventories/local inventories/dev inventories/prod; do
    # shellcheck disable=SC2086
    if ansible-playbook --syntax-check -i "$inv" $pbs >/dev/null 2>/tmp/mvp-syntax.err; then
      echo "syntax ok: $(echo $pbs | wc -w) playbooks with $inv"
    else
      echo "syntax FAILED with $inv"; cat /tmp/mvp-syntax.err; rc=1
    fi
  done
  # The dev inventory's image and container plan in check mode, with this machine standing
  # in for h1 and a base image it does not have (check mode pulls and builds nothing, so the
  # result does not depend on which images this machine holds).
  local base=mvp-devcheck-base:absent
  if ansible-playbook playbooks/cluster.yml -i inventories/dev --check --tags prereq,containers -l h1 \
      -e ansible_connection=local -e "ansible_python_interpreter=$(command -v python)" \
      -e mvp_docker_network=mvp-devcheck-net -e "docker_host_node_image_base=$base" >/tmp/mvp-devcheck.log 2>&1 \
      && grep -Eq "mvp-verl-gpu:[0-9a-f]{12} would be built FROM $base" /tmp/mvp-devcheck.log \
      && [ "$(grep -Ec "image: mvp-verl-gpu:[0-9a-f]{12}$" /tmp/mvp-devcheck.log)" = 3 ] \
      && [ "$(grep -A4 -- 'device_ids:' /tmp/mvp-devcheck.log | grep -Eo "'[0-9]+'" | tr -d "'\n")" = 01234567 ] \
      && [ "$(grep -c 'shm_size: 16g' /tmp/mvp-devcheck.log)" = 3 ] \
      && [ "$(grep -c -- '- memlock:-1:-1' /tmp/mvp-devcheck.log)" = 3 ]; then
    echo "check mode ok: dev plan (GPU image from its recipe; GPU device requests, 16g /dev/shm and memlock on all 3 nodes)"
  else
    echo "check mode FAILED: dev container plan"; tail -30 /tmp/mvp-devcheck.log; rc=1
  fi
  return $rc
}
# The scenarios in this order: the light ones (no training, no timed fault bounds) first, so the static
# stages can run beside them; then the fault table, local and train on a quiet machine. A scenario not
# named here runs last.
SCENARIOS=(image prod faults local train)
LIGHT_SCENARIOS=" image prod "
scenario_list() {
  local s found
  found=$(ls -d molecule/*/molecule.yml | cut -d/ -f2)
  for s in "${SCENARIOS[@]}"; do
    grep -qx "$s" <<<"$found" && echo "$s"
  done
  for s in $found; do
    [[ " ${SCENARIOS[*]} " == *" $s "* ]] || echo "$s"
  done
}
# Every scenario runs even when one fails, each timed, so CI says which one failed and
# where the minutes go; the stage fails when any scenario failed. Before the first scenario that is not
# light, the stages running in the background are waited for and reported (finish_background).
stage_molecule() {
  local rc=0 scenario start
  for scenario in $(scenario_list); do
    [[ "$LIGHT_SCENARIOS" == *" $scenario "* ]] || finish_background
    start=$SECONDS
    echo "--- molecule scenario: $scenario ---"
    if molecule test -s "$scenario"; then
      echo "--- molecule scenario $scenario: passed in $((SECONDS - start)) s ---"
    else
      echo "--- molecule scenario $scenario: FAILED after $((SECONDS - start)) s ---"; rc=1
    fi
  done
  return $rc
}

record() {  # record <stage> <rc> <seconds>
  if [ "$2" -eq 0 ]; then
    echo "=== stage $1: passed in $3 s ==="
    passed=$((passed + 1))
  else
    echo "=== stage $1: FAILED after $3 s ==="
    failed=$((failed + 1))
    failed_names+=("$1")
  fi
}

# With molecule among the stages (CI time), the other stages run in the background in two lines, one per
# core: unit (one pytest process), and lint, sanity, syntax one after the other - beside the light
# scenarios. Each stage's output is printed, and its result counted, when finish_background waits for
# them (before the first scenario that is not light, or at the end). Without molecule, unit alone runs
# beside the others, as before.
bg_dir=""
bg_pids=()
in_stages() { [[ " ${stages[*]} " == *" $1 "* ]]; }
run_logged() {  # run_logged <stage>...: each stage's output, rc and seconds into $bg_dir/<stage>.{log,rc,s}
  local stage start rc
  for stage in "$@"; do
    start=$SECONDS
    rc=0
    "stage_$stage" >"$bg_dir/$stage.log" 2>&1 || rc=$?
    echo "$rc" >"$bg_dir/$stage.rc"
    echo "$((SECONDS - start))" >"$bg_dir/$stage.s"
  done
}
background=()
if in_stages unit && [ ${#stages[@]} -gt 1 ]; then
  bg_dir=$(mktemp -d)
  if in_stages molecule; then
    for stage in lint sanity syntax; do
      in_stages "$stage" && background+=("$stage")
    done
  fi
  (run_logged unit) &
  bg_pids+=($!)
  if [ ${#background[@]} -gt 0 ]; then
    (run_logged "${background[@]}") &
    bg_pids+=($!)
  fi
  background=(unit "${background[@]}")
fi
finish_background() {
  [ ${#bg_pids[@]} -gt 0 ] || return 0
  local pid stage
  for pid in "${bg_pids[@]}"; do
    wait "$pid" || true
  done
  bg_pids=()
  for stage in "${background[@]}"; do
    echo "=== stage: $stage (ran in the background) ==="
    cat "$bg_dir/$stage.log"
    record "$stage" "$(cat "$bg_dir/$stage.rc" 2>/dev/null || echo 1)" "$(cat "$bg_dir/$stage.s" 2>/dev/null || echo 0)"
  done
  rm -rf "$bg_dir"
}

for stage in "${stages[@]}"; do
  [[ " ${background[*]} " != *" $stage "* ]] || continue
  echo "=== stage: $stage ==="
  start=$SECONDS
  rc=0
  "stage_$stage" || rc=$?
  record "$stage" $rc $((SECONDS - start))
done
finish_background
[ $failed -eq 0 ] || echo "failed stages: ${failed_names[*]}"
echo "stages: $passed passed, $failed failed"
[ $failed -eq 0 ]
