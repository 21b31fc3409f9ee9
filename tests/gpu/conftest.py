"""GPU tests: every test in this directory is skipped when JAX has no GPU.

jax is imported lazily, inside the hooks, never at the top of this file:
tests/python/conftest.py must set XLA_FLAGS before jax is first imported, and
pytest may load this conftest first (``pytest tests/gpu tests/python``).
"""

import pathlib

import pytest

from gpu_env import gpu_devices

_HERE = pathlib.Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    # This hook sees the whole session's items: touch only this directory's.
    mine = [item for item in items if _HERE in pathlib.Path(str(item.path)).resolve().parents]
    if mine and not gpu_devices():
        skip = pytest.mark.skip(reason="no GPU: jax.devices() has no platform 'gpu'")
        for item in mine:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def gpus():
    devices = gpu_devices()
    if not devices:  # only reached when a test is run despite the marker
        pytest.skip("no GPU")
    return devices
