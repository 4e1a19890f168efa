"""jaxparity's cache: converted models and compiled programs kept across commands, and never found for
a changed model, constant, option or package version; a changed weight passed as an argument reuses
the converted model and gives the new numbers."""

from __future__ import annotations

import json
import re
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxparity import cache as jcache
from jaxparity.cache import Cache
from jaxparity.paths import make_path


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache of this test's own."""
    from jaxparity.execution.warm import stop_daemons

    monkeypatch.setenv("JAXPARITY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("JAXPARITY_NO_CACHE", raising=False)
    yield tmp_path / "cache" / "artifacts"
    stop_daemons(tmp_path / "cache" / "serve")


def _entries(root, kind):
    return sorted(p.name for p in (root / kind).iterdir()) if (root / kind).is_dir() else []


def test_an_entry_is_made_once_kept_whole_and_the_least_recently_read_go_first(tmp_path):
    store = Cache(tmp_path, max_bytes=2500)
    made = []

    def make(size):
        def write(where):
            made.append(size)
            (where / "blob").write_bytes(b"x" * size)
            return {"size": size}
        return write

    a = store.fetch("k", "a", make(1000))
    assert not a.reused and store.fetch("k", "a", make(1000)).reused and made == [1000]
    def broken(where):
        (where / "half").write_bytes(b"y")
        raise RuntimeError("the converter failed")

    with pytest.raises(RuntimeError):
        store.fetch("k", "broken", broken)
    assert store.get("k", "broken") is None  # a maker that failed leaves nothing
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nor its scratch directory
    store.fetch("k", "b", make(1000))
    os.utime(store.get("k", "a").dir / "meta.json", (1, 1))  # a: read longest ago
    store.fetch("k", "c", make(1000))  # 3000 bytes > 2500: a goes
    assert store.get("k", "a") is None and store.get("k", "b") and store.get("k", "c")
    (store.get("k", "c").dir / "meta.json").unlink()  # an entry without its record is no entry
    assert store.get("k", "c") is None


def _model(w_scale=1.0, closed=2.0, op=jnp.tanh):
    bias = jnp.full((3,), closed, jnp.float32)  # closed over: a constant of the program

    def fn(params, x):
        return op(x @ params["w"] + bias)

    w = jnp.asarray(np.linspace(-1, 1, 12).reshape(4, 3) * w_scale, jnp.float32)
    return fn, ({"w": w}, jnp.asarray(np.linspace(-2, 2, 8).reshape(2, 4), jnp.float32))


def test_the_program_key_moves_with_code_constants_shapes_and_config_and_not_with_argument_values():
    from jaxparity.paths.staging import staged

    def key(fn, args):
        stage, leaves = staged(fn, args)
        return stage.program_key(leaves)

    fn, args = _model()
    same = key(fn, args)
    assert key(fn, (args[0], args[1] * 3)) == same  # values of inputs: not the program
    assert key(*_model(closed=2.5)) != same  # a constant inside the program
    assert key(*_model(op=jnp.sin)) != same  # the code
    assert key(fn, (args[0], jnp.ones((5, 4), jnp.float32))) != same  # a shape
    with jax.default_matmul_precision("highest"):
        assert key(fn, args) != same  # JAX's configuration


def test_package_versions_are_in_every_key(monkeypatch):
    import jaxparity.cache.keys as keys

    before = keys.fingerprint("savedmodel", "program", keys.package_versions("tensorflow"))
    real = keys.version
    monkeypatch.setattr(keys, "version", lambda name: "9.9.9" if name == "tensorflow" else real(name))
    assert keys.fingerprint("savedmodel", "program", keys.package_versions("tensorflow")) != before


@pytest.mark.slow
def test_savedmodel_and_tflite_reuse_their_conversion_and_still_compute_each_weight(fresh):
    fn, args = _model()
    first = make_path("savedmodel")
    out = np.asarray(first.run(fn, args))
    assert not any("reused" in n for n in first.notes)
    again = make_path("savedmodel")
    np.testing.assert_array_equal(np.asarray(again.run(fn, args)), out)
    assert any("SavedModel reused from jaxparity's cache" in n for n in again.notes)
    def converting(notes):  # what the conversion said (the serving process's own note says it was warm)
        return [n for n in notes if "reused" not in n and not n.startswith("served by")]

    assert converting(again.notes) == converting(first.notes) and converting(first.notes)
    # New weights, same program: the SavedModel is reused and computes the new weights' numbers.
    heavier = ({"w": args[0]["w"] * 3}, args[1])
    served = np.asarray(make_path("savedmodel").run(fn, heavier))
    np.testing.assert_allclose(served, np.asarray(jax.jit(fn)(*heavier)), rtol=1e-6)
    assert not np.array_equal(served, out) and _entries(fresh, "savedmodel") == _entries(fresh, "savedmodel")[:1]
    # The serving process's environment is not the conversion's: an XLA flag re-run serves the same model.
    flagged = make_path("savedmodel:XLA_FLAGS=--xla_cpu_enable_fast_math=false")
    flagged.run(fn, args)
    assert any("reused" in n for n in flagged.notes) and len(_entries(fresh, "savedmodel")) == 1
    # A changed constant and an export option are other conversions.
    make_path("savedmodel").run(*_model(closed=2.5))
    make_path("savedmodel:stablehlo=1.13.7").run(fn, args)
    assert len(_entries(fresh, "savedmodel")) == 3
    # TFLite: converted once from that same SavedModel, then reused; its converter options are its own.
    from jaxparity.paths import tflite

    lite = make_path("tflite")
    got = np.asarray(lite.run(fn, args))
    tflite._CONVERTED.clear()  # what this process holds: as the next command starts
    lite2 = make_path("tflite")
    np.testing.assert_array_equal(np.asarray(lite2.run(fn, args)), got)
    assert any("TFLite model reused" in n for n in lite2.notes) and not any("TFLite model reused" in n for n in lite.notes)
    make_path("tflite:optimizations=default").run(fn, args)
    assert len(_entries(fresh, "tflite")) == 2


@pytest.mark.slow
def test_onnx_and_iree_reuse_their_conversion(fresh):
    fn, args = _model()
    for spec, said, kind in (("onnx", "ONNX model reused", "onnx"), ("iree", "reused from jaxparity's cache", "iree")):
        first, again = make_path(spec), make_path(spec)
        out = np.asarray(first.run(fn, args))
        np.testing.assert_array_equal(np.asarray(again.run(fn, args)), out)
        assert not any(said in n for n in first.notes) and any(said in n for n in again.notes), again.notes
        heavier = ({"w": args[0]["w"] * 3}, args[1])
        np.testing.assert_allclose(np.asarray(make_path(spec).run(fn, heavier)), np.asarray(jax.jit(fn)(*heavier)),
                                   rtol=1e-5)
        assert len(_entries(fresh, kind)) == 1
    make_path("onnx:opset=18").run(fn, args)
    make_path("iree:flags=--iree-opt-level=O1").run(fn, args)
    assert len(_entries(fresh, "onnx")) == 2 and len(_entries(fresh, "iree")) == 2


def test_no_cache_reuses_nothing_and_keeps_nothing(fresh, monkeypatch):
    fn, args = _model()
    monkeypatch.setenv("JAXPARITY_NO_CACHE", "1")
    assert jcache.cache() is None
    path = make_path("onnx")
    path.run(fn, args)
    assert not fresh.exists() and not any("reused" in n for n in path.notes)


@pytest.mark.slow
def test_a_command_twice_reuses_compiled_programs_and_says_what_it_reused(fresh, tmp_path):
    from conftest import EXAMPLES, run_cli

    runs = [run_cli("compare", str(EXAMPLES / "mlp_bf16.py"), "--paths", "eager,jit,savedmodel", "--json", "-")
            for _ in range(2)]
    docs = [json.loads(r.stdout) for r in runs]
    jax_dir = fresh.parent / "jax"
    assert jax_dir.is_dir() and any(jax_dir.rglob("*-cache*"))  # JAX's own persistent cache, per CPU
    # ... compressed with zstd (zstandard is a dependency: a fifth of zlib's time), in a folder of its own
    from jaxparity.jaxcompat import cache_compression

    assert cache_compression() == "zstd" and [p.name.rsplit("-", 1)[1] for p in jax_dir.iterdir()] == ["zstd"]
    for a, b in zip(docs[0]["paths"], docs[1]["paths"]):
        assert a["verdict"] == b["verdict"] and a["leaves"] == b["leaves"]  # the same numbers
    saved = [next(p for p in d["paths"] if p["spec"] == "savedmodel")["notes"] for d in docs]
    assert not any("reused" in n for n in saved[0]) and any("SavedModel reused" in n for n in saved[1])
    # the serving process the first command started served the second, the model still loaded
    assert not any("before" in n for n in saved[0] if "served by" in n)
    assert any("kept warm between commands" in n and "this model already loaded there" in n for n in saved[1]), \
        saved[1]
    off = run_cli("compare", str(EXAMPLES / "mlp_bf16.py"), "--paths", "eager,savedmodel", "--json", "-",
                  "--no-cache")
    assert not any("reused" in n for p in json.loads(off.stdout)["paths"] for n in p["notes"])


def test_a_compile_for_the_compilers_dumps_compiles_even_when_jax_has_the_program(fresh, tmp_path):
    """explain reads XLA's per-pass dumps (which pass dropped a bf16 rounding); JAX leaves dump options out
    of its cache key, so a program it compiled before would be loaded and dump nothing."""
    import subprocess
    import sys

    script = tmp_path / "dumps.py"
    script.write_text(
        "import jax, jax.numpy as jnp\n"
        "from jaxparity.cache import jax_cache\n"
        "from jaxparity.explain.evidence.hlo import _dumps\n"
        "assert jax_cache()\n"
        "lowered = jax.jit(lambda x: (x.astype(jnp.bfloat16) * 3).astype(jnp.float32) + 1).lower(jnp.ones(4))\n"
        "lowered.compile()\n"
        "with _dumps(lowered, None, True) as steps:\n"
        "    print(len(steps))\n")
    counts = [int(subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                                 env=dict(os.environ)).stdout.split()[-1]) for _ in range(2)]
    assert any((fresh.parent / "jax").rglob("*-cache*"))  # the second process found the program in the cache
    assert counts[0] > 1 and counts[1] == counts[0]


