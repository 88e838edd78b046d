"""Unit tests of the snapshot helpers with real wheel, tarball and folder sources."""
import os
import tarfile
import zipfile

import pytest

from ray_verl_snapshot import CODE_ID_RE, extract_verl, tree_hash


def make_package(root, body="x = 1\n"):
    pkg = os.path.join(root, "verl")
    os.makedirs(os.path.join(pkg, "trainer"), exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w") as handle:
        handle.write(body)
    with open(os.path.join(pkg, "trainer", "main_ppo.py"), "w") as handle:
        handle.write("def main():\n    pass\n")
    return pkg


def test_same_content_same_hash_and_any_change_changes_it(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    make_package(a)
    make_package(b)
    assert tree_hash(os.path.join(a, "verl")) == tree_hash(os.path.join(b, "verl"))
    make_package(b, body="x = 2\n")
    assert tree_hash(os.path.join(a, "verl")) != tree_hash(os.path.join(b, "verl"))


def test_wheel_source_gives_package_and_version(tmp_path):
    src = str(tmp_path / "src")
    make_package(src)
    wheel = str(tmp_path / "verl-9.9.9-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w") as archive:
        for dirpath, _, files in os.walk(os.path.join(src, "verl")):
            for name in files:
                full = os.path.join(dirpath, name)
                archive.write(full, os.path.relpath(full, src))
        archive.writestr("verl-9.9.9.dist-info/METADATA", "Name: verl\nVersion: 9.9.9\n")
    staging = str(tmp_path / "staging")
    os.makedirs(staging)
    assert extract_verl(wheel, staging) == "9.9.9"
    assert sorted(os.listdir(staging)) == ["verl"]
    assert tree_hash(os.path.join(staging, "verl")) == tree_hash(os.path.join(src, "verl"))


def test_folder_and_tarball_sources_match(tmp_path):
    src = str(tmp_path / "src")
    make_package(src)
    tarball = str(tmp_path / "verl.tar.gz")
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(os.path.join(src, "verl"), arcname="verl")
    from_dir, from_tar = str(tmp_path / "d"), str(tmp_path / "t")
    os.makedirs(from_dir)
    os.makedirs(from_tar)
    extract_verl(src, from_dir)
    extract_verl(tarball, from_tar)
    assert tree_hash(os.path.join(from_dir, "verl")) == tree_hash(os.path.join(from_tar, "verl"))


def test_sources_without_verl_are_refused(tmp_path):
    empty = str(tmp_path / "empty")
    os.makedirs(empty)
    with pytest.raises(ValueError, match="verl/__init__.py"):
        extract_verl(empty, str(tmp_path))
    with pytest.raises(ValueError, match="neither"):
        extract_verl(str(tmp_path / "x.zip"), str(tmp_path))


@pytest.mark.parametrize("code_id, ok", [("verl-0.9.1", True), ("codeA", True), ("a/b", False),
                                         ("..", False), (".hidden", False), ("", False)])
def test_code_id_pattern(code_id, ok):
    assert bool(CODE_ID_RE.match(code_id)) is ok


def test_tarball_members_outside_verl_are_ignored(tmp_path):
    src = str(tmp_path / "src")
    make_package(src)
    evil = tmp_path / "evil.py"
    evil.write_text("x = 1\n")
    tarball = str(tmp_path / "verl.tar.gz")
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(os.path.join(src, "verl"), arcname="verl")
        archive.add(str(evil), arcname="verl/../escaped.py")
        archive.add(str(evil), arcname="other/evil.py")
    staging = str(tmp_path / "staging")
    os.makedirs(staging)
    extract_verl(tarball, staging)
    assert sorted(os.listdir(staging)) == ["verl"]
    assert not os.path.exists(os.path.join(staging, "escaped.py"))
