"""What tests/python and tests/gpu share: tests/python's helpers
(``jaxmg_testing``, ``bad_inputs``, ``mpmd_launch``, ...) importable by
name from either folder, put on ``sys.path`` here once rather than by each
test file, and the fixtures both folders use (``nk``).

Imports nothing of jax: tests/python/conftest.py must set XLA_FLAGS before
jax is first imported, and pytest loads this conftest before it.
"""

import pathlib
import sys

import pytest

_HELPERS = str(pathlib.Path(__file__).resolve().parent / "python")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)


@pytest.fixture(scope="module")
def nk():
    """NetKet (tests/python/test_netket.py, tests/gpu/test_gpu_netket.py),
    imported when a test first needs it rather than when pytest collects a
    file (the import takes seconds of CPU, in every pytest-xdist worker);
    the tests skip without it. Importing NetKet sets its own mesh (one axis
    "S" over all devices) as jax's global mesh (its NETKET_SHARDING
    default); the other tests expect none, and NetKet's tests set NetKet's
    mesh themselves. jax is imported here, not at the top (see above)."""
    netket = pytest.importorskip("netket")
    import jax

    jax.sharding.set_mesh(None)
    return netket
