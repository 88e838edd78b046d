"""Unit tests of the example graded GSM8K reward (roles/prepare_data/files/rewards/gsm8k_graded.py)."""
import importlib.util
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location(
    "gsm8k_graded", os.path.join(ROOT, "roles/prepare_data/files/rewards/gsm8k_graded.py"))
graded = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(graded)


def test_exact_final_answer_scores_one():
    assert graded.compute_score("openai/gsm8k", "so 3 + 4 = 7\n#### 1,204", "1204") == 1.0


@pytest.mark.parametrize("text", ["", "no digits here", "#### 5", "12 apples", "#### 1203", "1 2 0 4"])
def test_anything_short_of_the_answer_scores_below_one(text):
    assert 0.0 <= graded.compute_score("openai/gsm8k", text, "1204") < 1.0


def test_scores_grade_closeness_so_random_samples_differ():
    truth = "42"
    far = graded.compute_score("d", "1000", truth)
    near = graded.compute_score("d", "41", truth)
    marked_near = graded.compute_score("d", "#### 41", truth)
    nothing = graded.compute_score("d", "words only", truth)
    assert nothing == 0.0 < far < near < marked_near < 1.0
