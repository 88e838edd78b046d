# -*- coding: utf-8 -*-
"""What is kept about runs to look at afterwards: experiment tracking, run reports and debug bundles.

A job's MLflow experiment and run (``mvp_mlflow``); job directories read as training runs (``mvp_runs``) and
runs compared (``mvp_report``, the numbers behind ``report.yml``); where a run's GPU-hours went (``mvp_ledger``,
the ledger the job controller keeps); and timestamped snapshots of the cluster (``mvp_debug_bundle``).
"""
