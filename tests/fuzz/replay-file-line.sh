#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Replays the file-line fuzz corpus (the fast path of file.chunk lines and data events against
# the general parser) through the target built with the normal compiler (TAP).
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$here/../..}"
: "${top_builddir:=$top_srcdir}"
exec "$top_builddir/tests/fuzz/fuzz-file-line-replay" "$top_srcdir/tests/fuzz/corpus/file-line"
