"""The ``platform_unsupported`` cause (module_utils mvp_verdict): a failure inside the node's platform layer.

Each message below is the text torch, triton, transformers or vLLM raises (the first one recorded in
tests/data/verdicts/ref-policy-no-nvidia-driver.json, issue 41); the expected layer and missing
piece are the rule's own, the groups taken from the message itself.
"""
import json
import os

import pytest

import mvp_verdict

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
RECORDED = os.path.join(ROOT, "tests", "data", "verdicts", "ref-policy-no-nvidia-driver.json")
HYDRA = "Error executing job with overrides: ['actor_rollout_ref.actor.use_kl_loss=true']"
FRAME = '  File "/opt/mvp/venv/lib/python3.11/site-packages/torch/x.py", line 398, in f'

# (exception line, layer, missing, words of the message the missing piece must carry)
MESSAGES = [
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed "
     "a driver from http://www.nvidia.com/Download/index.aspx", "torch CUDA runtime", "NVIDIA driver", []),
    ("OSError: libcuda.so.1: cannot open shared object file: No such file or directory", "CUDA driver library",
     "libcuda.so.1", ["libcuda.so.1"]),
    ("RuntimeError: No CUDA GPUs are available", "CUDA runtime", "a CUDA GPU", []),
    ("RuntimeError: CUDA error: no CUDA-capable device is detected", "CUDA runtime", "a CUDA GPU", []),
    ("AssertionError: Torch not compiled with CUDA enabled", "torch build", "CUDA", []),
    ("RuntimeError: Distributed package doesn't have NCCL built in", "torch.distributed", "NCCL", []),
    ("NotImplementedError: Could not run 'aten::_flash_attention_forward' with arguments from the 'CPU' backend. "
     "This could be because the operator doesn't exist for this backend", "torch kernels", None,
     ["aten::_flash_attention_forward", "CPU"]),
    ("RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'", "torch kernels", None, ["addmm_impl_cpu_", "Half"]),
    ("RuntimeError: 0 active drivers ([]). There should only be one.", "triton", "a GPU driver", []),
    ("ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package "
     "flash_attn seems to be not installed. Please refer to the documentation", "attention kernels", None,
     ["the package flash_attn seems to be not installed"]),
    ("ModuleNotFoundError: No module named 'flash_attn'", "image packages", None, ["flash_attn"]),
    ("RuntimeError: Failed to infer device type", "vLLM platform", "a device vLLM supports", []),
    ("ValueError: Sleep mode is not supported on current platform.", "current platform", "Sleep mode", ["Sleep mode"]),
    # The matrix's cases (tests/matrix) that verl cannot run on CPU, as their jobs printed them.
    ("ModuleNotFoundError: No module named 'sglang'", "image packages", None, ["sglang"]),
    ("ValueError: The module has CPU parameters or buffers when sync_module_states=True, which requires them to be "
     "on GPU. Please specify the `device_id` argument or move the module to GPU before passing it to FSDP.", "FSDP1",
     None, ["fsdp2"]),
]


def test_pydantics_validator_message_on_the_next_line_is_read_with_its_exception_line():
    """verl's ModelConfig refuses sleep mode in a pydantic validator: its message follows the exception line."""
    validation = "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
    detail = "  Value error, Sleep mode is not supported on current platform [type=value_error, input_value={}]"
    text = log("Total training steps: 2", "Traceback (most recent call last):", FRAME, validation, detail, HYDRA)
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=text, steps=[])
    assert (record["verdict"], record["cause"]) == ("failed", "platform_unsupported")
    assert record["evidence"][0]["text"] == "layer: current platform; missing: Sleep mode"
    # The same validation error for a key the platform has nothing to do with stays the configuration's.
    other = log("Total training steps: 2", "Traceback (most recent call last):", FRAME, validation,
                "  Value error, micro batch 3 does not divide 4 [type=value_error]", HYDRA)
    assert mvp_verdict.classify("FAILED", exit_code=1, log_text=other, steps=[])["cause"] == "config_rejected"


def log(*texts):
    return "\n".join(texts) + "\n"


@pytest.mark.parametrize("line, layer, missing, words", MESSAGES, ids=[m[0].split(":")[0] + "-" + str(i)
                                                                        for i, m in enumerate(MESSAGES)])
