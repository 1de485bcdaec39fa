# Set-up commands: `make demo` (the main job), `make test` (the test suite) and `make lint`
# (ruff and mypy; CI runs it before the tests).
# Each creates the local virtual environment .venv from PyPI wheels on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-scale lint venv clean phdf5

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	@# PyDarshan (the optional `darshan` extra) from its wheel only, which bundles libdarshan-util:
	@# without one for this platform the tests of Darshan logs are skipped, saying so.
	$(PY) -m pip install --quiet --only-binary=darshan -e ".[darshan]" \
	  || echo "no PyDarshan wheel for this platform: the tests reading Darshan logs will be skipped"
	$(call VEROS,$(VENV))
	touch $(STAMP)

# Veros, a pure-Python ocean model, for the optional test of a real model's output
# (tests/test_veros.py, skipped without it): the libraries it needs, then Veros without its own
# exact pins (they would replace this environment's numpy, h5py or pillow).
VEROS = $(1)/bin/python -m pip install --quiet scipy loguru tqdm click entrypoints requests \
	  && $(1)/bin/python -m pip install --quiet --no-deps "veros>=1.7" \
	  || echo "no Veros here: the test of a real model's output will be skipped"

venv: $(STAMP)

# Every MPI rank imports h5subfile: compile its bytecode once, here, rather than in every rank of
# every job (an editable install writes none, nor does Python under PYTHONDONTWRITEBYTECODE).
BYTECODE := $(PY) -m compileall -q src

demo: $(STAMP)
	$(BYTECODE)
	$(VENV)/bin/h5subfile demo

test: $(STAMP)
	$(BYTECODE)
	$(PY) -m pytest -q

# The 256-rank round trip (2-3 minutes on 2 cores), kept out of `make test` to hold the suite
# under 10 minutes; CI runs it right after `make test`.
test-scale: $(STAMP)
	$(BYTECODE)
	$(PY) -m pytest -q -m scale

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

# Optional baseline: parallel HDF5 (Debian's libhdf5-mpich-dev, HDF5 1.10.8) with mpi4py and h5py
# compiled against Debian's MPICH, plus h5subfile itself, so that every API of `h5subfile bench`
# runs in one environment. Not needed by `make demo` or `make test`.
PHDF5_VENV := .venv-phdf5
PHDF5_STAMP := $(PHDF5_VENV)/.installed
HDF5_MPICH := /usr/lib/x86_64-linux-gnu/hdf5/mpich

phdf5: $(PHDF5_STAMP)

$(PHDF5_STAMP): pyproject.toml
	@command -v mpicc.mpich >/dev/null && test -d $(HDF5_MPICH) || { \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libhdf5-mpich-dev mpich pkg-config; }
	$(PYTHON) -m venv $(PHDF5_VENV)
	$(PHDF5_VENV)/bin/pip install --quiet --upgrade pip
	$(PHDF5_VENV)/bin/pip install --quiet numpy "setuptools>=77" wheel Cython pkgconfig
	MPI4PY_BUILD_MPICC=mpicc.mpich $(PHDF5_VENV)/bin/pip install --quiet --no-binary=mpi4py "mpi4py>=4"
	CC=mpicc.mpich HDF5_MPI=ON HDF5_PKGCONFIG_NAME=hdf5-mpich \
	  $(PHDF5_VENV)/bin/pip install --quiet --no-build-isolation --no-binary=h5py h5py
	$(PHDF5_VENV)/bin/pip install --quiet --no-deps -e .
	$(PHDF5_VENV)/bin/pip install --quiet pytest hypothesis matplotlib hdf5plugin xxhash
	$(PHDF5_VENV)/bin/pip install --quiet --no-deps h5netcdf  # not over the parallel h5py
	$(call VEROS,$(PHDF5_VENV))
	printf '#!/bin/sh\nexec %s "$$@"\n' "$$(command -v mpiexec.mpich)" > $(PHDF5_VENV)/bin/mpiexec
	chmod +x $(PHDF5_VENV)/bin/mpiexec
	$(PHDF5_VENV)/bin/python -c "import h5py; assert h5py.get_config().mpi, 'h5py built without MPI'; print('parallel h5py', h5py.version.version, 'HDF5', h5py.version.hdf5_version)"
	touch $(PHDF5_STAMP)

clean:
	rm -rf $(VENV) $(PHDF5_VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis build src/*.egg-info
