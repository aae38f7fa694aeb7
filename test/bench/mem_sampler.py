#!/usr/bin/python3
"""Peak memory of a training: its backend plus its parallel workers.

    mem_sampler.py PIDFILE

Waits for PIDFILE to hold the pid of the backend that trains (the caller
writes it from that session with pg_backend_pid() just before wals_train),
then every 50 ms sums the Pss of the backend and of its parallel workers
(/proc/<pid>/smaps_rollup) and keeps the largest sum.  Pss charges each
shared page in equal parts to the processes that map it, so the dynamic
shared memory that the leader and its workers share is counted once in the
sum.  On SIGTERM prints one JSON line: peak_kb; first_kb, the first sample,
which is about what the backend holds before the training allocates
anything; samples; and processes, the most seen in one sample (1 + the
workers that were running).

The workers are the processes that pg_stat_activity lists with leader_pid =
the backend's pid; they are found here by their process title, "parallel
worker for PID <pid>", so that sampling opens no database session and
cannot miss a worker that starts between two queries.
"""
import json
import os
import re
import signal
import sys
import time

INTERVAL = 0.05

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass  # the process exited between the scan and the read
    return 0


def workers(title):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if title.search(f.read()):
                    found.append(int(name))
        except OSError:
            pass
    return found


def main():
    signal.signal(signal.SIGTERM, on_term)
    pidfile = sys.argv[1]
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
    if leader is not None:
        title = re.compile(rb"parallel worker for PID %d(?!\d)" % leader)
        while not stop:
            pids = [leader] + workers(title)
            total = sum(pss_kb(p) for p in pids)
            first = first or total
            peak = max(peak, total)
            most = max(most, len(pids))
            samples += 1
            time.sleep(INTERVAL)
    print(json.dumps({"peak_kb": peak, "first_kb": first, "samples": samples,
                      "processes": most}))


if __name__ == "__main__":
    main()
