#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Replays the request fuzz corpus through the fuzz target built with the normal compiler (TAP).
# `make check` exports top_srcdir and top_builddir; the corpus is read from the source tree and
# the driver from the build tree, so this works in a VPATH build and under distcheck.
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$here/../..}"
: "${top_builddir:=$top_srcdir}"
exec "$top_builddir/tests/fuzz/fuzz-request-replay" "$top_srcdir/tests/fuzz/corpus/request"
