#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Replays the tls-hello fuzz corpus (the SNI relay's parser of a connection's first bytes: real
# ClientHellos, ECH, HTTP requests) through the target built with the normal compiler (TAP).
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$here/../..}"
: "${top_builddir:=$top_srcdir}"
exec "$top_builddir/tests/fuzz/fuzz-tls-hello-replay" "$top_srcdir/tests/fuzz/corpus/tls-hello"
