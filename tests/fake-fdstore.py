#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# A service manager's fd store, for host tests where systemd is not PID 1: it listens on a
# NOTIFY_SOCKET, keeps what "FDSTORE=1 FDNAME=..." sends and drops what "FDSTOREREMOVE=1" names,
# as systemd does, and starts the daemon (CMD) with the stored fds as its activation fds
# (LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID), again on each SIGUSR1 once the last one is gone.
#   fake-fdstore.py NOTIFY_PATH STORE_FILE PID_FILE -- CMD...
# STORE_FILE lists the store once the messages queued are taken: "NAME TARGET" a line (TARGET:
# the fd's /proc/self/fd link as it was read when the fd came, "anon_inode:[pidfd]" for a pidfd),
# sorted. Neither is per stored fd per message (that made each of a run's messages cost the
# number of sandboxes alive). SIGTERM: exit, closing all.
import array, os, select, signal, socket, sys

notify_path, store_file, pid_file = sys.argv[1:4]
cmd = sys.argv[5:] if sys.argv[4] == "--" else sys.argv[4:]
store = []  # [(name, fd)], in the order received
links = {}  # fd: its /proc/self/fd link, read once
child = None
start = True
running = True


def on_usr1(*_):
    global start
    start = True


def on_term(*_):
    global running
    running = False


signal.signal(signal.SIGUSR1, on_usr1)
signal.signal(signal.SIGTERM, on_term)


def dump():
    lines = sorted("%s %s" % (n, links[fd]) for n, fd in store)
    tmp = store_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(l + "\n" for l in lines))
    os.rename(tmp, store_file)


def spawn():
    global child
    pid = os.fork()
    if pid == 0:
        # The stored fds become 3, 4, ...: first out of the way, then into place.
        high = [os.dup(fd) for _, fd in store]
        for i, fd in enumerate(high):
            os.dup2(fd, 3 + i, inheritable=True)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path, LISTEN_PID=str(os.getpid()),
                   LISTEN_FDS=str(len(store)), LISTEN_FDNAMES=":".join(n for n, _ in store))
        if not store:
            for k in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
                env.pop(k)
        os.execvpe(cmd[0], cmd, env)
    child = pid
    with open(pid_file + ".tmp", "w") as f:
        f.write("%d\n" % pid)
    os.rename(pid_file + ".tmp", pid_file)


def receive(sock):
    """One message; False when none is queued."""
    global store
    fds = array.array("i")
    try:
        msg, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(253 * fds.itemsize), socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
    fields = dict(l.split("=", 1) for l in msg.decode(errors="replace").split("\n") if "=" in l)
    if fields.get("FDSTORE") == "1":
        name = fields.get("FDNAME", "stored")
        store += [(name, fd) for fd in fds]
        for fd in fds:
            links[fd] = os.readlink("/proc/self/fd/%d" % fd)
        fds = []
    elif fields.get("FDSTOREREMOVE") == "1":
        name = fields.get("FDNAME")
        for n, fd in store:
            if n == name:
                os.close(fd)
                del links[fd]
        store = [(n, fd) for n, fd in store if n != name]
    for fd in fds:
        os.close(fd)
    return True


# A signal wakes the select below at once (not at its next 50 ms turn).
wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
signal.set_wakeup_fd(wake_w)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
sock.bind(notify_path)
dump()
while running:
    if child is not None:
        try:
            pid, _ = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            pid = child
        if pid == child:
            child = None
    if start and child is None:
        start = False
        spawn()
    try:
        r, _, _ = select.select([sock, wake_r], [], [], 0.05)
    except InterruptedError:
        continue
    if wake_r in r:
        try:
            os.read(wake_r, 256)
        except BlockingIOError:
            pass
    if sock in r:
        # The file is written once what is queued is taken.
        while receive(sock):
            pass
        dump()
for _, fd in store:
    os.close(fd)
os.unlink(notify_path)
