"""tests/ui/mlflow_screenshot.py: the PNG reader and checks, the job and URL it picks (no browser here).

The PNGs are written here, by the spec's forward filters (PNG spec, section 9), from pixels the
test chooses, so the expected pixels and shares are known before the code under test runs.
"""
import importlib.util
import json
import os
import struct
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "tests", "ui", "mlflow_screenshot.py")
SPEC = importlib.util.spec_from_file_location("mlflow_screenshot", SCRIPT)
shot = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(shot)

WHITE = (255, 255, 255)
BLUE = (34, 114, 180)


def _chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def _paeth(left, up, corner):
    guess = left + up - corner
    options = sorted(((abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner)))
    return options[0][2]


def _filtered(kind, line, previous, bpp):
    out = bytearray()
    for i, value in enumerate(line):
        left = line[i - bpp] if i >= bpp else 0
        up = previous[i]
        corner = previous[i - bpp] if i >= bpp else 0
        predictor = {0: 0, 1: left, 2: up, 3: (left + up) // 2, 4: _paeth(left, up, corner)}[kind]
        out.append((value - predictor) & 0xFF)
    return out


def encode_png(rows, alpha=False, filters=(0,)):
    """An 8-bit RGB (or RGBA, opaque) PNG of ``rows``; row y uses filter type filters[y % len(filters)]."""
    height, width = len(rows), len(rows[0])
    bpp = 4 if alpha else 3
    raw, previous = bytearray(), bytearray(width * bpp)
    for y, row in enumerate(rows):
        line = bytearray(b for pixel in row for b in (pixel + (255,) if alpha else pixel))
        kind = filters[y % len(filters)]
        raw += bytes([kind]) + _filtered(kind, line, previous, bpp)
        previous = line
    header = struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0)
    return (shot.PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(bytes(raw)))
            + _chunk(b"IEND", b""))


def pattern(width, height):
    """Pixels that differ from their neighbours in every channel (every filter's predictor matters)."""
    return [[((x * 37 + y * 11) % 256, (x * 5 + y * 53 + 7) % 256, (x * y + 3 * x + 200) % 256)
             for x in range(width)] for y in range(height)]


@pytest.mark.parametrize("filters", [(0,), (1,), (2,), (3,), (4,), (0, 1, 2, 3, 4)])
@pytest.mark.parametrize("alpha", [False, True])
def test_decode_every_filter(filters, alpha):
    rows = pattern(13, 7)
    width, height, decoded = shot.decode_png(encode_png(rows, alpha, filters))
    assert (width, height) == (13, 7)
    assert decoded == rows


