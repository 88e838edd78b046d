"""images/node/build.sh --print-tag: the tag follows the recipe's content, not where the checkout lives."""
import os
import shutil
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def tag(images_dir, *args):
    out = subprocess.run(["bash", os.path.join(images_dir, "node", "build.sh"), "--print-tag"] + list(args),
                         capture_output=True, text=True, check=True, env=dict(os.environ, MVP_IMAGE_REPO="t"))
    return out.stdout.strip()


def copy_images(dest):
    shutil.copytree(os.path.join(ROOT, "images"), dest,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    return dest


def test_two_checkouts_give_the_same_tags_and_a_recipe_change_a_new_one(tmp_path):
    first = copy_images(str(tmp_path / "a" / "images"))
    second = copy_images(str(tmp_path / "deeper" / "b" / "images"))
    assert tag(first) == tag(second)
    assert tag(first, "--variant", "verl-cpu") == tag(second, "--variant", "verl-cpu")
    with open(os.path.join(second, "node", "requirements.txt"), "a", encoding="utf-8") as handle:
        handle.write("# changed\n")
    assert tag(first) != tag(second)
    assert tag(first, "--variant", "verl-cpu") != tag(second, "--variant", "verl-cpu")
