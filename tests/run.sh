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
      -e mvp_docker_network=mvp-devcheck-net -e "mvp_node_image_base=$base" >/tmp/mvp-devcheck.log 2>&1 \
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
# Every scenario runs even when one fails, each timed, so CI says which one failed and
# where the minutes go; the stage fails when any scenario failed.
stage_molecule() {
  local rc=0 scenario start
  for scenario in $(ls -d molecule/*/molecule.yml | cut -d/ -f2); do
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

# With other stages, unit (one pytest process) runs beside lint, sanity and syntax on the second core
# (CI time); its output is printed, and its result counted, when it has ended - before molecule starts.
unit_pid=""
if [[ " ${stages[*]} " == *" unit "* ]] && [ ${#stages[@]} -gt 1 ]; then
  unit_log=$(mktemp)
  unit_start=$SECONDS
  (stage_unit >"$unit_log" 2>&1) &
  unit_pid=$!
fi
finish_unit() {
  [ -n "$unit_pid" ] || return 0
  local rc=0
  wait "$unit_pid" || rc=$?
  unit_pid=""
  echo "=== stage: unit (ran beside the stages before) ==="
  cat "$unit_log"; rm -f "$unit_log"
  record unit $rc $((SECONDS - unit_start))
}

for stage in "${stages[@]}"; do
  if [ "$stage" = unit ] && [ -n "$unit_pid" ]; then
    continue
  fi
  [ "$stage" != molecule ] || finish_unit
  echo "=== stage: $stage ==="
  start=$SECONDS
  rc=0
  "stage_$stage" || rc=$?
  record "$stage" $rc $((SECONDS - start))
done
finish_unit
[ $failed -eq 0 ] || echo "failed stages: ${failed_names[*]}"
echo "stages: $passed passed, $failed failed"
[ $failed -eq 0 ]
