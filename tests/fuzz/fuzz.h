/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libFuzzer entry point, shared by the fuzz targets and the corpus replay driver. */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
