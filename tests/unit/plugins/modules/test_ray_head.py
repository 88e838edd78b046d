"""Unit tests of ray_head's pure parts: the GCS port of the running cluster."""
from ray_head import current_gcs_port


def test_current_gcs_port_reads_ray_current_cluster(tmp_path):
    assert current_gcs_port(str(tmp_path)) is None
    (tmp_path / "ray_current_cluster").write_text("172.18.0.2:6380\n")
    assert current_gcs_port(str(tmp_path)) == 6380
