# -*- coding: utf-8 -*-
"""Ray and the nodes: speaking to Ray, starting it, and what each node must have.

Ray's Jobs and State APIs over HTTP (``mvp_ray_rest``) and the helpers of the Ray modules (``mvp_ray``); how a
Ray node is started (``mvp_ray_start``), from which interface (``mvp_net``), and its processes read from /proc
(``mvp_proc``); the nodes' GPUs (``mvp_gpu``), the preflight's rules (``mvp_preflight``) and the interconnect's
acceptance (``mvp_interconnect``); a program kept running beside Ray (``mvp_service``); the secret files of
Ray's token and the tracking server (``mvp_secret_file``); and the settings of release 0.1.0 that no role reads
any more (``mvp_settings``). The node entrypoint imports some of them by their bare names
(``storage/mvp_copies``).
"""
