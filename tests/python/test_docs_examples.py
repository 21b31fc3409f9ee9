"""Every Python example of the documentation runs, as a user would run it.

The examples are the ```python code blocks of README.md and of the
documentation site's pages (docs/**/*.md, less docs/gpu-runs/ and
docs/gpu-notes.md, the records of GPU runs). Each block runs on its own, in
a fresh Python process (sys.executable) on 4 CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=4``, beside the test
run's own XLA flags, ``JAX_PLATFORMS=cpu``), so that a block copied into a
fresh session works;
a block that raises (an ``assert`` included) fails its test.

An HTML comment on the line before a block's fence, ``<!-- example: ... -->``,
says how it runs (the site and GitHub render nothing for it):

- ``gpu``: needs GPUs; skipped here unless JAX sees a GPU (run with
  ``JAXMG_DOCS_GPU=1`` on a GPU machine to run it on the GPUs instead);
- ``processes=N``: a program for one process per device, launched as
  ``mpirun -np N`` launches it: it runs in N processes of one CPU device
  each, with the environment variables of Open MPI 4's launcher that
  ``jax.distributed.initialize()`` reads (the coordinator on this machine);
- ``netket``: needs NetKet (skipped where it is not installed).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import random
import re
import socket
import subprocess
import sys

import pytest

from mpmd_launch import xla_flags

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Records of GPU runs, not part of the site: their code is history.
RECORDS = (DOCS / "gpu-runs", DOCS / "gpu-notes.md")
TIMEOUT_S = 300

FENCE = re.compile(r"^(\s*)```+\s*(\S*)")
MARKER = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
KNOWN = re.compile(r"^(gpu|netket|processes=\d+)$")


def _pages() -> list[pathlib.Path]:
    pages = [ROOT / "README.md"]
    for path in sorted(DOCS.rglob("*.md")):
        if not any(path == r or r in path.parents for r in RECORDS):
            pages.append(path)
    return pages


def _blocks(path: pathlib.Path):
    """(line of the fence, 1-based; markers; source) of every Python block."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(2).lower(), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if lang not in ("python", "py"):
            continue
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        marker = MARKER.match(lines[j]) if j >= 0 else None
        markers = tuple(w.strip() for w in marker.group(1).split(",")) if marker else ()
        indent = len(m.group(1))
        yield start + 1, markers, "\n".join(line[indent:] for line in body) + "\n"


EXAMPLES = [(page, line, markers, source) for page in _pages()
            for line, markers, source in _blocks(page)]


def _id(example) -> str:
    page, line, _, _ = example
    return f"{page.relative_to(ROOT)}:{line}"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAXMG_", "OMPI_", "SLURM_", "JAX_"))}
    env["XLA_FLAGS"] = xla_flags(4)
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _gpu_wanted() -> bool:
    return os.environ.get("JAXMG_DOCS_GPU") == "1"


def _check(proc: subprocess.CompletedProcess, where: str) -> None:
    assert proc.returncode == 0, (
        f"the example at {where} exited with {proc.returncode}\n"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-6000:]}")


def _run_one(path: pathlib.Path, where: str, env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    _check(proc, where)


def _free_port_job_id() -> tuple[int, int]:
    """An Open MPI 4 job id whose coordinator port (as JAX derives it from
    the job id: jax/_src/clusters/ompi_cluster.py) is free here."""
    for _ in range(50):
        job = random.randrange(1, 2**20) * 2**12
        port = (job // 2**12) % 2**12 + (65535 - 2**12 + 1)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return job, port
    raise RuntimeError("no free port for the coordinator")


def _run_processes(path: pathlib.Path, where: str, n: int) -> None:
    job, _ = _free_port_job_id()
    procs = []
    for rank in range(n):
        env = _env(OMPI_MCA_orte_hnp_uri=f"{job}.0;tcp://127.0.0.1:1",
                   OMPI_COMM_WORLD_SIZE=str(n), OMPI_COMM_WORLD_RANK=str(rank),
                   OMPI_COMM_WORLD_LOCAL_RANK=str(rank), JAXMG_RENDEZVOUS_TIMEOUT="60")
        env["XLA_FLAGS"] = xla_flags(None)  # one CPU device per process
        procs.append(subprocess.Popen([sys.executable, str(path)], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=TIMEOUT_S)
            results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, proc in enumerate(results):
        _check(proc, f"{where} (process {rank} of {n})")


def _params():
    for example in EXAMPLES:
        _, _, markers, _ = example
        marks = []
        if any(m.startswith("processes=") for m in markers):
            # Processes that meet through shared memory and sockets: run
            # beside the other tests that start processes and look for what
            # they leave behind (scripts/test.sh: --dist loadgroup).
            marks.append(pytest.mark.xdist_group("processes"))
        yield pytest.param(example, id=_id(example), marks=marks)


@pytest.mark.parametrize("example", list(_params()))
def test_example_runs(example, tmp_path):
    page, line, markers, source = example
    where = f"{page.relative_to(ROOT)}:{line}"
    unknown = [m for m in markers if not KNOWN.match(m)]
    assert not unknown, f"{where}: unknown example marker(s) {unknown}"
    if "gpu" in markers and not _gpu_wanted():
        pytest.skip("a GPU example (JAXMG_DOCS_GPU=1 runs it on GPUs)")
    if "netket" in markers and importlib.util.find_spec("netket") is None:
        # Looked for, not imported: the example imports it in its own
        # process, and importing NetKet here would set its mesh as this
        # process's global mesh for the tests that follow.
        pytest.skip("needs NetKet, which is not installed")
    script = tmp_path / "example.py"
    script.write_text(source)
    processes = [int(m.split("=")[1]) for m in markers if m.startswith("processes=")]
    if processes:
        _run_processes(script, where, processes[0])
    elif "gpu" in markers:
        env = _env()
        env.pop("JAX_PLATFORMS")
        env.pop("XLA_FLAGS")
        _run_one(script, where, env)
    else:
        _run_one(script, where, _env())


def test_the_pages_hold_examples():
    """The extraction finds the pages and their blocks (a broken pattern
    would otherwise pass by running nothing)."""
    pages = {page for page, _, _, _ in EXAMPLES}
    assert ROOT / "README.md" in pages
    assert (DOCS / "getting-started.md") in pages
    assert len(EXAMPLES) >= 15, len(EXAMPLES)
