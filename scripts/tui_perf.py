#!/usr/bin/env python3
"""The TUI's first frame and idle CPU, measured on the real release binary in a pseudo-terminal.

first frame: from process start to the lesson's title on screen (`ringlab learn collectives`,
120x40), median of 7 runs; idle: CPU time (utime+stime from /proc/PID/stat) the app uses while
it sits on a lesson for 5 s with no input. Usage: scripts/tui_perf.py (after cargo build --release)
"""
import fcntl, os, pty, select, statistics, struct, subprocess, sys, tempfile, termios, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.join(ROOT, "target", "release", "ringlab")


def start():
    home = tempfile.mkdtemp()
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["RINGLAB_HOME"] = home
        os.execv(BIN, ["ringlab", "learn", "collectives"])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    buf = b""
    while b"The collectives" not in buf:
        r, _, _ = select.select([fd], [], [], 5)
        if not r:
            break
        buf += os.read(fd, 65536)
    return pid, fd, (time.perf_counter() - t0) * 1000


def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    times = []
    for _ in range(7):
        pid, fd, ms = start()
        times.append(ms)
        os.write(fd, b"\x03")
        os.waitpid(pid, 0)
    print(f"first frame: median {statistics.median(times):.1f} ms (min {min(times):.1f}, max {max(times):.1f}; limit 100 ms)")
    pid, fd, _ = start()
    time.sleep(1)  # let the highlighting thread finish
    a = cpu_ticks(pid)
    time.sleep(5)
    b = cpu_ticks(pid)
    hz = os.sysconf("SC_CLK_TCK")
    print(f"idle: {(b - a) * 1000 / hz:.0f} ms of CPU in 5 s on a lesson with no input")
    os.write(fd, b"\x03")
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
