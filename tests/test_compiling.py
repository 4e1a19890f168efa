"""One compile of a program at a time across jaxparity's processes (cache/compiling.py): a command's
workers load the same case at once, and the second reads each program the first compiled."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

from jaxparity.cache.compiling import Markers


def test_a_free_program_is_claimed_and_released(tmp_path):
    markers = Markers(tmp_path)
    assert markers.claim("k1") is True
    assert (tmp_path / "k1").read_text().endswith(f" {os.getpid()}")
    markers.release("k1")
    assert not (tmp_path / "k1").exists()


def test_a_dead_processs_marker_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "k").write_text(f"{socket.gethostname()} {dead.pid}")
    start = time.monotonic()
    assert Markers(tmp_path).claim("k") is True
    assert time.monotonic() - start < 1.0


def test_a_program_another_process_compiles_is_waited_for(tmp_path):
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "k").write_text(f"{socket.gethostname()} {alive.pid}")
        threading.Timer(0.5, (tmp_path / "k").unlink).start()  # that process's compile ends
        start = time.monotonic()
        assert Markers(tmp_path).claim("k") is False  # read the cache again: the program is there now
        assert time.monotonic() - start >= 0.5
        assert not (tmp_path / "k").exists()
    finally:
        alive.kill()


_COMPILE = textwrap.dedent("""
    import os, sys, time
    import jax, jax.numpy as jnp
    from jaxparity.cache import jax_cache
    jax_cache()
    x = jnp.ones(7)  # compiled before: only the program below is compiled after the start

    def slow(x):  # a program that takes about a second to compile
        for k in range(200):
            x = jnp.sin(x * (1 + k / 1000)) + jnp.cos(x[::-1])
        return x

    hits = []
    jax.monitoring.register_event_listener(lambda event, **_: hits.append(event))
    while not os.path.exists(sys.argv[1]):  # both processes start compiling at the same moment
        time.sleep(0.005)
    jax.jit(slow)(x)
    print(sum(e == "/jax/compilation_cache/cache_hits" for e in hits))
""")


def test_two_processes_compiling_one_program_at_once_compile_it_once(tmp_path):
    env = dict(os.environ, JAXPARITY_CACHE=str(tmp_path / "cache"), JAX_PLATFORMS="cpu")
    env.pop("JAXPARITY_NO_CACHE", None)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _COMPILE, str(go)], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        time.sleep(3.0)  # both have imported JAX and wait
        go.touch()
        hits = [int(p.communicate(timeout=120)[0].split()[-1]) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert sorted(hits) == [0, 1], f"cache hits of the two processes: {hits} (without markers both compile: [0, 0])"
    assert [p for p in (tmp_path / "cache" / "compiling").rglob("*") if p.is_file()] == []  # every marker released


def test_a_head_start_waits_for_the_first_moment_the_process_waits_for_another(tmp_path):
    """A worker that waits for the other's compile has a core to spare: what it was asked to start ahead (a
    serving process importing TensorFlow) starts then, once; never while it compiles itself."""
    from jaxparity.cache import compiling

    ran: list[str] = []
    compiling.when_waiting(lambda: ran.append("ahead"))
    compiling.when_waiting(lambda: 1 / 0)  # a head start that fails is dropped, never a failure
    markers = Markers(tmp_path)
    assert markers.claim("mine") is True
    markers.release("mine")
    assert ran == []  # it compiled: no core to spare
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "k").write_text(f"{socket.gethostname()} {alive.pid}")
        threading.Timer(0.3, (tmp_path / "k").unlink).start()
        assert markers.claim("k") is False
        assert ran == ["ahead"]
    finally:
        alive.kill()
    compiling.when_waiting(lambda: ran.append("after the load"))
    compiling.idle()  # the load ended without a wait: started now
    assert ran == ["ahead", "after the load"]


def test_a_worker_starts_its_serving_process_while_it_loads(tmp_path, monkeypatch):
    """``IsolatedRunner.ahead``: the worker is asked to start the savedmodel path's serving process before it
    loads the case; the load of a lone worker never waits for another's compile, so it starts once loaded,
    and the command finds it running."""
    from pathlib import Path

    from jaxparity.execution.isolated import IsolatedRunner
    from jaxparity.execution.warm import stop_daemons

    cache = tmp_path / "cache"
    env = dict(os.environ, JAXPARITY_CACHE=str(cache), JAXPARITY_SERVE_IDLE="60", JAX_PLATFORMS="cpu")
    env.pop("JAXPARITY_NO_CACHE", None)
    runner = IsolatedRunner(str(Path(__file__).parents[1] / "examples" / "mlp_bf16.py"), env=env)
    runner.ahead = ["savedmodel"]
    try:
        runner.load()
        deadline = time.monotonic() + 30
        while not list((cache / "serve").rglob("*.pid")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list((cache / "serve").rglob("*.pid")), "no serving process was started"
    finally:
        runner.close()
        stop_daemons(cache / "serve")
