"""tools/reaping.py: an orphan in a process group of its own (as the pulumi CLI starts its plugins)
is handed to the subreaper when its parent is killed, and ended by `reap_orphans`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# In a process of its own (a subreaper keeps the role until it exits): a "CLI" that starts a
# "plugin" in a new session, then is SIGKILLed, as a killed `pulumi` is.
SCRIPT = r"""
import json, os, signal, subprocess, sys, time
from tools.reaping import become_subreaper, children, reap_orphans
assert become_subreaper()
cli = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; p = subprocess.Popen(['sleep', '300'], start_new_session=True); print(p.pid, flush=True); time.sleep(300)"],
    stdout=subprocess.PIPE, text=True)
plugin = int(cli.stdout.readline())
os.kill(cli.pid, signal.SIGKILL); cli.wait()
for _ in range(50):
    if plugin in [p for p, _ in children(os.getpid())]:
        break
    time.sleep(0.1)
adopted = plugin in [p for p, _ in children(os.getpid())]
ended = reap_orphans(grace=2)
print(json.dumps({"plugin": plugin, "adopted": adopted, "ended": ended, "alive": os.path.exists(f"/proc/{plugin}")}))
"""


def test_a_killed_clis_plugin_is_adopted_and_ended():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["adopted"] is True
    assert result["ended"] == [[result["plugin"], "sleep"]]
    assert result["alive"] is False


def test_kept_children_are_left_alone():
    script = ("import subprocess, json; from tools.reaping import reap_orphans; p = subprocess.Popen(['sleep', '30']);"
              "print(json.dumps(reap_orphans(keep=[p.pid]))); p.kill(); p.wait()")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr)
