"""One Ansible version for the whole collection: ``meta/runtime.yml`` ``requires_ansible``, every role's
``min_ansible_version`` and the ansible-core the venvs pin (roles/job_controller/files/requirements.txt, which requirements.txt includes) agree.
"""
import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_requires_ansible_is_the_roles_minimum_and_admits_the_pinned_core():
    runtime = yaml.safe_load(_load(os.path.join(ROOT, "meta", "runtime.yml")))
    minimum = re.fullmatch(r">=\s*(\d+)\.(\d+)(?:\.\d+)?", runtime["requires_ansible"])
    assert minimum, runtime["requires_ansible"]
    required = (int(minimum.group(1)), int(minimum.group(2)))

    roles = {}
    for meta in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "main.yml"))):
        version = str(yaml.safe_load(_load(meta))["galaxy_info"]["min_ansible_version"])
        roles[meta] = tuple(int(part) for part in version.split(".")[:2])
    assert roles and set(roles.values()) == {required}, roles

    pinned = re.search(r"^ansible-core==(\d+)\.(\d+)\.\d+$",
                       _load(os.path.join(ROOT, "roles", "job_controller", "files", "requirements.txt")), re.M)
    assert pinned and (int(pinned.group(1)), int(pinned.group(2))) == required
