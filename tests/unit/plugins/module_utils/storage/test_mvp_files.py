"""Unit tests of module_utils mvp_files: writing only what changed (0600 node settings), JSON objects and
sha256 digests read back, as the ray_head and ray_worker modules use them."""
import json

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import (
    read_json, sha256_file, write_text_if_changed)


def test_write_settings_writes_0600_only_when_the_content_differs(tmp_path):
    import os
    import stat

    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_start import settings_text

    def write_settings(path, settings, check_mode=False):
        return write_text_if_changed(path, settings_text(settings), 0o600, check_mode)

    path = tmp_path / "ray" / "mvp_node.json"
    settings = {"argv": ["ray", "start"], "env": {"MVP_INTERNAL_TOKEN": "tok"}}
    assert write_settings(str(path), settings, check_mode=True) is True
    assert not path.exists()
    assert write_settings(str(path), settings) is True
    assert json.loads(path.read_text()) == settings and path.read_text() == settings_text(settings)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert write_settings(str(path), settings) is False
    assert write_settings(str(path), dict(settings, env={"MVP_INTERNAL_TOKEN": "tok2"})) is True
    assert json.loads(path.read_text())["env"]["MVP_INTERNAL_TOKEN"] == "tok2"
    assert [p.name for p in path.parent.iterdir()] == ["mvp_node.json"]


def test_status_and_sha256_readers_tolerate_missing_and_broken_files(tmp_path):
    import hashlib

    read_status = read_json

    def file_sha256(path):
        return sha256_file(path, missing="")

    status = tmp_path / "status.json"
    assert read_status("") == {} and read_status(str(status)) == {} and file_sha256(str(status)) == ""
    status.write_text("[1, 2]")
    assert read_status(str(status)) == {}
    status.write_text('{"state": "running"}')
    assert read_status(str(status)) == {"state": "running"}
    assert file_sha256(str(status)) == hashlib.sha256(b'{"state": "running"}').hexdigest()
    assert file_sha256("") == ""
