# -*- coding: utf-8 -*-
"""Files on disk and on the shared storage: the job directory's contract, and how files are written.

The job contract - submission ids, the job directory and its files' names (``mvp_job``) - and the job
directory made once per job (``mvp_job_create``); atomic writes, JSON and digests (``mvp_files``) and several
small files written at once (``mvp_text_files``); the shared tree every node expects (``mvp_shared_tree``); a
verl code snapshot's content record (``mvp_snapshot``); and the collection's files copied onto the nodes, with
the list of them (``mvp_copies``).
"""
