"""The savedmodel path: arrays cross the process boundary bit-exactly, environment options reach TF."""

import re
from pathlib import Path as FsPath

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxparity
from jaxparity.paths import make_path

pytestmark = pytest.mark.slow


def test_bf16_inputs_and_outputs_cross_the_process_boundary_bit_exactly():
    bits = np.array([0x3F81, 0x0001, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x4049, 0xC2F7], np.uint16)
    x = bits.view(ml_dtypes.bfloat16)  # 1.0078125, a subnormal, -0, inf, -inf, NaN, 3.14, -123.5
    ints = np.array([2**31 - 1, -(2**31)], np.int32)

    def fn(x, n):
        return {"same": x, "wide": x.astype(jnp.float32), "n": n}

    out = make_path("savedmodel").run(fn, (jnp.asarray(x), jnp.asarray(ints)))
    assert np.asarray(out["same"]).dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(np.asarray(out["same"]).view(np.uint16), bits)
    np.testing.assert_array_equal(np.asarray(out["wide"]).view(np.uint32), x.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(np.asarray(out["n"]), ints)


def test_the_serving_process_reports_its_environment_and_a_bad_flag_is_a_clear_failure():
    x = jnp.ones((2,), jnp.float32)
    good = make_path("savedmodel:XLA_FLAGS=--xla_allow_excess_precision=false")
    good.run(lambda x: x + 1, (x,))
    assert any("TensorFlow 2.21.0" in n and "XLA_FLAGS=--xla_allow_excess_precision=false" in n for n in good.notes)
    result = jaxparity.compare(lambda x: x + 1, x, paths=["eager", "savedmodel:XLA_FLAGS=--xla_no_such_flag=1"])
    bad = result.path("savedmodel:XLA_FLAGS=--xla_no_such_flag=1")
    assert bad.verdict == "error" and "serving process" in bad.message
    assert "xla_no_such_flag" in bad.message  # TensorFlow's own words about the unknown flag


def test_scalars_in_and_out_keep_their_shapes_and_jax_dtypes():
    def fn(x, scale):
        return {"total": (x * scale).sum(), "positive": x.sum() > 0}

    result = jaxparity.compare(fn, jnp.arange(3.0), 2.5, paths=["eager", "jit", "savedmodel"])
    assert result.path("savedmodel").verdict == "identical", result.path("savedmodel").message
    assert [(a.name, a.dtype, a.shape) for a in result.inputs] == [("arg0", "float32", (3,)), ("arg1", "float32", ())]
    assert [(a.name, a.shape) for a in result.outputs] == [("out/positive", ()), ("out/total", ())]


def test_a_prng_key_crosses_the_signature_as_its_data_and_draws_what_jax_draws():
    """A SavedModel signature takes tensors: a typed key (an NNX module's Rngs, a key argument) goes in
    as its key data and is wrapped again inside, so the served program draws JAX's numbers."""
    import jax

    result = jaxparity.compare(lambda k, x: x + jax.random.normal(k, x.shape), jax.random.key(0), jnp.ones(3),
                               paths=["eager", "jit", "savedmodel"], baseline="jit")
    p = result.path("savedmodel")
    assert p.status == "ok" and p.verdict == "identical", p.message
    assert any("PRNG keys cross the signature as their key data" in n and "arg0" in n for n in p.notes)


@pytest.mark.slow
def test_a_stablehlo_the_serving_tensorflow_cannot_read_is_a_finding_with_the_export_target_verified():
    """The skew of issue 21, on this stack: this JAX can write a newer StableHLO than TensorFlow reads. Asked
    to write its newest, the SavedModel fails to load; the failure names both versions and the source line
    TensorFlow points at, and the export for the version TensorFlow reads is re-run and verified."""
    from pathlib import Path

    from jaxparity.case import load_case
    from jaxparity.jaxcompat import stablehlo_versions
    from jaxparity.paths.base import PathError

    newest = stablehlo_versions()[2]
    case = load_case(str(Path(__file__).parent / "cases" / "versions.py") + ":make_top_k")
    with pytest.raises(PathError) as info:
        make_path(f"savedmodel:stablehlo={newest}").run(case.fn, case.args)
    message = str(info.value)
    assert "compatibility: TensorFlow cannot read the StableHLO this JAX wrote" in message
    assert f"writes StableHLO {newest} (the stablehlo option" in message
    read = re.search(r"the serving TensorFlow reads up to (\S+?);", message).group(1)
    assert read != newest and "its error points at versions.py:" in message
    assert f"Fix ✓ verified: exported for StableHLO {read} (savedmodel:stablehlo={read}) it loads, runs and gives " \
           "jax.jit's values bit for bit" in message
    fixed = make_path(f"savedmodel:stablehlo={read}").run(case.fn, case.args)
    np.testing.assert_array_equal(np.asarray(fixed), np.asarray(jax.jit(case.fn)(*case.args)))
    with pytest.raises(Exception, match="writes StableHLO .* not 0.1.0"):
        make_path("savedmodel:stablehlo=0.1.0").run(case.fn, case.args)


@pytest.mark.slow
def test_the_serving_process_is_kept_warm_and_one_that_dies_costs_nothing():
    """A second run in this process is served by the TensorFlow process the first started (no second
    TensorFlow import); one that died between runs is replaced, and the run still answers."""
    import time

    import numpy as np

    from jaxparity.execution import warm
    from jaxparity.paths import make_path

    warm.close_all()
    fn = lambda x: jnp.tanh(x) * 2  # noqa: E731
    first = make_path("savedmodel")
    first.run(fn, (jnp.arange(4.0),))
    start = time.perf_counter()
    second = make_path("savedmodel")
    out = second.run(fn, (jnp.arange(4.0) + 1,))
    warm_seconds = time.perf_counter() - start
    np.testing.assert_allclose(np.asarray(out), np.tanh(np.arange(4.0) + 1) * 2, rtol=1e-6)
    assert any("the same process served 1 request before" in n for n in second.notes), second.notes
    assert not any("served 1 request before" in n for n in first.notes)
    (process,) = warm._POOL.values()
    process.proc.kill()
    third = make_path("savedmodel")
    np.testing.assert_array_equal(np.asarray(third.run(fn, (jnp.arange(4.0) + 1,))), np.asarray(out))
    assert not any("before" in n for n in third.notes if "served by" in n)  # a fresh process answered
    # Another serving environment is another process: an XLA flag of TensorFlow's is read once per process.
    flagged = make_path("savedmodel:XLA_FLAGS=--xla_cpu_enable_fast_math=false")
    flagged.run(fn, (jnp.arange(4.0),))
    assert len(warm._POOL) == 2 and not any("before" in n for n in flagged.notes if "served by" in n)
    print(f"warm run: {warm_seconds:.2f} s")


def test_the_warm_pool_keeps_a_few_and_stops_the_one_used_longest_ago(monkeypatch):
    import sys

    from jaxparity.execution import warm

    warm.close_all()
    monkeypatch.setenv("JAXPARITY_WARM_MAX", "2")
    sleeper = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    made = []
    for i in range(3):
        p = warm.warm(sleeper, {"N": str(i)})
        made.append(p)
        warm.give_back(p)
    assert len(warm._POOL) == 2 and not made[0].alive() and made[1].alive() and made[2].alive()
    again = warm.warm(sleeper, {"N": "1"})  # the pool hands the live one back
    assert again is made[1]
    warm.give_back(again)
    warm.close_all()
    assert not any(p.alive() for p in made)


@pytest.mark.slow
def test_the_serving_process_outlives_the_command_and_is_replaced_when_it_died_or_went_stale(monkeypatch):
    """With JAXPARITY_SERVE_IDLE (what jaxparity's commands set), the serving process stays for the next
    command: found on its socket, the model still loaded. One killed between commands is replaced, one
    whose interpreter's packages changed leaves before it answers, and a model directory written again
    (keep=DIR) is loaded again: each time the right numbers."""
    import os
    import shutil
    import tempfile

    import numpy as np

    from jaxparity.execution import warm
    from jaxparity.paths import make_path

    cache = tempfile.mkdtemp(prefix="jp-serve-")  # a Unix socket's path is short
    packages = tempfile.mkdtemp(prefix="jp-site-")  # on the serving interpreter's sys.path
    monkeypatch.setenv("JAXPARITY_CACHE", cache)
    monkeypatch.setenv("JAXPARITY_SERVE_IDLE", "120")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (packages, os.environ.get("PYTHONPATH")) if p))
    fn = lambda x: jnp.tanh(x) * 2  # noqa: E731
    x = jnp.arange(4.0)

    def command(f=fn, spec="savedmodel"):  # a new command: nothing kept in this process
        warm.close_all()
        path = make_path(spec)
        out = np.asarray(path.run(f, (x,)))
        return out, " ".join(n for n in path.notes if "served by" in n)

    try:
        out, said = command()
        np.testing.assert_allclose(out, np.tanh(np.arange(4.0)) * 2, rtol=1e-6)
        assert "before" not in said
        (pidfile,) = (FsPath(cache) / "serve").glob("*.pid")
        pid = int(pidfile.read_text())
        again, said = command()
        np.testing.assert_array_equal(again, out)
        assert "served 1 request before (kept warm between commands" in said and "already loaded" in said, said
        assert int(pidfile.read_text()) == pid
        os.kill(pid, 9)
        again, said = command()
        np.testing.assert_array_equal(again, out)
        assert "before" not in said and int(pidfile.read_text()) != pid  # a fresh one answered
        pid = int(pidfile.read_text())
        (FsPath(packages) / "new_package.py").write_text("")  # as pip installing into it would
        again, said = command()
        np.testing.assert_array_equal(again, out)
        assert "before" not in said and int(pidfile.read_text()) != pid  # the stale one left
        keep = FsPath(cache) / "kept"
        first, _ = command(spec=f"savedmodel:keep={keep}")
        second, said = command(lambda v: jnp.tanh(v) * 3, spec=f"savedmodel:keep={keep}")
        np.testing.assert_allclose(second, np.tanh(np.arange(4.0)) * 3, rtol=1e-6)  # not the model kept loaded
        assert "before" in said and "already loaded" not in said
    finally:
        warm.close_all()
        warm.stop_daemons(FsPath(cache) / "serve")
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(packages, ignore_errors=True)


