# -*- coding: utf-8 -*-
"""The job request and its checks, up to the submitted Ray job.

The user's request, read strictly (``mvp_request_read``) and checked against its one table of keys
(``mvp_request``); the job spec built from it (``mvp_spec``); what a submission is checked against on the head -
verl's own start-up rules (``mvp_verl_rules``), the Hydra overrides (``mvp_hydra``), the reward function
(``mvp_reward_check``), the verl release (``mvp_release``), checkpoint retention and room (``mvp_retention``) -
read in one look (``mvp_submit_check``) and judged into refusals (``mvp_refuse``); and the ``ray_job`` module's
submission pipeline (``mvp_submission``).
"""
