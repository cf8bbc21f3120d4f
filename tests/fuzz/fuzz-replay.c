/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs a fuzz target over saved inputs with an ordinary compiler, for `make check`:
 *   fuzz-replay DIR|FILE...
 * Each file runs in a child process, so that a crash or a broken property (abort) of one input
 * is a "not ok" line for that file and the others still run. Output is TAP. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "fuzz.h"
#include "macro.h"

/* Exactly the file's bytes in an allocation of that size, so that ASan sees any over-read. */
static int read_file(const char *path, uint8_t **ret, size_t *ret_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0)
                return negative_errno();
        _cleanup_free_ uint8_t *buf = malloc(st.st_size > 0 ? (size_t) st.st_size : 1);
        size_t n = 0;
        if (!buf)
                return -ENOMEM;
        while (n < (size_t) st.st_size) {
                ssize_t k = read(fd, buf + n, (size_t) st.st_size - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? negative_errno() : -EIO;
                n += (size_t) k;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = n;
        return 0;
}

static void replay_one(const char *path, const char *name) {
        _cleanup_free_ uint8_t *data = NULL;
        size_t size = 0;
        int r = read_file(path, &data, &size), status = 0;

        if (r < 0) {
                ok(false, "%s: cannot read: %s", name, strerror(-r));
                return;
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
                ok(false, "%s: fork: %s", name, strerror(errno));
                return;
        }
        if (pid == 0) {
                LLVMFuzzerTestOneInput(data, size);
                /* exit(), not _exit(): under ASan, LeakSanitizer checks this input at exit. */
                exit(EXIT_SUCCESS);
        }
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (!ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (%zu bytes)", name, size)) {
                if (WIFSIGNALED(status))
                        diag("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
                else
                        diag("exited with status %d", WEXITSTATUS(status));
        }
}

static int by_name(const struct dirent **a, const struct dirent **b) {
        return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_hidden(const struct dirent *d) {
        return d->d_name[0] != '.';
}

static void replay_dir(const char *dir) {
        struct dirent **names = NULL;
        int n = scandir(dir, &names, not_hidden, by_name);

        if (n < 0) {
                ok(false, "%s: cannot list: %s", dir, strerror(errno));
                return;
        }
        for (int i = 0; i < n; i++) {
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
                replay_one(path, names[i]->d_name);
                free(names[i]);
        }
        free(names);
}

int main(int argc, char *argv[]) {
        if (argc < 2) {
                fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
                return EXIT_FAILURE;
        }
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
                        replay_dir(argv[i]);
                else
                        replay_one(argv[i], argv[i]);
        }
        if (tap_count == 0)
                skip_all("no inputs to replay");
        return done_testing();
}