def _in_the_serving_script(code: str) -> str:
    """``code`` run in a fresh interpreter that imports the serving script as ``s`` (it blocks JAX's imports
    wherever it is imported: never in this process); what it prints."""
    import subprocess
    import sys

    from jaxparity.paths.savedmodel import _SERVER

    prelude = f"import importlib.util, sys\nspec = importlib.util.spec_from_file_location('s', {str(_SERVER)!r})\n" \
              "s = importlib.util.module_from_spec(spec); spec.loader.exec_module(s)\n"
    done = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_serving_process_that_outlives_its_command_serves_no_one_else(tmp_path, monkeypatch):
    """Issue 55: the warm serving process listens in a directory only its user may enter (700), answers only its
    own user's connections, and reads or writes no file outside the cache of the command that started it."""
    import json
    import os
    import shutil
    import socket
    import subprocess
    import sys
    import tempfile

    from jaxparity.execution import warm
    from jaxparity.paths.savedmodel import _SERVER

    # a request naming a file outside the cache is refused, unread and unwritten; a path that climbs out too
    root = tmp_path / "cache"
    (root / "scratch").mkdir(parents=True)
    outside = tmp_path / "elsewhere.npz"
    lines = [f"{root}/scratch/model\t{root}/scratch/in.npz\t{outside}",
             f"{root}/scratch/model\t{root}/scratch/../../elsewhere.npz\t{root}/o.npz"]
    said = json.loads(_in_the_serving_script(f"import json; print(json.dumps([s._answer(l, {str(root)!r}) "
                                             f"for l in {lines!r}]))"))
    assert all(a["error"].startswith("refused:") for a in said) and str(outside) in said[0]["error"]
    assert not outside.exists()
    # a directory other users may enter is no place for its socket: it will not serve there
    open_dir = tempfile.mkdtemp(prefix="jp-open-")
    os.chmod(open_dir, 0o755)
    try:
        assert "open to other users" in _in_the_serving_script(f"print(s.private({open_dir!r}))")
        done = subprocess.run([sys.executable, str(_SERVER), "--serve", "--socket", os.path.join(open_dir, "s.sock"),
                               "--idle", "5", "--root", open_dir], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and "open to other users" in done.stderr, done.stderr[-2000:]
    finally:
        shutil.rmtree(open_dir, ignore_errors=True)
    # the peer's user is read from the connection itself
    assert _in_the_serving_script("import socket\na, b = socket.socketpair(socket.AF_UNIX)\n"
                                  "print(s._same_user(a))").strip() == "True"
    # the cache's serve directory is made 700, also where an older jaxparity made it open
    cache = tempfile.mkdtemp(prefix="jp-serve-")  # a Unix socket's path is short
    monkeypatch.setenv("JAXPARITY_CACHE", cache)
    monkeypatch.setenv("JAXPARITY_SERVE_IDLE", "60")
    (FsPath(cache) / "serve").mkdir()
    os.chmod(FsPath(cache) / "serve", 0o755)
    try:
        warm.close_all()
        out = np.asarray(make_path("savedmodel").run(lambda v: v * 2, (jnp.arange(3.0),)))
        np.testing.assert_array_equal(out, np.arange(3.0) * 2)
        assert (FsPath(cache) / "serve").stat().st_mode & 0o777 == 0o700
        (sock,) = (FsPath(cache) / "serve").glob("*.sock")
        if os.getuid() == 0:  # another user reaches nothing: the directory is 700, so not even the socket
            reach = ("import socket, sys\nc = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ntry:\n"
                     f"    c.connect({str(sock)!r}); c.settimeout(5); sys.exit(3 if c.recv(100) else 0)\n"
                     "except OSError:\n    sys.exit(0)\n")
            # the system's Python: the checkout's may be in a directory the other user cannot enter
            other = subprocess.run(["/usr/bin/python3", "-c", reach], user=65534, capture_output=True, timeout=60)
            assert other.returncode == 0, other.stderr
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # its own user is answered
        conn.connect(str(sock))
        conn.settimeout(10)
        assert conn.recv(100).startswith(b"@@jaxparity ")
        conn.close()
    finally:
        warm.close_all()
        warm.stop_daemons(FsPath(cache) / "serve")
        shutil.rmtree(cache, ignore_errors=True)


def test_one_serving_process_whatever_the_worker_imported_before():
    """Importing TensorFlow (and Keras with it, on another backend) or IREE's compiler sets variables in the
    importing process (TF2_BEHAVIOR, TF_FORCE_GPU_ALLOW_GROWTH, TF_CPP_MIN_LOG_LEVEL, ...): a worker that ran
    IREE or TFLite before its SavedModel, and one that did not, still find the same serving process (in a fresh
    process, Keras on JAX: this one has imported them); so do the command's first worker and its second, which
    runs JAX with JAX_PLATFORMS=cpu."""
    import subprocess
    import sys

    script = """
from jaxparity.execution.warm import _key
from jaxparity.paths import make_path
def key():
    return _key(*make_path("savedmodel")._server_command())
before = key()
import iree.compiler, tensorflow  # noqa: E401, F401
after = key()
import os
os.environ["JAX_PLATFORMS"] = "cpu"  # a second worker's (execution.runners): the serving process runs no JAX
print(sorted(set(after[1]) ^ set(before[1]))[:6], after == before == key())
"""
    import os

    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "KERAS_BACKEND": "jax"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "True", run.stdout[-600:]
