"""What tests/python and tests/gpu share: tests/python's helpers
(``jaxmg_testing``, ``bad_inputs``, ``mpmd_launch``, ...) importable by
name from either folder, put on ``sys.path`` here once rather than by each
test file.

Imports nothing of jax: tests/python/conftest.py must set XLA_FLAGS before
jax is first imported, and pytest loads this conftest before it.
"""

import pathlib
import sys

_HELPERS = str(pathlib.Path(__file__).resolve().parent / "python")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)
