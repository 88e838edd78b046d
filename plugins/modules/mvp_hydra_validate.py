#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: check trainer overrides against a verl snapshot's Hydra config."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mvp_hydra_validate
short_description: Compose verl trainer overrides with Hydra against a code snapshot's config
description:
  - Runs C(hydra.compose) with the snapshot's own C(verl/trainer/config) and the
    job's overrides. A misspelled key (C(Could not override 'trainer.total_epoch'))
    or a value whose type differs from the default's fails the module, naming the key.
  - Needs hydra-core and omegaconf (not torch) in the interpreter. Read-only; check mode supported.
options:
  config_dir:
    description: Absolute path of C(<snapshot>/verl/trainer/config).
    type: path
    required: true
  config_name:
    description: Hydra config name (C(ppo_trainer), C(sft_trainer_engine)).
    type: str
    required: true
  overrides:
    description: Overrides as C(key=value) strings, exactly as the entrypoint passes them.
    type: list
    elements: str
    default: []
author: MVP project
"""

EXAMPLES = r"""
- name: Validate | Compose the GRPO overrides
  mvp_hydra_validate:
    config_dir: /private/common/code/verl/verl-0.9.1/verl/trainer/config
    config_name: ppo_trainer
    overrides: [algorithm.adv_estimator=grpo, trainer.total_epochs=1]
"""

RETURN = r"""
errors:
  description: Problems found (empty on success).
  type: list
  elements: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.mvp_hydra import validate_overrides


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            config_dir=dict(type="path", required=True),
            config_name=dict(type="str", required=True),
            overrides=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not os.path.isfile(os.path.join(params["config_dir"], params["config_name"] + ".yaml")):
        module.fail_json(msg="%s/%s.yaml does not exist: the code snapshot has no such trainer config"
                             % (params["config_dir"], params["config_name"]), errors=[])
    try:
        errors = validate_overrides(params["config_dir"], params["config_name"], params["overrides"])
    except ImportError as exc:
        module.fail_json(msg="hydra-core/omegaconf missing on the head (%s)" % exc, errors=[])
    if errors:
        module.fail_json(msg="trainer_overrides do not fit %s/%s.yaml: %s"
                             % (params["config_dir"], params["config_name"], "; ".join(errors)),
                         errors=errors)
    module.exit_json(changed=False, errors=[])


if __name__ == "__main__":
    main()
