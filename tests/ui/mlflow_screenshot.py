#!/usr/bin/env python3
"""Screenshot of a job's MLflow run page with its loss curve, taken with headless Chromium, and checked.

Reads the job directory's ``config/mlflow_run.json`` (written at submission: ``ui_url``, ``run_id``,
``run_name``, ``tracking_uri``), opens the run's "Model metrics" tab
(``<ui_url>/model-metrics``, MLflow 3.x) in Debian's Chromium through Playwright, filters the charts
to the metric (``train/loss`` by default) with the page's own "Search metric charts" box, waits until
Plotly has drawn that chart's line, and saves a PNG of the viewport.

Checks, one line each with the measured value:

* ``png size``        the PNG file is at least ``--min-bytes`` bytes (a blank page compresses to a few KB);
* ``non-blank``       share of the screenshot's pixels that differ from its background colour (the most
                      frequent one) by more than ``TOLERANCE`` on a channel, at least ``--min-share``;
* ``chart non-blank`` the same share inside the chart's box (axes, grid, the curve), at least ``--min-chart-share``;
* ``curve``           share of coloured pixels inside the chart's box (a channel spread above ``CHROMA``: the
                      plotted line and its points; axes, grid and labels are grey), at least ``--min-curve-share``;
* ``run name``        the page's text holds the run's name (the submission id);
* ``metric``          the page's text holds the metric's key (the chart's legend names it).

Measured on MLflow 3.17.2 at 1400x900 (a run of 8 steps): 117 KB, 12.8% non-blank, 3.5% of the chart's
box non-blank, 0.92% coloured. The same page with no chart: 110 KB and 12.6% (the sidebar and header),
so size and page share only catch a blank or failed page; the chart with its line hidden: 2.3% and 0.00%
coloured, which the ``curve`` check catches.

Chromium: ``/usr/bin/chromium`` from Debian (``--chromium``); when it is missing, it is installed with
``apt-get install chromium`` (root, or sudo). Playwright's own browser download is never used.

Usage:
    python tests/ui/mlflow_screenshot.py [--job-dir DIR | --jobs-dir /srv/mvp/private/jobs]
        [--out build/mlflow-run.png] [--metric train/loss] [--width 1400 --height 900]
  --job-dir: the job to show; default: the newest ``sft-*`` directory of ``--jobs-dir`` that has
  config/mlflow_run.json (newest by that file's time).

Exit status: 0 when every check passes, 1 when a check fails (the line names it), 2 when there is
nothing to show or the page could not be drawn (no job, no run file, Chromium missing, MLflow
unreachable, the chart never appeared).
"""
import argparse
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_FILE = os.path.join("config", "mlflow_run.json")
CHROMIUM = "/usr/bin/chromium"
APT_CHROMIUM = "apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium"
# A pixel is blank when no channel differs from the background colour by more than this.
TOLERANCE = 16
# A pixel is coloured (the curve, not grey axes, grid or text) when its channels spread by more than this.
CHROMA = 64
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG colour type -> channels per pixel (8-bit depth only: what Chromium writes).
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


class CheckError(Exception):
    """Nothing to check: no job, no run file, no browser, or the page never drew the chart (exit 2)."""


def find_job_dir(jobs_dir, prefix="sft-"):
    """The newest ``<prefix>*`` directory of ``jobs_dir`` holding config/mlflow_run.json, or None.

    Newest by the run file's modification time (the name breaks ties), so ids that are not
    timestamps (``-e submission_id=...``) sort right too.
    """
    found = []
    for path in glob.glob(os.path.join(glob.escape(jobs_dir), prefix + "*")):
        run_file = os.path.join(path, RUN_FILE)
        if os.path.isfile(run_file):
            found.append((os.path.getmtime(run_file), os.path.basename(path), path))
    return max(found)[2] if found else None


def read_run(job_dir):
    """The job's MLflow run (dict from config/mlflow_run.json); CheckError when missing or incomplete."""
    path = os.path.join(job_dir, RUN_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            run = json.load(handle)
    except (OSError, ValueError) as err:
        raise CheckError("no MLflow run for %s: %s" % (job_dir, err)) from err
    if not run.get("run_name") or not (run.get("ui_url") or (run.get("tracking_uri") and run.get("run_id"))):
        raise CheckError("%s lacks run_name and ui_url (or tracking_uri and run_id)" % path)
    return run


def metrics_url(run):
    """The URL of the run's "Model metrics" tab: ``<ui_url>/model-metrics`` (MLflow 3.x's route)."""
    url = run.get("ui_url") or "%s/#/experiments/%s/runs/%s" % (
        run["tracking_uri"].rstrip("/"), run.get("experiment_id", "0"), run["run_id"])
    return url.rstrip("/") + "/model-metrics"


def ensure_chromium(path=CHROMIUM):
    """Install Debian's chromium with apt-get when ``path`` is missing (root, else sudo); CheckError on failure."""
    if os.path.exists(path):
        return False
    command = ["sh", "-c", APT_CHROMIUM]
    if os.geteuid() != 0:
        if not shutil.which("sudo"):
            raise CheckError("%s is missing and this user cannot install it: %s" % (path, APT_CHROMIUM))
        command = ["sudo", "-n", "env", "DEBIAN_FRONTEND=noninteractive"] + command
    print("installing chromium: %s" % APT_CHROMIUM, flush=True)
    done = subprocess.run(command, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), check=False)
    if done.returncode != 0 or not os.path.exists(path):
        raise CheckError("installing chromium failed (exit %d)" % done.returncode)
    return True


