# Runs a tool, waits until a path matching a pattern appears (what is in flight), sends the tool a signal, and prints how it ended.
#
# usage: interrupt.py --signal INT|TERM|HUP --wait-for GLOB [--timeout S] -- COMMAND...
# Prints "status: killed by SIGINT" (or "exit N"); exits 1 when the pattern never appears before
# the tool ends or the timeout passes, or when the tool outlives the signal by a minute. Polls
# rather than sleeping a fixed time, so a slow, loaded machine only makes it wait longer.
import argparse
import glob
import signal
import subprocess
import sys
import time


def describe(rc):
    return "killed by %s" % signal.Signals(-rc).name if rc < 0 else "exit %d" % rc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--signal", required=True)
    p.add_argument("--wait-for", required=True)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    sig = getattr(signal, "SIG" + a.signal)

    def default_signals():
        # lit's workers ignore SIGINT, and a tool keeps an ignored signal ignored (as under
        # nohup): give it the disposition it has in a terminal.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)

    proc = subprocess.Popen(cmd, preexec_fn=default_signals)
    deadline = time.monotonic() + a.timeout
    while not glob.glob(a.wait_for):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            print("%s never appeared; the tool ended: %s" % (a.wait_for, describe(proc.wait())))
            return 1
        time.sleep(0.005)
    proc.send_signal(sig)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        print("still running a minute after SIG%s" % a.signal)
        return 1
    print("status: " + describe(rc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
