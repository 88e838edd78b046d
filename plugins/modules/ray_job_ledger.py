#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: add the runs' GPU-hour ledgers of a period up per group, beside what the cluster held."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_ledger
short_description: Add up the runs' GPU-hour ledgers of a period per owner, team, workload or code id
description:
  - Reads every run's ledger, C(<shared_root>/jobs/<run>/logs/ledger.json) (its first attempt's job directory, written
    by the job controller; its format is in docs/jobs.md, "ledger.yml"), while the jobs folder is listed (one directory
    entry at a time); a ledger larger than I(max_file_bytes) or not JSON is skipped and named in C(skipped).
  - Keeps the runs that held GPUs between I(since) and I(end); a run crossing either counts for its part (each
    attempt's GPU-seconds and buckets scaled by the share of its wall time inside the period; C(share) in its row).
  - Sums per I(by) - runs, GPU-seconds held, every bucket, goodput (productive / held) - and sets the cluster's own
    GPU-seconds beside them (C(<shared_root>/controller/capacity-YYYY-MM.jsonl), one line a minute from the job
    controller) with the idle remainder (the cluster's minus the runs').
  - With I(dest), writes C(ledger.csv) (a row per run, per group and a total) and C(ledger.md) into that new folder;
    an existing folder is refused (a ledger is never overwritten).
  - Runs on a node that mounts the shared storage (the head). Module_utils C(mvp_ledger_sum) does the work.
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads and sums; I(dest) is not written.
  diff_mode:
    support: N/A
    details:
      - Nothing is changed but the new report folder.
options:
  shared_root:
    description: The shared storage, C(mvp_shared_root) (holds C(jobs/) and C(controller/)).
    type: path
    required: true
  since:
    description:
      - The period's start - a duration back from now (C(7d), C(24h), C(30m)) or an ISO date or date-time
        (C(2026-11-20), C(2026-11-20T08:00); UTC unless it carries an offset).
    type: raw
    default: 7d
  end:
    description:
      - The period's end, in the same forms as I(since); empty - now. (ledger.yml's C(-e until=...); not called
        C(until), the task keyword.)
    type: raw
    default: ""
  by:
    description: The ledger's key the runs are grouped by - C(owner), C(team), C(workload) or C(code_id) (another is refused naming them).
    type: str
    default: owner
  dest:
    description: A new folder to write C(ledger.csv) and C(ledger.md) into; omitted - nothing is written.
    type: path
  max_file_bytes:
    description: A ledger.json larger than this many bytes is skipped (named in C(skipped)).
    type: int
    default: 1048576
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Ledger | Add up the last week per owner and write the CSV
  mvp.ray.ray_job_ledger:
    shared_root: /private
    since: 7d
    by: owner
    dest: /private/reports/ledger-20261129-101500
  register: ledger

- name: Ledger | One day per team, only returned
  mvp.ray.ray_job_ledger:
    shared_root: /private
    since: "2026-11-20"
    end: "2026-11-21"
    by: team
"""

RETURN = r"""
since:
  description: The period's start, seconds since the epoch.
  type: float
  returned: always
until:
  description: The period's end, seconds since the epoch.
  type: float
  returned: always
period:
  description: The period as UTC text, C(<since> to <until>).
  type: str
  returned: always
by:
  description: The grouping key.
  type: str
  returned: always
runs:
  description:
    - One per run that held GPUs in the period, oldest first - C(run), C(owner), C(team), C(project), C(workload),
      C(code_id), C(state), C(verdict), C(gpu_seconds_held), C(buckets) (name -> GPU-seconds), C(goodput) (0..1 or
      null), C(share) (its part inside the period, 0..1), C(submitted_at), C(ended_at).
  type: list
  elements: dict
  returned: always
groups:
  description: One per value of I(by) (C((none)) for a run without it), largest first - C(group), C(runs),
    C(gpu_seconds_held), C(buckets), C(goodput).
  type: list
  elements: dict
  returned: always
total:
  description: Every run of the period together, shaped like a group (C(group) is C(all)).
  type: dict
  returned: always
cluster:
  description: The cluster's own GPU-seconds in the period (module_utils C(mvp_ledger_sum.cluster_gpu_seconds)) -
    C(gpu_seconds), C(node_seconds), C(covered_s), C(uncovered_s) (no capacity line covers it), C(lines),
    C(bad_lines), C(files).
  type: dict
  returned: always
idle_gpu_seconds:
  description: The cluster's GPU-seconds minus the runs'; null without a capacity line in the period.
  type: float
  returned: always
table:
  description: The table to print (markdown lines, GPU-hours) with the cluster and idle line.
  type: list
  elements: str
  returned: always
skipped:
  description: Ledger files not read, each the file's path and why.
  type: list
  elements: str
  returned: always
csv_file:
  description: The ledger.csv written (null without I(dest) or in check mode).
  type: str
  returned: always
md_file:
  description: The ledger.md written (null without I(dest) or in check mode).
  type: str
  returned: always
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger_sum


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            shared_root=dict(type="path", required=True),
            since=dict(type="raw", default="7d"),
            end=dict(type="raw", default=""),
            by=dict(type="str", default="owner"),
            dest=dict(type="path"),
            max_file_bytes=dict(type="int", default=mvp_ledger_sum.MAX_LEDGER_BYTES),
        ),
        supports_check_mode=True,
    )
    params = module.params
    now = time.time()
    jobs_dir = os.path.join(params["shared_root"], "jobs")
    if not os.path.isdir(jobs_dir):
        module.fail_json(msg="%s is not a folder: is the shared storage mounted (site.yml)?" % jobs_dir)
    try:
        mvp_ledger_sum.check_by(params["by"])
        since = mvp_ledger_sum.parse_time(params["since"], now, "since")
        until = mvp_ledger_sum.parse_time(params["end"], now, "until") if params["end"] not in ("", None) else now
        result = mvp_ledger_sum.ledger_period(jobs_dir, params["shared_root"], since, until, params["by"],
                                              params["max_file_bytes"])
    except mvp_ledger_sum.LedgerInputError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg="cannot read the ledgers under %s: %s" % (jobs_dir, exc))
    out = dict(changed=False, table=mvp_ledger_sum.ledger_table(result), csv_file=None, md_file=None,
               period="%s to %s" % (mvp_ledger_sum.iso(since), mvp_ledger_sum.iso(until)), **result)
    if params["dest"] and not module.check_mode:
        dest = params["dest"]
        try:
            os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
            os.mkdir(dest)  # a ledger folder is never overwritten
        except FileExistsError:
            module.fail_json(msg="dest %s exists: a ledger is never overwritten; give another folder" % dest)
        except OSError as exc:
            module.fail_json(msg="cannot make dest %s: %s" % (dest, exc))
        for name, text in (("ledger.csv", mvp_ledger_sum.ledger_csv(result)),
                           ("ledger.md", mvp_ledger_sum.ledger_markdown(result))):
            path = os.path.join(dest, name)
            with open(path, "x", encoding="utf-8") as handle:
                handle.write(text)
            out["csv_file" if name.endswith(".csv") else "md_file"] = path
        out["changed"] = True
    module.exit_json(**out)


if __name__ == "__main__":
    main()
