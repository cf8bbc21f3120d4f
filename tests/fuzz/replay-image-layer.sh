#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Replays the image-layer fuzz corpus (image.import's archive side: nothing escapes the root, no
# setuid bit, no device node) through the target built with the normal compiler (TAP).
here=$(cd "$(dirname "$0")" && pwd)
: "${top_srcdir:=$here/../..}"
: "${top_builddir:=$top_srcdir}"
exec "$top_builddir/tests/fuzz/fuzz-image-layer-replay" "$top_srcdir/tests/fuzz/corpus/image-layer"
