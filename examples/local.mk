## examples/: small clients of sandboxd, built and run by `make check` (tests/t-examples.sh).
## run-command.c and copy-files.c use libsandbox; run_command.py and copy_files.py the sandboxd
## Python package (python/).
## Neither is installed: they are for reading and copying.
check_PROGRAMS += examples/c/run-command
examples_c_run_command_SOURCES = examples/c/run-command.c
examples_c_run_command_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
examples_c_run_command_LDADD = lib/libsandbox.la $(JSONC_LIBS)
check_PROGRAMS += examples/c/copy-files
examples_c_copy_files_SOURCES = examples/c/copy-files.c
examples_c_copy_files_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
examples_c_copy_files_LDADD = lib/libsandbox.la $(JSONC_LIBS)

TESTS += tests/t-examples.sh
EXTRA_DIST += tests/t-examples.sh examples/python/run_command.py examples/python/copy_files.py

## t-v1.sh checks the cgroup v1 hierarchies after every other integration test has run.
tests/t-v1.log: tests/t-examples.log