def test_decode_refuses_what_it_does_not_read():
    with pytest.raises(ValueError):
        shot.decode_png(b"GIF89a")
    header = struct.pack(">IIBBBBB", 1, 1, 8, 3, 0, 0, 0)  # a palette image
    with pytest.raises(ValueError):
        shot.decode_png(shot.PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IEND", b""))


def test_blank_image_has_no_non_blank_pixels():
    share, background = shot.non_blank_share([[WHITE] * 40 for _ in range(30)])
    assert (share, background) == (0.0, WHITE)


def test_share_counts_pixels_unlike_the_background():
    width, height = 40, 30
    rows = [[WHITE] * width for _ in range(height)]
    line = [(x, 5 + x // 4) for x in range(width)]  # a curve, one pixel per column
    for x, y in line:
        rows[y][x] = BLUE
    share, background = shot.non_blank_share(rows)
    assert background == WHITE
    assert share == pytest.approx(len(line) / (width * height))


def test_near_background_pixels_count_as_blank():
    faint = tuple(c - shot.TOLERANCE for c in WHITE)
    visible = tuple(c - shot.TOLERANCE - 1 for c in WHITE)
    rows = [[WHITE] * 10 for _ in range(10)]
    rows[0][:3] = [faint] * 3
    rows[1][:2] = [visible] * 2
    assert shot.non_blank_share(rows)[0] == pytest.approx(2 / 100)


def test_share_inside_a_box():
    rows = [[WHITE] * 20 for _ in range(20)]
    for x in range(5, 15):  # a 10-pixel line inside the box (4, 8, 12, 4): 48 pixels
        rows[9][x] = BLUE
    rows[0][0] = BLUE  # outside the box
    share, _ = shot.non_blank_share(rows, (4, 8, 12, 4))
    assert share == pytest.approx(10 / 48)
    assert shot.non_blank_share(rows, (30, 30, 5, 5)) == (0.0, None)


def test_check_png_fails_a_blank_screenshot(tmp_path):
    path = tmp_path / "blank.png"
    path.write_bytes(encode_png([[WHITE] * 64 for _ in range(48)]))
    size = os.path.getsize(path)
    results = {name: (passed, text) for name, passed, text in
               shot.check_png(str(path), size + 1, 0.05, (8, 8, 32, 16), 0.02)}
    assert results["png size"] == (False, "%d bytes (min %d)" % (size, size + 1))
    assert results["non-blank"][0] is False and results["non-blank"][1].startswith("0.0% of 64x48 pixels")
    assert results["chart non-blank"][0] is False


def test_check_png_passes_a_drawn_chart(tmp_path):
    width, height = 64, 48
    rows = [[WHITE] * width for _ in range(height)]
    box = (8, 8, 48, 32)
    drawn = 0
    for x in range(box[0], box[0] + box[2]):  # an axis and a falling curve in the box
        rows[box[1] + box[3] - 1][x] = (0, 0, 0)
        rows[box[1] + (x - box[0]) // 2][x] = BLUE
        drawn += 2
    path = tmp_path / "chart.png"
    path.write_bytes(encode_png(rows, alpha=True, filters=(4, 1, 2)))
    results = shot.check_png(str(path), os.path.getsize(path), 0.03, box, 0.06, 0.03)
    assert [(name, passed) for name, passed, _ in results] == [
        ("png size", True), ("non-blank", True), ("chart non-blank", True), ("curve", True)]
    assert results[1][2].startswith("%.1f%%" % (100.0 * drawn / (width * height)))
    assert results[2][2].startswith("%.1f%%" % (100.0 * drawn / (box[2] * box[3])))
    assert results[3][2].startswith("%.2f%%" % (100.0 * (drawn // 2) / (box[2] * box[3])))  # the blue half


def test_check_png_fails_a_chart_without_its_curve(tmp_path):
    rows = [[WHITE] * 64 for _ in range(48)]
    box = (8, 8, 48, 32)
    for x in range(box[0], box[0] + box[2]):  # axes and grey grid lines only
        rows[box[1] + box[3] - 1][x] = (0, 0, 0)
        rows[box[1] + 10][x] = rows[box[1] + 20][x] = (200, 200, 200)
    path = tmp_path / "empty-chart.png"
    path.write_bytes(encode_png(rows, filters=(2,)))
    results = {name: passed for name, passed, _ in shot.check_png(str(path), 1, 0.01, box, 0.02, 0.003)}
    assert results == {"png size": True, "non-blank": True, "chart non-blank": True, "curve": False}


def test_coloured_share():
    grey = [(v, v, v) for v in (0, 90, 200, 255)]
    tinted = (255, 255 - shot.CHROMA, 255)  # a spread of exactly CHROMA: not coloured
    rows = [grey + [tinted, BLUE, (255, 0, 0), (0, 200, 40)]]
    assert shot.coloured_share(rows) == pytest.approx(3 / 8)
    assert shot.coloured_share(rows, (0, 0, 5, 1)) == 0.0
    assert shot.coloured_share(rows, (5, 0, 3, 1)) == 1.0
    assert shot.coloured_share(rows, (9, 9, 2, 2)) == 0.0


def test_check_png_reports_an_unreadable_file(tmp_path):
    path = tmp_path / "broken.png"
    path.write_bytes(b"not a png at all")
    results = shot.check_png(str(path), 1, 0.05)
    assert results[0][:2] == ("png size", True)
    assert results[1][:2] == ("non-blank", False)


def test_check_text():
    text = "sft\nsft-1-abc\nOverview\nModel metrics\nloss\nsft-1-abc (train/loss)\n"
    assert [passed for _, passed, _ in shot.check_text(text, "sft-1-abc", "train/loss")] == [True, True]
    assert [passed for _, passed, _ in shot.check_text(text, "sft-2-def", "train/lr")] == [False, False]


def write_run(jobs, name, mtime, **run):
    config = jobs / name / "config"
    config.mkdir(parents=True)
    path = config / "mlflow_run.json"
    path.write_text(json.dumps(run))
    os.utime(path, (mtime, mtime))
    return str(jobs / name)


def test_find_job_dir_takes_the_newest_run_file(tmp_path):
    write_run(tmp_path, "sft-20261126-050000-aaaaaa", 1000, run_name="a")
    newest = write_run(tmp_path, "sft-demo-x", 3000, run_name="b")  # not a timestamp id: time decides
    write_run(tmp_path, "grpo-20261126-070000-cccccc", 5000, run_name="c")  # another workload
    (tmp_path / "sft-20261126-080000-dddddd" / "config").mkdir(parents=True)  # no MLflow run
    assert shot.find_job_dir(str(tmp_path)) == newest
    assert shot.find_job_dir(str(tmp_path / "missing")) is None


def test_metrics_url_and_run_file(tmp_path):
    ui = "http://10.0.0.3:5000/#/experiments/1/runs/abc"
    job = write_run(tmp_path, "sft-1", 1000, run_name="sft-1", ui_url=ui, run_id="abc")
    assert shot.metrics_url(shot.read_run(job)) == ui + "/model-metrics"
    assert shot.metrics_url({"tracking_uri": "http://h:5000/", "experiment_id": "4", "run_id": "r"}) == \
        "http://h:5000/#/experiments/4/runs/r/model-metrics"
    with pytest.raises(shot.CheckError):
        shot.read_run(str(tmp_path / "sft-none"))
    bad = write_run(tmp_path, "sft-2", 1000, run_id="abc")  # no run name
    with pytest.raises(shot.CheckError):
        shot.read_run(bad)


def test_no_job_exits_2(tmp_path, capsys):
    assert shot.main(["--jobs-dir", str(tmp_path)]) == 2
    assert "no sft-* job directory" in capsys.readouterr().err
