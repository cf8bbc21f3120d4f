## python/: the sandboxd Python package (docs/python.md), standard library only. Not built or
## installed by make: `pip install ./python`, or the python3-sandboxd Debian package (debian/).
## Tested by tests/t-python.sh (against a daemon), tests/t-sidecar.sh (the runner sidecar) and
## tests/t-python-types.sh (mypy --strict).
EXTRA_DIST += \
	python/pyproject.toml \
	python/README.md \
	python/sandboxd/__init__.py \
	python/sandboxd/_common.py \
	python/sandboxd/_ops.py \
	python/sandboxd/_tree.py \
	python/sandboxd/_wire.py \
	python/sandboxd/aio.py \
	python/sandboxd/backend.py \
	python/sandboxd/client.py \
	python/sandboxd/errors.py \
	python/sandboxd/py.typed \
	python/sandboxd/replies.py \
	python/sandboxd/sidecar.py \
	python/sandboxd/terminal.py