def take_screenshot(url, out, metric, chromium=CHROMIUM, width=1400, height=900, timeout=90, credentials=None):
    """Open ``url`` headless, filter the charts to ``metric``, wait for its line, save the viewport to ``out``.

    ``credentials``: {"username", "password"} for the server's basic auth (mvp_mlflow_auth), or None.

    Returns (page text, chart box as (x, y, width, height) in the PNG's pixels). CheckError when the
    page or the chart does not come within ``timeout`` seconds.
    """
    from playwright.sync_api import Error, sync_playwright  # only here: the PNG checks need no browser

    limit = timeout * 1000
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        except Error as err:
            raise CheckError("cannot start %s: %s" % (chromium, str(err).splitlines()[0])) from err
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1,
                                    http_credentials=credentials)
            page.goto(url, wait_until="domcontentloaded", timeout=limit)
            tab = page.get_by_role("tab", name="Model metrics")
            tab.wait_for(timeout=limit)
            if tab.get_attribute("aria-selected") != "true":  # another route: open the tab by hand
                tab.click()
            search = page.get_by_placeholder("Search metric charts")
            search.wait_for(timeout=limit)
            search.fill(metric)
            # The chart whose legend (beside Plotly's element) names the metric, once Plotly has drawn
            # its line (a path through two points at least): the innermost block holding both.
            card = page.locator("div").filter(has=page.get_by_text("(%s)" % metric)).filter(
                has=page.locator(".js-plotly-plot path.js-line[d*='L']")).last
            card.wait_for(state="visible", timeout=limit)
            card.scroll_into_view_if_needed(timeout=limit)
            chart = card.locator(".js-plotly-plot").first
            box = chart.bounding_box()
            os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
            page.screenshot(path=out)
            text = page.inner_text("body")
        except Error as err:
            raise CheckError("no %s chart from %s: %s" % (metric, url, str(err).splitlines()[0])) from err
        finally:
            browser.close()
    return text, (int(box["x"]), int(box["y"]), int(box["width"]), int(box["height"]))


def _unfilter(filter_type, line, previous, bpp):
    """One PNG scanline with its filter undone (PNG spec, section 9)."""
    out = bytearray(line)
    if filter_type == 0:
        return out
    if filter_type == 2:
        return bytearray((a + b) & 0xFF for a, b in zip(line, previous))
    for i, value in enumerate(line):
        left = out[i - bpp] if i >= bpp else 0
        up = previous[i]
        if filter_type == 1:
            out[i] = (value + left) & 0xFF
        elif filter_type == 3:
            out[i] = (value + ((left + up) >> 1)) & 0xFF
        elif filter_type == 4:
            corner = previous[i - bpp] if i >= bpp else 0
            guess = left + up - corner
            dist_left, dist_up, dist_corner = abs(guess - left), abs(guess - up), abs(guess - corner)
            if dist_left <= dist_up and dist_left <= dist_corner:
                predictor = left
            elif dist_up <= dist_corner:
                predictor = up
            else:
                predictor = corner
            out[i] = (value + predictor) & 0xFF
        else:
            raise ValueError("bad PNG filter type %d" % filter_type)
    return out


def decode_png(data):
    """(width, height, rows): the pixels of an 8-bit, non-interlaced PNG, each row a list of RGB tuples.

    Grey and alpha are folded to RGB (alpha dropped: Chromium's screenshots are opaque). Raises
    ValueError for what this reader does not handle (palettes, 16-bit, interlace).
    """
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    pos, header, idat = len(PNG_SIGNATURE), None, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _compression, _filter, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace:
        raise ValueError("unsupported PNG: depth %d, colour type %d, interlace %d" % (depth, colour, interlace))
    bpp = CHANNELS[colour]
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], raw[start + 1:start + 1 + stride], previous, bpp)
        previous = line
        if bpp >= 3:
            rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        else:
            rows.append([(line[x],) * 3 for x in range(0, stride, bpp)])
    return width, height, rows


def non_blank_share(rows, box=None, tolerance=TOLERANCE):
    """(share, background): the share of pixels (in ``box`` = (x, y, w, h) when given) unlike the background.

    The background is the most frequent colour of the region; a pixel is unlike it when a channel
    differs by more than ``tolerance``. An empty region has share 0.0 and background None.
    """
    if box is not None:
        x, y, w, h = box
        rows = [row[max(x, 0):x + w] for row in rows[max(y, 0):y + h]]
    counts = Counter(pixel for row in rows for pixel in row)
    total = sum(counts.values())
    if not total:
        return 0.0, None
    background = counts.most_common(1)[0][0]
    unlike = sum(count for pixel, count in counts.items()
                 if max(abs(a - b) for a, b in zip(pixel, background)) > tolerance)
    return unlike / total, background