def test_compiler_evidence_is_kept_and_a_changed_program_or_option_compiles_again(fresh):
    """explain's per-pass compile (which pass dropped a bf16 rounding) is read from the cache the second
    time, the same evidence; another program or another compile option is another entry."""
    from jaxparity.explain.evidence.hlo import compiler_evidence

    def fn(x):
        return (x.astype(jnp.bfloat16) * 3).astype(jnp.float32) + 1

    args = (jnp.linspace(-1, 1, 8),)
    first, second = (compiler_evidence(fn, args) for _ in range(2))
    assert first.widened and first.widened == second.widened  # XLA:CPU computes the bf16 multiply in f32
    assert not any("jaxparity's cache" in n for n in first.notes)
    assert any("read from jaxparity's cache" in n for n in second.notes)
    assert len(_entries(fresh, "compiler-evidence")) == 1
    other = compiler_evidence(lambda x: fn(x) * 2, args)
    options = compiler_evidence(fn, args, compiler_options={"xla_allow_excess_precision": False})
    assert not any("jaxparity's cache" in n for n in other.notes + options.notes)
    assert not options.widened  # without excess precision XLA rounds to bf16 as declared
    assert len(_entries(fresh, "compiler-evidence")) == 3


def test_the_cache_command_shows_what_is_kept_and_clear_keeps_the_environments(fresh):
    from conftest import run_cli

    fn, args = _model()
    make_path("onnx").run(fn, args)
    (fresh.parent / "envs" / "old").mkdir(parents=True)
    shown = run_cli("cache")
    assert shown.returncode == 0, shown.stderr
    assert str(fresh.parent) in shown.stdout and re.search(r"onnx\s+1 entry", shown.stdout), shown.stdout
    assert "serving processes waiting for the next command: 0" in shown.stdout
    cleared = run_cli("cache", "--clear")
    assert cleared.returncode == 0 and "cleared" in cleared.stdout
    assert not fresh.exists() and (fresh.parent / "envs" / "old").is_dir()
    assert re.search(r"onnx", run_cli("cache").stdout) is None


