# -*- coding: utf-8 -*-
"""The collection's files copied onto the nodes, each list written once.

Two roles copy files out of the collection: ``job_tools`` installs the job tools on the shared storage
(``<shared_root>/<tools_subdir>``: every entrypoint starts from ``mvp_entry.py``), and ``containers`` puts the
node entrypoint beside the docker host's node containers. Each copies its own files (``roles/<role>/files``)
and the module_utils they import by their bare names, out of their package folders into the one folder of the
copy. The builder (``mvp_spec``) makes the head check every job tool exists before a submission;
``tests/unit/plugins/module_utils/storage/test_mvp_copies.py`` imports each copied module_utils file in a bare
interpreter with only its copy's folder on the path.

Standard library only.
"""

from __future__ import annotations

# name -> {"role": the role that copies them, "files": its own files,
#          "module_utils": files of plugins/module_utils, as <package>/<file>; each lands beside the role's files}
COPIES = {
    "job_tools": {
        "role": "job_tools",
        "files": ("mvp_entry.py", "mvp_gate.py", "selftest.py"),
        "module_utils": ("lifecycle/mvp_verdict.py", "storage/mvp_job.py", "cluster/mvp_interconnect.py",
                         "lifecycle/mvp_queue.py"),
    },
    "node_entrypoint": {
        "role": "containers",
        "files": ("mvp_ray_node.py",),
        "module_utils": ("storage/mvp_files.py", "cluster/mvp_net.py", "cluster/mvp_proc.py",
                         "cluster/mvp_ray_start.py", "cluster/mvp_service.py"),
    },
}


def copied_files(name):
    """The files one copy installs, as paths relative to the collection's root.

    :param name: str, a key of ``COPIES`` (``job_tools`` or ``node_entrypoint``).
    :returns: list of str (``roles/<role>/files/<file>``, then ``plugins/module_utils/<package>/<file>``).
    :raises KeyError: for a name not in ``COPIES``, naming the names it has.
    """
    if name not in COPIES:
        raise KeyError("%r is not a copy of the collection's files; the names are %s"
                       % (name, ", ".join(sorted(COPIES))))
    copy = COPIES[name]
    return (["roles/%s/files/%s" % (copy["role"], item) for item in copy["files"]]
            + ["plugins/module_utils/%s" % item for item in copy["module_utils"]])


def installed_names(name):
    """The base names one copy puts in its folder on the node (its own files, then the module_utils files).

    :param name: str, a key of ``COPIES``.
    :returns: list of str.
    :raises KeyError: as :func:`copied_files`.
    """
    return [path.rsplit("/", 1)[-1] for path in copied_files(name)]
