/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* image.import's archive side (daemon/exec/image-import.c) on any bytes: the input is applied
 * as an OCI layer (whiteouts on) beneath a fresh directory "root" that has a sibling "outside".
 * Whatever the input, nothing may appear in "outside" (no name escapes the root, no symlink is
 * followed), and nothing in the root may be setuid, setgid or a device node (allow_devices off).
 * A broken property aborts (a crash to libFuzzer, a "not ok" to the replay). Owners can only be
 * set as root; as another user the import stops at its first entry, and the checks still hold. */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "image-import.h"
#include "macro.h"
#include "rm-rf.h"

#define CHECK(x)                  \
        do {                      \
                if (!(x))         \
                        abort();  \
        } while (0)

static void check_tree(int dir_fd) {
        int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        CHECK(d);
        while ((de = readdir(d))) {
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                CHECK(fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(!(st.st_mode & (S_ISUID | S_ISGID)));
                CHECK(!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode));
                if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        CHECK(sub >= 0);
                        check_tree(sub);
                        close(sub);
                }
        }
        closedir(d);
}

static bool dir_empty(int dir_fd) {
        int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        bool empty = true;

        CHECK(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        empty = false;
        closedir(d);
        return empty;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const ImageCaps caps = { .max_bytes = 16u << 20, .max_files = 4096, .id_count = 65536 };
        char base[] = "/tmp/fuzz-image-layer.XXXXXX";
        ImageCounts counts = {};
        ImageFail fail;
        int src, top, root, outside;

        CHECK(mkdtemp(base));
        top = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(top >= 0 && mkdirat(top, "root", 0755) == 0 && mkdirat(top, "outside", 0755) == 0);
        root = openat(top, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        outside = openat(top, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(root >= 0 && outside >= 0);
        src = memfd_create("layer", MFD_CLOEXEC);
        CHECK(src >= 0 && write(src, data, size) == (ssize_t) size && lseek(src, 0, SEEK_SET) == 0);
        (void) image_layer_apply(src, NULL, root, true, &caps, &counts, NULL, NULL, &fail);
        close(src);
        CHECK(dir_empty(outside));
        check_tree(root);
        close(root);
        close(outside);
        CHECK(rm_rf_at(top, "root") == 0 && unlinkat(top, "outside", AT_REMOVEDIR) == 0);
        close(top);
        CHECK(rmdir(base) == 0);
        return 0;
}