def coloured_share(rows, box=None, chroma=CHROMA):
    """The share of pixels (in ``box`` = (x, y, w, h) when given) whose channels spread by more than ``chroma``."""
    if box is not None:
        x, y, w, h = box
        rows = [row[max(x, 0):x + w] for row in rows[max(y, 0):y + h]]
    total = sum(len(row) for row in rows)
    if not total:
        return 0.0
    return sum(1 for row in rows for pixel in row if max(pixel) - min(pixel) > chroma) / total


def check_png(path, min_bytes, min_share, chart_box=None, min_chart_share=0.0, min_curve_share=0.0):
    """The PNG's checks as a list of (name, passed, measured text), in the order the module docstring gives."""
    with open(path, "rb") as handle:
        data = handle.read()
    results = [("png size", len(data) >= min_bytes, "%d bytes (min %d)" % (len(data), min_bytes))]
    try:
        width, height, rows = decode_png(data)
    except (ValueError, zlib.error, struct.error) as err:
        return results + [("non-blank", False, "cannot decode: %s" % err)]
    share, background = non_blank_share(rows)
    results.append(("non-blank", share >= min_share, "%.1f%% of %dx%d pixels unlike background %s (min %.1f%%)"
                    % (100 * share, width, height, background, 100 * min_share)))
    if chart_box is not None:
        chart_share, _ = non_blank_share(rows, chart_box)
        results.append(("chart non-blank", chart_share >= min_chart_share,
                        "%.1f%% of the chart's %dx%d box at (%d, %d) (min %.1f%%)"
                        % (100 * chart_share, chart_box[2], chart_box[3], chart_box[0], chart_box[1],
                           100 * min_chart_share)))
        curve = coloured_share(rows, chart_box)
        results.append(("curve", curve >= min_curve_share, "%.2f%% of the chart's box coloured (min %.2f%%)"
                        % (100 * curve, 100 * min_curve_share)))
    return results


def check_text(text, run_name, metric):
    """The page text's checks: the run's name and the metric's key appear in it."""
    return [(name, value in text, "%r %s in the page text" % (value, "found" if value in text else "not"))
            for name, value in (("run name", run_name), ("metric", metric))]


def main(argv=None):
    """Take the screenshot and run the checks; the exit status of the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--job-dir", help="the job directory (default: the newest sft-* with an MLflow run)")
    parser.add_argument("--jobs-dir", default="/srv/mvp/private/jobs", help="where job directories are")
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "mlflow-run.png"), help="the PNG to write")
    parser.add_argument("--metric", default="train/loss", help="the metric whose chart is shown")
    parser.add_argument("--chromium", default=CHROMIUM, help="the Chromium binary (Debian's)")
    parser.add_argument("--user", default="mvp", help="the server's basic-auth user (mvp_mlflow_username)")
    parser.add_argument("--password-file", default=os.path.join(ROOT, "inventories", "local", ".secrets",
                                                                 "mlflow_password"),
                        help="file holding its password (mvp_mlflow_password_file); missing: no login")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--timeout", type=int, default=90, help="seconds to wait for the page and the chart")
    parser.add_argument("--min-bytes", type=int, default=40000, help="smallest PNG size accepted")
    parser.add_argument("--min-share", type=float, default=0.05, help="smallest non-blank share of the screenshot")
    parser.add_argument("--min-chart-share", type=float, default=0.02,
                        help="smallest non-blank share inside the chart's box")
    parser.add_argument("--min-curve-share", type=float, default=0.003,
                        help="smallest share of coloured (curve) pixels inside the chart's box")
    args = parser.parse_args(argv)
    try:
        job_dir = args.job_dir or find_job_dir(args.jobs_dir)
        if not job_dir:
            raise CheckError("no sft-* job directory with %s under %s" % (RUN_FILE, args.jobs_dir))
        run = read_run(job_dir)
        url = metrics_url(run)
        print("job:    %s" % job_dir)
        print("run:    %s (%s)" % (run["run_name"], run.get("run_id", "?")))
        print("page:   %s" % url, flush=True)
        ensure_chromium(args.chromium)
        credentials = None
        if os.path.isfile(args.password_file):
            with open(args.password_file, encoding="utf-8") as handle:
                credentials = {"username": args.user, "password": handle.read().strip()}
        text, box = take_screenshot(url, args.out, args.metric, args.chromium, args.width, args.height, args.timeout,
                                    credentials)
    except CheckError as err:
        print("error: %s" % err, file=sys.stderr)
        return 2
    print("png:    %s" % args.out)
    results = check_png(args.out, args.min_bytes, args.min_share, box, args.min_chart_share, args.min_curve_share)
    results += check_text(text, run["run_name"], args.metric)
    for name, passed, measured in results:
        print("%-4s %-16s %s" % ("ok" if passed else "FAIL", name, measured))
    failed = [name for name, passed, _ in results if not passed]
    if failed:
        print("failed: %s" % ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
