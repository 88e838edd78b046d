#!/usr/bin/env bash
# scripts/sanity.sh: `ansible-test sanity` on the collection's plugins (modules,
# module_utils, filters, doc fragments).
#
# ansible-test must run inside ansible_collections/<namespace>/<name>/, outside any git
# work tree but its own: the tracked files are copied to
# $TMPDIR/mvp-sanity.*/ansible_collections/mvp/ray (the checkout's collections/ link
# resolves to the checkout, which ansible-test cannot place). It runs
# from its own venv (build/sanity-venv, the ansible-core pinned in roles/job_controller/files/requirements.txt) with
# --requirements, so the pinned linters of each test never touch the project venv.
# Each test's venv gets pip from scripts/get_pip_standin.py (ansible-test's own
# bootstrap script lives on a host this network does not reach). Known exceptions:
# tests/sanity/ignore-<ansible-core major.minor>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
core=$(grep -E '^ansible-core==' roles/job_controller/files/requirements.txt | cut -d= -f3)
venv=$root/build/sanity-venv
if [ ! -x "$venv/bin/ansible-test" ] || ! "$venv/bin/python" -c "import ansible, sys; sys.exit(ansible.__version__ != '$core')"; then
  rm -rf "$venv"
  python -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "ansible-core==$core"
fi
pip_version=$(grep -oE "pip='[0-9.]+'" "$("$venv/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" | head -1 | cut -d"'" -f2)
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
[ -s "$cache" ] || { mkdir -p "$(dirname "$cache")"; cp scripts/get_pip_standin.py "$cache"; }
top=$(mktemp -d "${TMPDIR:-/tmp}/mvp-sanity.XXXXXX")
trap 'rm -rf "$top"' EXIT
work=$top/ansible_collections/mvp/ray
mkdir -p "$work"
git ls-files -z --cached --others --exclude-standard | grep -zv '^collections/' | xargs -0 cp --parents -P -t "$work"
cd "$work"
py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PATH="$venv/bin:$PATH" ansible-test sanity --requirements --python "$py" --color no plugins/
