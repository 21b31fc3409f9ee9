"""The Python side of the local model (cuSOLVERMp) that runs without GPUs:
the nodes a group spans and the engine check that refuses a group across
nodes on CPU devices (naming why and the extra), the attribute comm_id's
layout and the ids' sharing in one process, the attributes a call carries
(read from the lowered program), and where the CUDA library is told to find
libnccl and libcusolverMp. The sharing between processes through JAX's
key-value store: test_mpmd.py (scenario "comm_ids")."""

import functools

import numpy as np
import pytest
import jax
from jax.sharding import Mesh, PartitionSpec as P

import jaxmg
from jaxmg._src import _checks, _ffi_call, _geometry, _mode, _native, _placement
from jaxmg._src.core import potrs as potrs_core


def test_nodes_spanned_is_the_widest_group():
    nodes = ["a", "a", "b", "c"]  # process -> node
    assert _mode.nodes_spanned(np.array([[0, 1], [2, 3]]), nodes) == 2  # (a, a), (b, c)
    assert _mode.nodes_spanned(np.array([[0, 1], [1, 0]]), nodes) == 1
    assert _mode.nodes_spanned(np.array([[0, 2, 3, 1]]), nodes) == 3


def test_one_process_groups_span_one_node(cpu_devices):
    mesh = Mesh(np.array(cpu_devices).reshape(2, 2), ("S", "T"))
    assert _mode.call_nodes(mesh, ("T",), ("S",)) == 1
    assert _mode.call_nodes(mesh, ("S", "T"), ()) == 1
    assert _mode.ambient_nodes(4) == 1


def test_the_engine_check_takes_nodes():
    assert _native.engine_check("cpu", "potrs", 2, "float64", 16, 4, nodes=1) == (True, "lapack")
    ok, why = _native.engine_check("cpu", "potrs", 2, "float64", 16, 4, nodes=2)
    assert not ok and "lapack" in why and "2 nodes" in why


def test_the_engine_model_is_the_c_librarys(monkeypatch):
    """The model of an engine comes from the C library's engine table
    (jaxmg_engine_model_cpu), and the geometry keeps the chosen engine's."""
    assert _native.engine_model("cpu", "lapack") == "leader"
    assert _native.engine_model("cpu", "lapack-local") == "local"
    with pytest.raises(ValueError, match="'cusolvermp' is not an engine of the cpu library"):
        _native.engine_model("cpu", "cusolvermp")
    f64 = np.dtype(np.float64)
    g = _geometry.choose_geometry("potrs", 16, 4, f64, 4, False, "cpu")
    assert (g.engine, g.local) == ("lapack", False)
    monkeypatch.setenv("JAXMG_ENGINE", "lapack-local")
    g = _geometry.choose_geometry("potrs", 16, 4, f64, 4, False, "cpu")
    assert (g.engine, g.local) == ("lapack-local", True)
    choice = _native.engine_choice("cpu", "potrs", 4, "float64", 16, 4)
    assert choice is not None and choice.ok and choice.local


def test_the_cuda_engines_models_where_the_cuda_library_loads():
    """cuSOLVERMp is the CUDA library's engine of the local model (asked of
    the library, which loads without GPUs)."""
    if _native.engine_model("CUDA", "cusolvermp") is None:
        pytest.skip("jaxmg's CUDA library is not loaded")
    assert _native.engine_model("CUDA", "cusolvermp") == "local"
    for name in ("cusolverdn", "cusolverdn-gather", "cusolvermg"):
        assert _native.engine_model("CUDA", name) == "leader", name
    with pytest.raises(ValueError, match="'lapack' is not an engine of the CUDA library"):
        _native.engine_model("CUDA", "lapack")


@pytest.mark.parametrize("T_A", [None, 4])
def test_a_group_across_nodes_on_cpu_is_a_value_error_naming_why(T_A):
    f64 = np.dtype(np.float64)
    with pytest.raises(ValueError) as e:
        _geometry.choose_geometry("potrs", 16, 2, f64, T_A, True, "cpu", nodes=2)
    text = str(e.value)
    assert "over 2 nodes" in text and "spans 2 nodes" in text, text
    assert 'pip install "jaxmg[cuda13]"' in text, text
    g = _geometry.choose_geometry("potrs", 16, 2, f64, T_A, True, "cpu", nodes=1)
    assert g.engine == "lapack"


