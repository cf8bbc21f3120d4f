/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>

#include "fdpass.h"
#include "oci.h"

int oci_console_send(const char *socket_path, int fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int s = -EBADF;
        static const char payload[] = "pty-master";

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -errno;
        if (connect(s, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        return sbx_fds_send(s, payload, sizeof(payload) - 1, &fd, 1);
}

int oci_pty_pair(unsigned rows, unsigned cols, int *ret_master, int *ret_replica) {
        _cleanup_close_ int m = -EBADF, r = -EBADF;
        struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
        struct termios t;
        char name[64];
        int unlock = 0;

        m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return -errno;
        if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ptsname_r(m, name, sizeof(name)) != 0)
                return -errno;
        r = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (r < 0)
                return -errno;
        /* The host pty only carries bytes: the sandbox's own terminal does the line discipline
         * (echo, ^C), so this one must not do it a second time. */
        if (tcgetattr(r, &t) < 0)
                return -errno;
        cfmakeraw(&t);
        if (tcsetattr(r, TCSANOW, &t) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0)
                return -errno;
        *ret_master = TAKE_FD(m);
        *ret_replica = TAKE_FD(r);
        return 0;
}
