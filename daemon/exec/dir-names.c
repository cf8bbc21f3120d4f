/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dir-names.h"

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

char **dir_names_sorted(int dir_fd, size_t *ret_n) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), e;
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        char **names = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;

        if (!d) {
                e = errno;
                if (fd >= 0)
                        close(fd);
                errno = e;
                return NULL;
        }
        errno = 0;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n == alloc) {
                        char **p = realloc(names, (alloc = alloc ? 2 * alloc : 64) * sizeof(char *));
                        if (!p)
                                goto fail;
                        names = p;
                }
                if (!(names[n] = strdup(de->d_name)))
                        goto fail;
                n++;
                errno = 0;
        }
        if (errno != 0)
                goto fail;
        closedir(d);
        if (n)
                qsort(names, n, sizeof(char *), cmp_names);
        *ret_n = n;
        return names ? names : calloc(1, sizeof(char *));
fail:
        e = errno ? errno : ENOMEM;
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        closedir(d);
        errno = e;
        return NULL;
}