def test_per_op_values_are_kept_and_a_changed_input_weight_option_version_or_code_captures_again(fresh, monkeypatch):
    """explain's per-op values of a path, across commands: the same program, inputs, options and versions read
    them back bit for bit; anything that decides them captures again."""
    from jaxparity.cache import keys
    from jaxparity.localize import values as values_module
    from jaxparity.localize.program import flatten
    from jaxparity.localize.values import op_values

    w = jnp.asarray(np.linspace(-1, 1, 8, dtype=np.float32))

    def model(x, weights=w):
        return jnp.tanh(x * weights + 0.5) * 3.0

    x = jnp.asarray(np.linspace(0, 2, 8, dtype=np.float32))
    program = flatten(model, (x,))

    first = op_values(program, "jit", [x])
    again = op_values(program, "jit", [x])
    assert first.reused is None and again.reused is not None
    assert again.values.keys() == first.values.keys()
    assert all(again.values[k].tobytes() == first.values[k].tobytes() for k in first.values)
    assert len(_entries(fresh, "op-values")) == 1

    assert op_values(program, "jit", [x + 1]).reused is None  # another input
    other = flatten(lambda x: model(x, w * 2), (x,))  # another weight, closed over
    assert op_values(other, "jit", [x]).reused is None
    assert op_values(program, "jit:xla_backend_optimization_level=0", [x]).reused is None  # another option
    assert op_values(program, "eager", [x]).reused is None  # another path
    real = keys.version
    monkeypatch.setattr(keys, "version", lambda name: "9.9.9" if name == "onnxruntime" else real(name))
    assert op_values(program, "jit", [x]).reused is None  # another version of a package that may run it
    monkeypatch.setattr(keys, "version", real)
    monkeypatch.setattr(values_module, "_code_digest", lambda: "another jaxparity")
    assert op_values(program, "jit", [x]).reused is None  # another jaxparity
    monkeypatch.setenv("JAXPARITY_NO_CACHE", "1")
    assert op_values(program, "jit", [x]).reused is None


