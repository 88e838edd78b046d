# -*- coding: utf-8 -*-
"""Read processes and listening sockets from /proc (Linux), for the node modules.

Used by ray_node_preflight (who holds the head's ports), ray_head (the
owner named in its port error) and ray_worker (the running raylet). Formats
are proc(5): ``/proc/net/tcp{,6}`` rows hold the local address as hex
``ip:port``, the state (``0A`` = LISTEN) and the socket inode in column 10;
``/proc/<pid>/fd/*`` links read ``socket:[<inode>]``; ``/proc/<pid>/cmdline``
is NUL-separated.
"""

from __future__ import annotations

import os


def pids(proc_root="/proc"):
    """Return the pids (list of str) found under ``proc_root``."""
    return [p for p in os.listdir(proc_root) if p.isdigit()]


def argv_of(pid, proc_root="/proc"):
    """Return the command line of ``pid`` as a list of str ([] when unreadable)."""
    try:
        with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as handle:
            return [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return []


def comm_of(pid, proc_root="/proc"):
    """Return the command name of ``pid`` (``/proc/<pid>/comm``), '' when unreadable."""
    try:
        with open(os.path.join(proc_root, str(pid), "comm"), encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def describe(pid, proc_root="/proc"):
    """Return (is_ray, text) for a process.

    ``is_ray`` is True for Ray's own processes: ``gcs_server``, ``raylet``, a program
    running files of the ``ray`` package (``/site-packages/ray/`` in its command line), or
    a Ray worker, which renames itself ``ray::<task or actor>`` (also in ``comm``).
    ``text`` is ``<comm> (pid <pid>: <command line, 160 characters at most>)``.
    """
    comm, argv = comm_of(pid, proc_root), argv_of(pid, proc_root)
    is_ray = (comm in ("gcs_server", "raylet") or comm.startswith("ray::")
              or any("/site-packages/ray/" in a or a.startswith("ray::") for a in argv))
    return is_ray, "%s (pid %s: %s)" % (comm or "?", pid, " ".join(argv)[:160])


def listening_pids(port, proc_root="/proc"):
    """Return the pids (list of str) with a TCP socket listening on ``port`` (IPv4 or IPv6)."""
    inodes = set()
    for table in ("net/tcp", "net/tcp6"):
        try:
            with open(os.path.join(proc_root, table), encoding="ascii") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == int(port):
                inodes.add("socket:[%s]" % cols[9])
    found = []
    for pid in pids(proc_root) if inodes else []:
        fd_dir = os.path.join(proc_root, pid, "fd")
        try:
            if any(os.readlink(os.path.join(fd_dir, fd)) in inodes for fd in os.listdir(fd_dir)):
                found.append(pid)
        except OSError:
            continue
    return found


def find_argv(executable_name, proc_root="/proc"):
    """Return the argv of the first process whose program's file name is ``executable_name``, or None."""
    for pid in pids(proc_root):
        argv = argv_of(pid, proc_root)
        if argv and os.path.basename(argv[0]) == executable_name:
            return argv
    return None
