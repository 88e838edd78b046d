"""images/verl-gpu/check_image.py: the build-time check that pinned versions are the imported ones."""
import importlib.metadata
import importlib.util
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("check_image", os.path.join(ROOT, "images/verl-gpu/check_image.py"))
check_image = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_image)


def test_pins_read_name_and_version_and_skip_the_rest(tmp_path):
    req = tmp_path / "r.txt"
    req.write_text("# comment\nray[default]==2.60.0\npandas == 3.1.1  # why\nmvp_plugin\nfoo>=1\nbar==1.0; python_version>'3'\n")
    assert check_image.pins(str(req)) == [("ray", "2.60.0"), ("pandas", "3.1.1"), ("bar", "1.0")]


def test_installed_pin_passes_and_a_different_one_fails_naming_it(tmp_path, capsys):
    have = importlib.metadata.version("pytest")
    good = tmp_path / "good.txt"
    good.write_text(f"pytest=={have}\n")
    assert check_image.main(["check_image.py", str(good)]) == 0
    assert f"ok pytest=={have}" in capsys.readouterr().out
    bad = tmp_path / "bad.txt"
    bad.write_text(f"pytest=={have}.post999\nno-such-dist-mvp==1.0\n")
    assert check_image.main(["check_image.py", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"pytest: {have} installed, {have}.post999 pinned" in err
    assert "no-such-dist-mvp: not installed (wanted 1.0)" in err