def test_per_op_values_are_kept_as_data_only_and_read_back_bit_for_bit(fresh, monkeypatch):
    """The cache of per-op values holds arrays in an .npz read without pickles and the rest in JSON (issue 55): a
    cache restored from elsewhere is never code to run. A bf16 scan's values, its loop carries, outputs and inputs
    come back bit for bit, and reading them never unpickles."""
    import pickle

    import jax

    from jaxparity.localize.program import flatten
    from jaxparity.localize.values import op_values

    def model(x):
        def step(h, xi):
            h = jnp.tanh(h * xi + 0.5).astype(jnp.bfloat16).astype(jnp.float32)
            return h, h * 2
        return jax.lax.scan(step, x[0], x)

    x = jnp.asarray(np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4))
    program = flatten(model, (x,))
    first = op_values(program, "jit", [x])
    (name,) = _entries(fresh, "op-values")
    entry = fresh / "op-values" / name
    assert {"values.json", "values.npz"} <= {p.name for p in entry.iterdir()}
    assert not list(entry.rglob("*.pkl"))

    def refuse(*_a, **_k):
        raise AssertionError("the per-op values were unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    again = op_values(program, "jit", [x])
    assert again.reused is not None
    for name in ("values", "args"):
        mine, theirs = getattr(first, name), getattr(again, name)
        assert mine.keys() == theirs.keys()
        assert all(mine[k].dtype == theirs[k].dtype and mine[k].tobytes() == theirs[k].tobytes() for k in mine)
    assert [o.tobytes() for o in first.outputs] == [o.tobytes() for o in again.outputs]
    assert first.loops.keys() == again.loops.keys() and first.loops
    for k, t in first.loops.items():
        u = again.loops[k]
        assert (t.trips, t.limit, t.impls) == (u.trips, u.limit, u.impls)
        assert [c is None or c.tobytes() for c in t.carries] == [c is None or c.tobytes() for c in u.carries]
    assert first.notes == again.notes and first.digests == again.digests


def test_each_path_is_captured_before_the_baseline_whose_values_another_worker_has_often_kept(fresh, monkeypatch):
    """Two workers explaining two paths both need the baseline's per-op values: each captures its own path
    first, so the baseline's are by then often in the cache, kept by the other (Keras's MobileNetV3: 3.4 s of
    eager one-op programs no longer loaded twice). A path whose values cannot be captured leaves the baseline's
    alone: the explanation reads neither."""
    from jaxparity.explain import localize as localize_module
    from jaxparity.localize.program import flatten
    from jaxparity.paths import make_path

    x = jnp.asarray(np.linspace(0, 2, 8, dtype=np.float32))

    def model(x):
        return (jnp.tanh(x.astype(jnp.bfloat16)) * 3).astype(jnp.float32)

    program, real, order = flatten(model, (x,)), localize_module.capture, []

    def capture(program, path, flat_args, notes):
        order.append(path.spec)
        return None if path.spec == "jit:xla_cpu_enable_fast_math=true" else real(program, path, flat_args, notes)

    monkeypatch.setattr(localize_module, "capture", capture)
    notes: list[str] = []
    out = [np.asarray(jax.jit(model)(x))]
    view = localize_module.localize_path(program, [x], make_path("jit"), make_path("eager"), out, notes, {})
    assert order == ["jit", "eager"] and view.path_vals is not None and view.base_vals is not None
    order.clear()
    view = localize_module.localize_path(program, [x], make_path("jit:xla_cpu_enable_fast_math=true"),
                                         make_path("eager"), out, notes, {})
    assert order == ["jit:xla_cpu_enable_fast_math=true"] and view.base_vals is None
