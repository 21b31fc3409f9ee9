"""The examples run and print the documented answers.

Each runs in its own Python process (sys.executable), on 4 CPU devices, as a
user would run it. The seeds' GPU examples are run on CPU by replacing
``jax.devices("gpu")`` with ``jax.devices()`` in their source.
"""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from mpmd_launch import xla_flags

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SEEDS = EXAMPLES / "seeds"
# The tests that start processes run one after another on one pytest-xdist
# worker (scripts/test.sh: --dist loadgroup): they look for shared memory
# segments and sockets left behind, which another worker's job would make.
pytestmark = pytest.mark.xdist_group("processes")

FLOAT = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"


def _env():
    env = dict(os.environ)
    env["XLA_FLAGS"] = xla_flags(4)
    env["JAX_PLATFORMS"] = "cpu"
    return env


def _run(args, timeout=300):
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{args} exited with {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
    return proc.stdout


def _run_source(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(source)
    return _run([str(path)])


def _cpu_source(path, replacements=()):
    """The example's source with the GPU device query (and any further
    replacements) swapped; each must occur exactly once, so that a change to
    the example fails here instead of silently testing something else."""
    source = path.read_text()
    for old, new in (('jax.devices("gpu")', "jax.devices()"), *replacements):
        assert source.count(old) == 1, f"{path.name}: expected one {old!r}"
        source = source.replace(old, new)
    return source


def _check_readme_output(out):
    """The README's answer: x = 1/k for k = 1..12 printed as a column, then True."""
    lines = out.strip().splitlines()
    assert lines[0].startswith("Devices:") and lines[0].count("CpuDevice") == 4, lines[0]
    assert lines[-1] == "True", out
    values = [float(v) for v in re.findall(FLOAT, "\n".join(lines[1:-1]))]
    assert len(values) == 12, out
    np.testing.assert_allclose(values, 1.0 / np.arange(1, 13), rtol=1e-7)


def test_minimal_example():
    _check_readme_output(_run([str(EXAMPLES / "minimal.py")]))


def test_seed_readme_minimal_on_cpu(tmp_path):
    _check_readme_output(
        _run_source(tmp_path, "readme_minimal.py", _cpu_source(SEEDS / "readme_minimal.py")))


def test_seed_tutorial_3_1_basic_usage():
    out = _run([str(SEEDS / "tutorial_3_1_basic_usage.py")]).strip()
    assert out.endswith("True"), out
    values = [float(v) for v in re.findall(FLOAT, out.splitlines()[-1].rsplit("]", 1)[0])]
    assert values == [0.5] * 4, out


def test_seed_tutorial_4_3_shardmap_ctx():
    out = _run([str(SEEDS / "tutorial_4_3_shardmap_ctx.py")]).strip()
    assert out.endswith("True"), out
    x_part, status_part = out.splitlines()[-1].split("]")[:2]
    assert [float(v) for v in re.findall(FLOAT, x_part)] == [0.125] * 4, out
    # status: shape (1,) on every device, out_specs P(None): one value, 0.
    assert [int(v) for v in re.findall(r"\d+", status_part)] == [0], out


# The tutorial's sizes (a 4000 x 100000 Jacobian, a 4000 x 4000 Gram matrix)
# take minutes on 2 CPU cores; the example runs here at 400 x 2000, the same
# shape of problem (N_samples << N_params, T_A=256 above the shard size 100).
TUTORIAL_6_SIZES = ("N_samples, N_params = 4000, 100000", "N_samples, N_params = 400, 2000")

# Appended to the tutorial: checks v against NumPy in the same process.
TUTORIAL_6_CHECK = """
import numpy as np
T_np, b_np, v_np = np.asarray(T_reg), np.asarray(b), np.asarray(v)
ref = np.linalg.solve(T_np, b_np)
print("CHECK replicated", bool(v.sharding.is_fully_replicated), v.shape, v.dtype)
print("CHECK backward", np.linalg.norm(T_np @ v_np - b_np) / (np.linalg.norm(T_np) * np.linalg.norm(v_np)))
print("CHECK forward", np.linalg.norm(v_np - ref) / np.linalg.norm(ref))
dt_ref = np.asarray(X).T @ ref
print("CHECK update", np.linalg.norm(np.asarray(delta_theta) - dt_ref) / np.linalg.norm(dt_ref))
"""


def test_seed_tutorial_6_complete_example_on_cpu(tmp_path):
    source = _cpu_source(SEEDS / "tutorial_6_complete_example.py", [TUTORIAL_6_SIZES])
    out = _run_source(tmp_path, "tutorial_6.py", source + TUTORIAL_6_CHECK)
    lines = out.strip().splitlines()
    assert "Update shape: (2000, 1)" in lines, out
    checks = {l.split()[1]: l.split(maxsplit=2)[2] for l in lines if l.startswith("CHECK ")}
    assert checks["replicated"] == "True (400, 1) float64", out
    assert float(checks["backward"]) < 1e-14, out
    assert float(checks["forward"]) < 1e-12, out
    assert float(checks["update"]) < 1e-12, out


def test_grad_minsr_example_matches_jnp():
    out = _run([str(EXAMPLES / "grad_minsr.py")])
    diff = float(re.search(r"relative difference to jnp.linalg.solve: (" + FLOAT + ")", out).group(1))
    assert diff < 1e-12, out
