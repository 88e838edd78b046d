# -*- coding: utf-8 -*-
"""A run's life after its submission: the job controller and the rules it follows.

The job controller (``mvp_controller``), which follows every run to its end; the cluster's job queue
(``mvp_queue``); the verdict of an attempt (``mvp_verdict``); the restart decision (``mvp_restart``) and the
trainer continued from a checkpoint (``mvp_resume``); a run's state and the controller's heartbeat
(``mvp_run_state``); how far a running job got (``mvp_progress``); the jobs a cluster play would interrupt
(``mvp_running_jobs``); and the playbooks the controller runs to heal the cluster (``mvp_playbook_run``).
The job tools on the nodes import ``mvp_verdict`` and ``mvp_queue`` by their bare names (``storage/mvp_copies``).
"""
