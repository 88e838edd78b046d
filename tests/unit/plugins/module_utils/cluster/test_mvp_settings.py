"""The old names of the settings release 0.1.0 read: the check's logic, its list, and that every entry playbook runs it
first (playbooks/old_names.yml)."""
import glob
import os
import re

import yaml
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_settings import (
    HOSTS_SHOWN, NEW_NAMES_RELEASE, OLD_NAMES_RELEASE, RENAMED, old_names_given)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


def _load(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _version(text):
    return tuple(int(part) for part in text.split("."))


class NamesOnly(dict):
    """A host's variables whose values must not be read (``mvp_internal_token`` is a secret)."""

    def __getitem__(self, key):
        raise AssertionError("the value of %s was read" % key)

    def get(self, key, default=None):
        raise AssertionError("the value of %s was read" % key)


def test_nothing_given_says_nothing():
    hosts = {"h1": {"ray_worker_cpus": 4, "mvp_shared_root": "/srv"}, "h2": set()}
    assert old_names_given(hosts) == []
    assert old_names_given({}) == []


def test_an_old_name_on_one_host_names_that_host_and_the_new_name():
    sentences = old_names_given({"h1": set(), "h2": {"mvp_ray_worker_cpus"}, "h3": set()})
    assert len(sentences) == 1
    assert sentences[0].startswith("mvp_ray_worker_cpus (given for h2) is now ray_worker_cpus (mvp.ray %s)"
                                   % NEW_NAMES_RELEASE)
    assert "h1" not in sentences[0] and "h3" not in sentences[0]


def test_an_old_name_given_with_e_is_said_once_for_every_host_and_values_are_never_read():
    hosts = {"h%d" % i: NamesOnly(mvp_internal_token="s3cret", mvp_verl_snapshots=[]) for i in range(5)}
    sentences = old_names_given(hosts)
    # Sorted by old name, one sentence each.
    assert [s.split(" ")[0] for s in sentences] == sorted(["mvp_internal_token", "mvp_verl_snapshots"])
    assert all("(given for every host)" in s for s in sentences)
    assert "is now ray_worker_secret" in sentences[0] and "is now verl_snapshot_sources" in sentences[1]


def test_an_old_name_on_many_hosts_names_the_first_ones_and_counts_the_rest():
    hosts = {"w%02d" % i: ({"mvp_require_nfs"} if i % 2 else set()) for i in range(12)}
    given = sorted(h for h, names in hosts.items() if names)
    sentence, = old_names_given(hosts)
    assert sentence.startswith("mvp_require_nfs (given for %s and %d more hosts)"
                               % (", ".join(given[:HOSTS_SHOWN]), len(given) - HOSTS_SHOWN))


def test_an_old_name_that_fed_two_roles_names_both_new_names():
    sentence, = old_names_given({"h1": {"mvp_ray_ready_timeout"}})
    assert "is now %s (" % " and ".join(RENAMED["mvp_ray_ready_timeout"]) in sentence
    assert set(RENAMED["mvp_ray_ready_timeout"]) == {"ray_head_ready_timeout", "ray_worker_ready_timeout"}


def test_the_versions_agree_with_the_releases_and_galaxy():
    """The old names were read by a release (changelog.yaml); they are refused from a later version not yet
    released, which is not below galaxy.yml's version (the collection's current release)."""
    released = set(_load("changelogs/changelog.yaml")["releases"])
    assert OLD_NAMES_RELEASE in released
    assert NEW_NAMES_RELEASE not in released
    assert _version(NEW_NAMES_RELEASE) > max(_version(v) for v in released)
    assert _version(NEW_NAMES_RELEASE) > _version(_load("galaxy.yml")["version"]) >= _version(OLD_NAMES_RELEASE)
    with open(os.path.join(ROOT, "plugins/filter/mvp_old_names.yml"), encoding="utf-8") as handle:
        assert str(yaml.safe_load(handle)["DOCUMENTATION"]["version_added"]) == NEW_NAMES_RELEASE
    # No plugin claims a version past the coming one: its version_added is a release or the coming release.
    claimed = {}
    for path in glob.glob(os.path.join(ROOT, "plugins", "*", "*.*")):
        with open(path, encoding="utf-8") as handle:
            for version in re.findall(r"^\s*version_added:\s*[\"']?([0-9.]+)", handle.read(), re.M):
                claimed.setdefault(version, []).append(os.path.relpath(path, ROOT))
    assert claimed
    assert {v: paths for v, paths in claimed.items() if v not in released | {NEW_NAMES_RELEASE}} == {}


def test_every_new_name_is_a_knob_of_its_role_and_no_old_name_is_read_or_set():
    """A role declares each new name; no code or inventory of the checkout still sets or reads an old name (else
    failing on it would refuse a name that works, or the check would refuse the shipped inventories)."""
    roles = sorted(os.listdir(os.path.join(ROOT, "roles")), key=len, reverse=True)
    for old, news in RENAMED.items():
        for new in news:
            role = next(r for r in roles if new.startswith(r + "_"))
            assert new in _load(os.path.join("roles", role, "defaults", "main.yml")), (old, new)
    old_re = re.compile(r"\b(%s)\b" % "|".join(sorted(RENAMED)))
    found = []
    for pattern in ("*.yml", "playbooks/**/*.yml", "roles/**/*.yml", "roles/**/*.j2", "inventories/**/*.yml",
                    "molecule/**/*.yml", "jobspecs/*", "plugins/**/*.py", "bench/*.py", "tests/**/*.py"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            # The list itself and the tests of the check name them.
            if os.path.basename(path).startswith(("mvp_settings.py", "test_mvp_settings")) or not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as handle:
                code = "".join(line for line in handle if not line.lstrip().startswith("#"))  # comments may cite one
            found += ["%s: %s" % (os.path.relpath(path, ROOT), m) for m in old_re.findall(code)]
    assert found == []


def test_every_entry_playbook_runs_the_check_first():
    """playbooks/*.yml start by importing old_names.yml; site.yml by importing one that does; the top-level
    playbooks import one of playbooks/."""
    first = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))):
        name = os.path.basename(path)
        if name != "old_names.yml":
            first[name] = _load(os.path.join("playbooks", name))[0].get("ansible.builtin.import_playbook")
    checked = {name for name, imported in first.items() if imported == "old_names.yml"}
    assert set(first) - checked == {"site.yml"}
    assert first["site.yml"] in checked
    for path in glob.glob(os.path.join(ROOT, "*.yml")):
        if os.path.basename(path) in ("galaxy.yml",):
            continue
        plays = _load(os.path.basename(path))
        imported = plays[0]["ansible.builtin.import_playbook"]
        assert len(plays) == 1 and imported.startswith("playbooks/"), path
        assert os.path.basename(imported) in set(checked) | {"site.yml"}, path
