"""Every mvp_* setting the roles and playbooks read is declared once, in a topic file of inventories/common/all."""
import glob
import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COMMON = os.path.join(ROOT, "inventories/common/all")
NAME = re.compile(r"\bmvp_[a-z0-9_]+\b(?!\.py)")
# Per-host settings (set on a node in hosts.yml, read through hostvars) and command-line
# flags (-e, tested with `is defined`), each documented where it is read.
PER_HOST_OR_FLAG = {"mvp_container_gpus", "mvp_down_purge_confirm"}
# Literal strings that look like settings, in roles' literal defaults: the container label holding each
# node's plan, the file name of the Ray auth token in the Ray temp dir, the job tools' folder.
LITERALS = {"mvp_plan", "mvp_auth_token", "mvp_tools", "mvp_gcs"}


def declared():
    """Return {setting: [files declaring it]} over the topic files."""
    found = {}
    for path in sorted(glob.glob(os.path.join(COMMON, "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            for key in yaml.safe_load(handle) or {}:
                found.setdefault(key, []).append(os.path.basename(path))
    return found


def sources():
    """Yield (path, text) of every file whose Jinja reads settings: roles, playbooks, their role mappings, templates."""
    patterns = ["roles/*/defaults/*.yml", "roles/*/vars/*.yml", "roles/*/tasks/*.yml", "roles/*/templates/*",
                "playbooks/*.yml", "playbooks/vars/*.yml", "playbooks/templates/*", "*.yml"]
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(path, encoding="utf-8") as handle:
                yield os.path.relpath(path, ROOT), handle.read()


def test_each_setting_is_declared_in_exactly_one_topic_file():
    twice = {k: v for k, v in declared().items() if len(v) > 1}
    assert twice == {}
    assert {os.path.basename(p) for p in glob.glob(os.path.join(COMMON, "*.yml"))} == {
        "00-mvp-storage.yml", "00-mvp-ray.yml", "00-mvp-auth.yml", "00-mvp-images.yml", "00-mvp-jobs.yml",
        "00-mvp-workloads.yml", "00-mvp-tracking.yml"}


def test_every_setting_read_is_declared():
    known = set(declared()) | PER_HOST_OR_FLAG | LITERALS
    unknown = {}
    for path, text in sources():
        # Only names inside Jinja expressions or YAML conditions count (comments mention settings too).
        code = "\n".join(line.split(" #")[0] for line in text.splitlines() if not line.lstrip().startswith("#"))
        for name in set(NAME.findall(code)) - known:
            if "{{" in code or "when:" in code or "that:" in code:
                unknown.setdefault(name, []).append(path)
    # Names that are Ansible modules or filters of this project, not settings.
    plugins = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, "plugins/modules/*.py"))}
    filters = set()
    for path in glob.glob(os.path.join(ROOT, "plugins/filter/*.py")):
        with open(path, encoding="utf-8") as handle:
            filters |= set(re.findall(r'"(mvp_[a-z0-9_]+)":', handle.read()))
    unknown = {k: v for k, v in unknown.items() if k not in plugins | filters}
    assert unknown == {}


def test_no_setting_is_read_through_default():
    offenders = []
    for path, text in sources():
        for match in re.finditer(r"\b(mvp_[a-z0-9_]+)\s*\|\s*default\(", text):
            offenders.append("%s: %s" % (path, match.group(1)))
    assert offenders == []
