"""No false refusal at the front door: every shipped JobSpec and every override set of verl's own example launch
calls (tests/data/verl_examples_0.9.1.json, the corpus the peer suite uses) pass the strict reader's bounds, as a
JobSpec file and as values given with -e."""
import json
import os

import pytest
import yaml

from ansible_collections.mvp.ray.plugins.module_utils.request import mvp_request_read

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
with open(os.path.join(ROOT, "tests", "data", "verl_examples_0.9.1.json"), encoding="utf-8") as _handle:
    EXAMPLES = json.load(_handle)


def test_the_corpus_is_there():
    assert len(EXAMPLES) >= 100


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_every_verl_example_passes_as_a_jobspec_and_as_e_values(index):
    example = EXAMPLES[index]
    overrides = dict(item.split("=", 1) for item in example["overrides"] if "=" in item)
    request = {"workload": "grpo", "trainer_overrides": overrides}
    text = yaml.safe_dump(request, default_flow_style=False)
    assert mvp_request_read.load_text(text.encode("utf-8"), "jobspec example-%d" % index) == request
    mvp_request_read.check_value(overrides, "-e trainer_overrides")