def test_comm_id_attribute_layout():
    ids = [bytes(range(128)), bytes(range(128, 256))]
    attr = _mode.comm_id_attr(ids)
    assert len(attr) == 32 and all(isinstance(v, int) for v in attr)
    raw = np.asarray(attr, dtype=np.int64).tobytes()
    for g, made in enumerate(ids):  # group g's id at [16 g, 16 g + 16)
        assert np.asarray(attr[16 * g:16 * g + 16], np.int64).tobytes() == made
    assert raw == b"".join(ids)
    with pytest.raises(ValueError, match="127 bytes"):
        _mode.comm_id_attr([bytes(127)])


def test_device_set_tag_is_by_devices_in_rank_order():
    assert _mode.device_set_tag([0, 1, 2]) == _mode.device_set_tag((0, 1, 2))
    assert _mode.device_set_tag([0, 1, 2]) != _mode.device_set_tag([1, 0, 2])
    assert _mode.device_set_tag([1, 2]) != _mode.device_set_tag([12])


def test_ids_in_one_process_are_made_here_once_per_device_set():
    made = []

    def make():
        made.append(np.random.default_rng(len(made)).bytes(128))
        return made[-1]

    cache = {}
    ids = _mode.share_comm_ids(["a", None, "b"], [0, 0, 0], 0, 0, make, cache)
    assert ids == [made[0], bytes(128), made[1]] and len(made) == 2
    # The same device sets again (a retrace, another op): the same ids.
    assert _mode.share_comm_ids(["b", "a"], [0, 0], 0, 0, make, cache) == [made[1], made[0]]
    assert len(made) == 2
    # Without a cache, fresh ones.
    assert _mode.share_comm_ids(["a"], [0], 0, 0, make, None) == [made[2]]


def test_a_call_carries_nodes_and_comm_id_as_attributes(cpu_devices):
    """The lowered program's FFI call has attribute comm_id (groups x 16
    int64) and nodes when a Call says so, and neither otherwise."""
    mesh = Mesh(np.array(cpu_devices).reshape(2, 2), ("S", "T"))
    rows = _checks.check_specs("potrs", mesh, (P("T", None), P(None, None)), 2)
    g = _geometry.geometry("potrs", 8, 2, 4, True)
    comm = _mode.comm_id_attr([bytes([7]) * 128, bytes([9]) * 128])
    a = np.eye(8)
    b = np.ones((8, 1))

    def lowered(call):
        fn = _placement.mapped(functools.partial(potrs_core.local, call), mesh,
                               in_specs=(rows.spec, P(None, None)),
                               out_specs=(P(None, None), P()))
        return jax.jit(fn).lower(a, b).as_text()

    plain = lowered(_ffi_call.Call(g, rows.axes, rows.others, 1))
    assert "comm_id" not in plain and "nodes" not in plain
    text = lowered(_ffi_call.Call(g, rows.axes, rows.others, 1, nodes=3, comm_id=comm))
    assert "nodes = 3 : i64" in text, text
    assert "comm_id = dense<[" in text and ": tensor<32xi64>" in text, text
    values = text.split("comm_id = dense<[")[1].split("]>")[0].split(",")
    assert [int(v) for v in values] == list(comm)


def test_the_process_grid_follows_the_two_axes_of_a_rows():
    """A's rows over two mesh axes (P(r, c) read as rows over both) run on an
    r x c grid; over one axis (or three), on the 1 x P line."""
    sizes = {"r": 2, "c": 4, "z": 3}
    assert _ffi_call.local_grid_rows(("r", "c"), sizes) == 2
    assert _ffi_call.local_grid_rows(("c", "r"), sizes) == 4
    assert _ffi_call.local_grid_rows(("r",), sizes) == 1
    assert _ffi_call.local_grid_rows(("r", "c", "z"), sizes) == 1
    assert _ffi_call.local_grid_rows(("r", "z"), {"r": 4, "z": 1}) == 4  # 4 x 1


