"""The Python tests run on 4 CPU devices.

XLA reads XLA_FLAGS once, when JAX creates its CPU client, so the flag is set
here, at the top of the conftest, before anything imports jax. (pytest loads
every conftest given on the command line before collecting any test module,
so this also holds for ``pytest tests/gpu tests/python``, as long as no
conftest imports jax at its top level; tests/gpu/conftest.py does not.)
"""

import os
import sys

_FLAG = "--xla_force_host_platform_device_count=4"
if "jax" not in sys.modules:
    _flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in _flags:
        os.environ["XLA_FLAGS"] = (_flags + " " + _FLAG).strip()

# A rendezvous on CPU devices completes in milliseconds; should a test ever
# leave participants waiting, fail it after a minute rather than the
# library's default five.
os.environ.setdefault("JAXMG_RENDEZVOUS_TIMEOUT", "60")

import zlib  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jaxmg_testing as jt  # noqa: E402

NDEV = 4


@pytest.fixture(scope="session")
def cpu_devices():
    """The 4 CPU devices the tests run on (explicitly CPU: on a GPU machine
    JAX's default backend would be the GPUs)."""
    devices = jax.devices("cpu")
    if len(devices) < NDEV:
        pytest.fail(
            f"the Python tests need {NDEV} CPU devices, JAX has {len(devices)}: jax was "
            f"imported before tests/python/conftest.py could set XLA_FLAGS={_FLAG}"
        )
    return devices[:NDEV]


@pytest.fixture(scope="session")
def mesh(cpu_devices):
    """A 1-D mesh over the 4 CPU devices, axis "x" (jax.make_mesh's default
    axis types: Explicit in this jax)."""
    return jax.make_mesh((NDEV,), ("x",), devices=cpu_devices)


@pytest.fixture(scope="session")
def auto_mesh(cpu_devices):
    """The same mesh with Auto axes (as NetKet builds them; where
    test_derivatives.py runs check_grads)."""
    from jax.sharding import AxisType

    return jax.make_mesh((NDEV,), ("x",), devices=cpu_devices, axis_types=(AxisType.Auto,))


@pytest.fixture(scope="session")
def one_device_mesh(cpu_devices):
    """A 1-D mesh over the first CPU device alone, axis "x" (Explicit, as
    ``mesh``): a group of one device, where syevd leaves V in A's buffer."""
    return jax.make_mesh((1,), ("x",), devices=cpu_devices[:1])


@pytest.fixture(scope="session")
def one_device_auto_mesh(cpu_devices):
    """The same with an Auto axis (where check_grads runs, as ``auto_mesh``)."""
    from jax.sharding import AxisType

    return jax.make_mesh((1,), ("x",), devices=cpu_devices[:1], axis_types=(AxisType.Auto,))


@pytest.fixture
def rng(request):
    """Fresh random inputs for every test, reproducible from the test's id
    (crc32, not hash(): stable across processes)."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


@pytest.fixture
def hpd(rng):
    """hpd(n, dtype, shift=1.0): a random well-conditioned HPD matrix."""
    return lambda n, dtype, shift=1.0: jt.make_hpd(rng, n, dtype, shift)


@pytest.fixture
def hermitian(rng):
    """hermitian(n, dtype): a random indefinite Hermitian matrix."""
    return lambda n, dtype: jt.make_hermitian(rng, n, dtype)


@pytest.fixture
def rhs(rng):
    """rhs(n, nrhs, dtype): a random b, (n,) for nrhs None, else (n, nrhs)."""
    return lambda n, nrhs, dtype: jt.make_rhs(rng, n, nrhs, dtype)
