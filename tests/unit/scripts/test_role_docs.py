"""scripts/role_docs.py: role READMEs carry the variable tables of their argument specs."""
import importlib.util
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("role_docs", os.path.join(ROOT, "scripts/role_docs.py"))
role_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(role_docs)


def test_every_role_readme_is_up_to_date():
    assert role_docs.main(["--check"]) == 0


def test_a_new_role_gets_a_readme_with_one_row_per_option(tmp_path):
    role = tmp_path / "roles" / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "defaults").mkdir()
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    short_description: Demo role\n    options:\n"
        "      demo_b:\n        type: list\n        elements: str\n        description: Bee | with a pipe.\n"
        "      demo_a:\n        type: int\n        required: true\n        description: >-\n          Ay\n          on two lines.\n")
    (role / "defaults" / "main.yml").write_text("demo_b: [x, y]\n")
    assert role_docs.main(["--roles-dir", str(tmp_path / "roles")]) == 0
    text = (role / "README.md").read_text()
    assert text.startswith("# demo\n\nDemo role\n")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == ["| `demo_a` | int | yes | - | Ay on two lines. |",
                    "| `demo_b` | list of str | no | `[x, y]` | Bee \\| with a pipe. |"]
    # A second run changes nothing, and text outside the markers is kept.
    (role / "README.md").write_text(text + "\nKept.\n")
    assert role_docs.main(["--check", "--roles-dir", str(tmp_path / "roles")]) == 0
    (role / "defaults" / "main.yml").write_text("demo_b: [z]\n")
    assert role_docs.main(["--check", "--roles-dir", str(tmp_path / "roles")]) == 1
    assert role_docs.main(["--roles-dir", str(tmp_path / "roles")]) == 0
    assert "`[z]`" in (role / "README.md").read_text() and (role / "README.md").read_text().endswith("Kept.\n")