def test_a_call_carries_grid_rows_for_a_grid_of_several_rows(cpu_devices):
    """The attribute grid_rows goes with comm_id when the grid has several
    rows, and is left out on the line (the C library's default, 1)."""
    mesh = Mesh(np.array(cpu_devices).reshape(2, 2), ("r", "c"))
    rows = _checks.check_specs("potrs", mesh, (P(("r", "c"), None), P(None, None)), 2)
    g = _geometry.geometry("potrs", 8, 4, 2, True)
    comm = _mode.comm_id_attr([bytes([5]) * 128])
    fn = lambda call: jax.jit(_placement.mapped(  # noqa: E731
        functools.partial(potrs_core.local, call), mesh, in_specs=(rows.spec, P(None, None)),
        out_specs=(P(None, None), P()))).lower(np.eye(8), np.ones((8, 1))).as_text()
    on_grid = fn(_ffi_call.Call(g, rows.axes, rows.others, 1, comm_id=comm, grid_rows=2))
    assert "grid_rows = 2 : i64" in on_grid, on_grid
    assert "grid_rows" not in fn(_ffi_call.Call(g, rows.axes, rows.others, 1, comm_id=comm))


def test_cusolvermp_availability_says_why_on_cpu():
    if _native.load()["CUDA"]:
        pytest.skip("the CUDA library is loaded here")
    ok, why = jaxmg.cusolvermp_available()
    assert not ok and "CUDA library" in why


def test_where_the_libraries_are_looked_for(tmp_path, monkeypatch):
    monkeypatch.delenv("JAXMG_CUSOLVERMP_LIB", raising=False)
    for rel in ("nvidia/cu13/lib/libcusolverMp.so.0", "nvidia/nccl/lib/libnccl.so.2"):
        (tmp_path / rel).parent.mkdir(parents=True)
        (tmp_path / rel).write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _native.cusolvermp_path() == str(tmp_path / "nvidia/cu13/lib/libcusolverMp.so.0")
    if _native._loaded("libnccl.so.2") is None:
        assert _native.nccl_path() == str(tmp_path / "nvidia/nccl/lib/libnccl.so.2")
    monkeypatch.setenv("JAXMG_CUSOLVERMP_LIB", "/elsewhere/libcusolverMp.so.0")
    assert _native.cusolvermp_path() == "/elsewhere/libcusolverMp.so.0"


def test_ambient_ids_are_numbered_per_kind_of_call(monkeypatch):
    """Inside the user's shard_map the ids' keys are numbered per kind of
    call (op, axes, sizes): a call of another kind that only some processes
    make (and trace) does not shift the keys of the calls they all make."""
    seen = []
    monkeypatch.setattr(_mode, "share_comm_ids",
                        lambda tags, makers, me, job, make, cache: (
                            seen.append(list(tags)), [bytes(128)] * len(tags))[1])
    monkeypatch.setattr(_mode, "_ambient_calls", {})
    solve = ("potrs", ("x",), (4,))
    other = ("syevd", ("x",), (2,))
    _mode.ambient_comm_ids(1, 7, solve, "CUDA")
    _mode.ambient_comm_ids(2, 7, other, "CUDA")  # made by this process only, say
    _mode.ambient_comm_ids(1, 7, solve, "CUDA")
    first, extra, second = seen
    assert first[0].endswith("-0-0") and second[0].endswith("-1-0"), seen
    assert first[0].rsplit("-", 2)[0] == second[0].rsplit("-", 2)[0] != extra[0].rsplit("-", 2)[0]
    assert [t.rsplit("-", 2)[1:] for t in extra] == [["0", "0"], ["0", "1"]]


def test_where_the_cuda_libraries_are_looked_for(tmp_path, monkeypatch):
    """libjaxmg_cuda.so's CUDA libraries (issue 29): those this process has
    not loaded, from the folder JAX loaded its cuSOLVER from, else from
    NVIDIA's wheels on sys.path."""
    wheels = tmp_path / "site" / "nvidia/cu13/lib"
    jax_dir = tmp_path / "jax_cuda"
    for folder in (wheels, jax_dir):
        folder.mkdir(parents=True)
        for soname in _native._CUDA_LINKED:
            (folder / soname).write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    nothing_loaded = {}.get
    assert _native.cuda_library_paths(nothing_loaded) == [
        str(wheels / soname) for soname in _native._CUDA_LINKED]
    jax_loaded = {"libcudart.so.13": str(jax_dir / "libcudart.so.13"),
                  "libcusolver.so.12": str(jax_dir / "libcusolver.so.12")}.get
    assert _native.cuda_library_paths(jax_loaded) == [
        str(jax_dir / "libcublas.so.13"), str(jax_dir / "libcusolverMg.so.12")]
    (jax_dir / "libcusolverMg.so.12").unlink()
    assert _native.cuda_library_paths(jax_loaded) == [
        str(jax_dir / "libcublas.so.13"), str(wheels / "libcusolverMg.so.12")]
