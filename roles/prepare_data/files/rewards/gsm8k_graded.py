"""A graded GSM8K reward for smoke tests: a random model gets varied, non-zero scores.

verl's GSM8K rule reward gives 1 for an exact final answer and 0 otherwise, so a
randomly initialised model scores 0 on every sample: GRPO's group advantages are
then 0 and nothing is learned (docs/training-on-cpu.md). This reward keeps the exact
answer worth 1.0 and grades everything short of it, so a tiny model's samples
differ in score and the policy gradient is not zero.

Use it through verl's custom reward hook (``reward_fn_path`` in a job request, or
``reward.custom_reward_function.path`` in verl 0.9.1); the function is :func:`compute_score`, the name
verl calls by default. Pure Python, no imports beyond the standard library.
"""

import re

_NUMBER = re.compile(r"-?\d[\d,]*\.?\d*")
_FINAL = re.compile(r"####\s*(-?[\d,]*\.?\d+)")


def _to_float(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """Score one response in [0, 1].

    :param data_source: str, the dataset name (unused: any GSM8K-format row).
    :param solution_str: str, the decoded response.
    :param ground_truth: str, the number after ``####`` in the reference answer.
    :param extra_info: dict or None (unused).
    :returns: float: 1.0 when the last ``#### N`` equals the ground truth; otherwise
        0.2 for a ``####`` marker, up to 0.4 for how close the last number is to
        the ground truth (``1 / (1 + |a - b| / max(1, |b|))``), and up to 0.3 for
        the share of the ground truth's digits that appear in the response.
    """
    text = solution_str or ""
    truth = _to_float(str(ground_truth))
    finals = _FINAL.findall(text)
    if finals and truth is not None and _to_float(finals[-1]) == truth:
        return 1.0
    score = 0.2 if "####" in text else 0.0
    numbers = [_to_float(n) for n in _NUMBER.findall(text)]
    numbers = [n for n in numbers if n is not None]
    if numbers and truth is not None:
        score += 0.4 / (1.0 + abs(numbers[-1] - truth) / max(1.0, abs(truth)))
    digits = [d for d in str(ground_truth) if d.isdigit()]
    if digits:
        score += 0.3 * sum(1 for d in digits if d in text) / len(digits)
    return round(min(score, 0.99), 6)