def test_a_platform_failure_names_its_layer_and_missing_piece_not_the_configuration(line, layer, missing, words):
    # Hydra's "Error executing job" line is there as in every failed trainer start: without the
    # platform rule, these were config_rejected (a ValueError, an AssertionError) or unknown.
    text = log("Total training steps: 2", "Traceback (most recent call last):", FRAME, line, HYDRA)
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=text, steps=[])
    assert (record["verdict"], record["cause"]) == ("failed", "platform_unsupported")
    first = record["evidence"][0]
    assert first["source"] == "platform layer" and first["text"].startswith("layer: %s; missing: " % layer)
    found = first["text"].split("; missing: ", 1)[1]
    for word in words + ([missing] if missing else []):
        assert word in found and word in record["summary"]
    assert layer in record["summary"] and "trained 0 of 2 steps" in record["summary"]
    assert record["evidence"][1:] == [{"file": "logs/driver.log", "line": 3, "text": FRAME.strip()},
                                      {"file": "logs/driver.log", "line": 4, "text": line}]
    assert "platform_unsupported" in mvp_verdict.CAUSES


def test_the_recorded_reference_policy_failure_is_platform_unsupported_with_where_it_failed():
    """The run issue 41 reports: its entrypoint (the rules before this cause) judged it config_rejected."""
    with open(RECORDED) as handle:
        case = json.load(handle)
    assert "MVP_VERDICT=FAILED [config_rejected]" in case["log_tail"]
    record = mvp_verdict.classify(case["status"], exit_code=case["exit_code"], message=case["message"],
                                  log_text=case["planned_line"] + "\n" + case["log_tail"], steps=case["steps"],
                                  user_files=case["user_files"], actors=case["actors"], nodes=case["nodes"],
                                  start_ms=case["start_ms"], end_ms=case["end_ms"])
    assert record["cause"] == "platform_unsupported"
    assert record["evidence"][0]["text"] == "layer: torch CUDA runtime; missing: the NVIDIA driver"
    assert "_fsdp_param.py" in record["evidence"][1]["text"] and "_init_sharded_param" in record["evidence"][1]["text"]
    assert record["evidence"][2]["text"].startswith("RuntimeError: Found no NVIDIA driver")
    assert record["steps"]["planned"] == 2 and record["steps"]["logged"] == 0


def test_a_platform_failure_is_never_restarted():
    from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_restart

    assert "platform_unsupported" not in mvp_verdict.RETRYABLE_CAUSES
    decision = mvp_restart.decide({"submission_id": "grpo-1", "request": {"workload": "grpo", "submission_id": "grpo-1"},
                                   "max_restarts": 2},
                                  {"verdict": "failed", "cause": "platform_unsupported", "summary": "s", "steps": {}})
    assert decision["restart"] is False and "platform_unsupported" in decision["why"]


def test_an_actors_line_counts_and_its_steps_are_told():
    line = "RuntimeError: No CUDA GPUs are available"
    prefixed = "\x1b[36m(WorkerDict pid=449, ip=172.18.0.2)\x1b[0m " + line
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=log("Total training steps: 8", prefixed),
                                  steps=[1, 2, 3])
    assert record["cause"] == "platform_unsupported" and "trained 3 of 8 steps" in record["summary"]
    assert record["evidence"][-1] == {"file": "logs/driver.log", "line": 2, "text": prefixed}


def test_rays_message_is_read_when_the_log_has_no_such_line():
    message = "Job entrypoint command failed with exit code 1, last available logs:\n" \
              "AssertionError: Torch not compiled with CUDA enabled"
    record = mvp_verdict.classify("FAILED", exit_code=1, message=message, log_text=log("x"), steps=[])
    assert record["cause"] == "platform_unsupported"
    assert record["evidence"][-1] == {"file": "ray job message", "line": 2, "text": message.splitlines()[1]}


@pytest.mark.parametrize("noise", [
    "/venv/torch/cuda/__init__.py:180: UserWarning: CUDA initialization: Found no NVIDIA driver on your system.",
    "(Worker pid=904) WARNING 11-26 02:26:08 [cpu_worker.py:177] sleep mode is not supported on CPU, ignore it.",
    "MVP_VERDICT=FAILED [platform_unsupported] RuntimeError: No CUDA GPUs are available",
])
def test_warnings_and_the_projects_own_lines_are_not_platform_failures(noise):
    bad = "ValueError: [actor] Please set at least one of 'actor.ppo_micro_batch_size'"
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=log(noise, "Traceback (most recent call last):", bad),
                                  steps=[])
    assert record["cause"] == "config_rejected" and bad in record["summary"]


def test_the_users_reward_function_is_named_before_the_platform():
    reward = "/private/user/code/rewards/mine.py"
    text = log("Traceback (most recent call last):", '  File "%s", line 5, in compute_score' % reward,
               "RuntimeError: Found no NVIDIA driver on your system.")
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=text, steps=[1], user_files=[reward])
    assert record["cause"] == "user_code" and "line 5" in record["summary"]


def test_a_run_that_trained_every_step_is_trained_whatever_it_printed():
    text = log("Total training steps: 2", "RuntimeError: Found no NVIDIA driver on your system.")
    assert mvp_verdict.classify("SUCCEEDED", exit_code=0, log_text=text, steps=[1, 2])["verdict"] == "trained"
