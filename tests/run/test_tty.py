#!/usr/bin/env python3
"""Interactive chat on a real pseudo-terminal: the banner and "> " prompt,
Ctrl-C at the prompt (a fresh prompt), Ctrl-C during a reply (the reply stops,
the stats say so, the prompt returns), /exit. Typed keys go through the tty's
line discipline, so ^C arrives as SIGINT exactly as from a person.

usage: test_tty.py ORIN_RUN MODEL_DIR"""
import os
import pty
import select
import sys
import time

orin_run, model = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(name, cond):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {name}", file=sys.stderr)


pid, fd = pty.fork()
if pid == 0:
    os.execv(orin_run, [orin_run, "--set", f"model.path={model}", "--set", "runtime.device=cpu",
                        "-i", "--set", "generate.max_tokens=100000",
                        "--set", "runtime.max_context=2048", "--set", "generate.temperature=0"])

screen = b""


def read_until(needle, timeout=20.0, start=None):
    """Reads the terminal until `needle` shows up after `start` (default: the
    current end of what was read)."""
    global screen
    start = len(screen) if start is None else start
    deadline = time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                screen += os.read(fd, 65536)
            except OSError:
                break
        if needle in screen[start:]:
            return True
    return False


check("banner", read_until(b"interactive chat", start=0))
check("first prompt", read_until(b"> ", start=0))
mark = len(screen)
os.write(fd, b"\x03")                       # Ctrl-C at the prompt
check("a fresh prompt after Ctrl-C", read_until(b"> ", start=mark))
os.write(fd, b"Hello\r")
time.sleep(0.5)                             # the reply is streaming now
mark = len(screen)
os.write(fd, b"\x03")                       # Ctrl-C during the reply
check("the reply stops", read_until(b"stop: interrupted", start=mark))
stats = screen.find(b"stop: interrupted", mark)
check("the prompt returns", read_until(b"> ", start=stats))
os.write(fd, b"/exit\r")
read_until(b"\0", timeout=20.0)            # what it writes on the way out, up to EOF
_, status = os.waitpid(pid, 0)
check("/exit exits 0", os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)
if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
    print(f"exit status {os.WEXITSTATUS(status)}", file=sys.stderr)
elif os.WIFSIGNALED(status):
    print(f"killed by signal {os.WTERMSIG(status)}", file=sys.stderr)
if failed:
    print("terminal:", screen.decode(errors="replace")[-3000:], file=sys.stderr)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
