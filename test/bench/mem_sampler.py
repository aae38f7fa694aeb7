#!/usr/bin/python3
"""Peak memory of a training: its backend plus its parallel workers.

    mem_sampler.py [--own] PIDFILE

Waits for PIDFILE to hold the pid of the backend that trains (the caller
writes it from that session with pg_backend_pid() just before wals_train),
then every 50 ms sums the Pss of the backend and of its parallel workers
(/proc/<pid>/smaps_rollup) and keeps the largest sum.  Pss charges each
shared page in equal parts to the processes that map it, so the dynamic
shared memory that the leader and its workers share is counted once in the
sum.  On SIGTERM prints one JSON line: peak_kb; first_kb, the first sample,
which is about what the backend holds before the training allocates
anything; samples; processes, the most seen in one sample (1 + the
workers that were running); and own_peak_kb and own_first_kb, the same
for the memory the training itself allocates: the private memory of the
backend and its workers (RssAnon, which leaves out the pages of
shared_buffers they touch) plus the dynamic shared memory segments in
/dev/shm.

Pss costs: the kernel walks every page table entry of each process to
charge its pages, and a training maps gigabytes.  Summed every 50 ms it
took a third of one core over a training of 20 million ratings and half
of one at 100 million, which a 2-core machine then took from the
training it timed.  So the cheap figures (status's RssAnon, the
segments' sizes, counters the kernel keeps) are sampled every 50 ms,
and Pss only where they reach a new high, as they do wherever Pss does,
and every half second besides.  With --own Pss is not sampled, and
peak_kb and first_kb are 0.

The workers are the processes that pg_stat_activity lists with leader_pid =
the backend's pid; they are found here by their process title, "parallel
worker for PID <pid>", among the children of the backend's parent, the
postmaster (all processes where the kernel does not list children), so
that sampling opens no database session and cannot miss a worker that
starts between two queries.
"""
import json
import os
import re
import signal
import sys
import time

INTERVAL = 0.05
PSS_INTERVAL = 0.5

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def proc_kb(pid, name, key):
    """The kB of line key of /proc/<pid>/<name>, 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass  # the process exited between the scan and the read
    return 0


def pss_kb(pid):
    return proc_kb(pid, "smaps_rollup", b"Pss:")


def anon_kb(pid):
    return proc_kb(pid, "status", b"RssAnon:")


def segments_kb():
    """Dynamic shared memory in use on the server's machine (/dev/shm)."""
    total = 0
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return 0
    for name in names:
        if name.startswith("PostgreSQL."):
            try:
                total += os.stat(f"/dev/shm/{name}").st_blocks // 2
            except OSError:
                pass
    return total


def children_file(leader):
    """Where the kernel lists the children of the leader's parent, the postmaster."""
    try:
        with open(f"/proc/{leader}/stat", "rb") as f:
            parent = int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return f"/proc/{parent}/task/{parent}/children"


def candidates(children):
    """The postmaster's children, or every process where they are not listed."""
    if children is not None:
        try:
            with open(children) as f:
                return f.read().split()
        except OSError:
            pass
    return [name for name in os.listdir("/proc") if name.isdigit()]


def workers(children, title):
    found = []
    for name in candidates(children):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if title.search(f.read()):
                    found.append(int(name))
        except OSError:
            pass
    return found


def main():
    signal.signal(signal.SIGTERM, on_term)
    args = sys.argv[1:]
    own_only = args[0] == "--own"
    pidfile = args[-1]
    leader = None
    while not stop and leader is None:
        try:
            with open(pidfile) as f:
                text = f.read().strip()
            leader = int(text) if text else None
        except (OSError, ValueError):
            pass
        if leader is None:
            time.sleep(0.005)
    peak = first = samples = most = 0
    own_peak = own_first = None
    if leader is not None:
        title = re.compile(rb"parallel worker for PID %d(?!\d)" % leader)
        children = children_file(leader)
        pss_at = 0.0
        while not stop:
            pids = [leader] + workers(children, title)
            own = sum(anon_kb(p) for p in pids) + segments_kb()
            now = time.monotonic()
            if not own_only and (own_peak is None or own > own_peak or
                                 now - pss_at >= PSS_INTERVAL):
                total = sum(pss_kb(p) for p in pids)
                pss_at = now
                first = first or total
                peak = max(peak, total)
            own_first = own if own_first is None else own_first
            own_peak = own if own_peak is None else max(own_peak, own)
            most = max(most, len(pids))
            samples += 1
            time.sleep(INTERVAL)
    print(json.dumps({"peak_kb": peak, "first_kb": first, "samples": samples,
                      "processes": most, "own_peak_kb": own_peak or 0,
                      "own_first_kb": own_first or 0}))


if __name__ == "__main__":
    main()
