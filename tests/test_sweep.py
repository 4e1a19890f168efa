"""`jaxparity sweep` (issue 13): a matrix of cells run by a local process pool or a real Ray cluster,
streamed into an append-only store; a worker killed mid-sweep loses nothing and duplicates nothing;
a sweep run again resumes."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jaxparity.cli import main
from jaxparity.sweep import SpecError, Store, load_spec, run_sweep, summarize
from jaxparity.sweep.cells import cells_of

CASES = Path(__file__).parent / "cases"

SLOW_CASE = '''
import time
import jax.numpy as jnp
import numpy as np


def make():
    def fn(x):
        time.sleep({sleep})  # eager runs the body on every call: each cell takes a while
        return x / 3.0

    return fn, (jnp.asarray(np.linspace(-2, 2, 64, dtype=np.float32)),)
'''


def write_spec(tmp_path, sleep=0.0, samples=3, paths=('"jit"', '"jit:xla_disable_hlo_passes=algsimp"'), **extra):
    (tmp_path / "case.py").write_text(SLOW_CASE.format(sleep=sleep))
    more = "".join(f"{k} = {v}\n" for k, v in extra.items())
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "t"\ncases = ["case.py", "{CASES / "planted.py"}:make_clean"]\n'
                    f"paths = [{', '.join(paths)}]\nsamples = {samples}\n{more}")
    return spec


def test_spec_errors_name_the_file_and_the_key(tmp_path):
    bad = tmp_path / "bad.toml"
    for text, message in [('cases = ["x.py"]\npaths = ["jit"]\nfoo = 1', "unknown key foo"),
                          ('cases = ["x.py"]\npaths = ["jit"]\nsampels = 1', "sampels: did you mean samples?"),
                          ('cases = ["nofile.py"]\npaths = ["jit"]', "no file"),
                          (f'cases = ["{CASES / "planted.py"}"]\npaths = ["nosuch"]', "unknown path"),
                          (f'cases = ["{CASES / "planted.py"}"]\npaths = []', "non-empty list"),
                          (f'cases = ["{CASES / "planted.py"}"]\npaths = ["eager@old"]', "declare it under"),
                          ("cases = [", "not valid TOML")]:
        bad.write_text(text)
        with pytest.raises(SpecError, match=message):
            load_spec(bad)
    assert main(["sweep", str(bad)]) == 2


def test_matrix_of_cells(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    cells = cells_of(spec)
    assert len(cells) == 2 * 3 * 2 and len({c.key for c in cells}) == len(cells)


@pytest.mark.slow
def test_local_sweep_stores_every_cell_once_and_resumes(tmp_path):
    spec = load_spec(write_spec(tmp_path, explain="true"))
    store = Store(tmp_path / "store", Store.spec_text(spec))
    counts = run_sweep(spec, store, jobs=2)
    assert counts["ran"] == 12 and counts["duplicates"] == 0 and store.count() == 12
    summary = summarize(store, spec.name)
    div = next(r for r in summary.rows if r.case == "case.py" and r.path == "jit")
    # x / 3 and x * fl(1/3) are each within 1.5 ULP of the exact quotient: 1 or 2 ULP apart where they differ
    assert div.diverging == 3 and 1 <= div.worst_ulp <= 2 and any("algebraic rewrite" in c for c in div.causes)
    assert next(r for r in summary.rows if r.path.startswith("jit:")).diverging == 0  # the fix, on every input set
    assert list((tmp_path / "store" / "arrays").glob("*.safetensors"))  # diverging cells keep their outputs
    again = run_sweep(spec, store, jobs=2)  # resumed: nothing left to do
    assert again["ran"] == 0 and again["skipped"] == 12 and store.count() == 12
    other = load_spec(write_spec(tmp_path, samples=1))
    with pytest.raises(ValueError, match="another sweep spec"):
        Store(tmp_path / "store", Store.spec_text(other))


def _workers(pid: int) -> list[int]:
    """The pool's worker processes under ``pid`` (spawned by multiprocessing)."""
    import psutil

    return [p.pid for p in psutil.Process(pid).children(recursive=True)
            if "spawn_main" in " ".join(p.cmdline()) and "resource_tracker" not in " ".join(p.cmdline())]


@pytest.mark.slow
def test_killing_a_local_worker_mid_sweep_loses_and_duplicates_nothing(tmp_path):
    spec_file = write_spec(tmp_path, sleep=0.5, samples=4)
    out = tmp_path / "s.json"
    proc = subprocess.Popen([sys.executable, "-m", "jaxparity", "sweep", str(spec_file), "--jobs", "2", "--json",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store_db = tmp_path / "s.sweep" / "results.db"
    deadline = time.time() + 300
    killed = None
    while time.time() < deadline and killed is None and proc.poll() is None:
        time.sleep(0.2)
        if store_db.exists():
            import sqlite3

            try:
                n = sqlite3.connect(store_db).execute("SELECT COUNT(*) FROM cells").fetchone()[0]
            except sqlite3.OperationalError:  # the file is there, its tables not yet
                continue
            workers = _workers(proc.pid)
            if n >= 2 and workers:
                os.kill(workers[0], signal.SIGKILL)
                killed = (n, workers[0])
    stdout, stderr = proc.communicate(timeout=600)
    assert killed is not None, f"no worker to kill before the sweep ended: {stderr[-2000:]}"
    assert proc.returncode == 1, stderr[-2000:]  # cells diverge: exit 1, not a crash
    data = json.loads(out.read_text())
    keys = [c["key"] for c in data["cell_results"]]
    assert len(keys) == 16 and len(set(keys)) == 16  # nothing lost, nothing twice
    assert all(c["status"] == "ok" for c in data["cell_results"])  # the killed worker's cells ran again
    assert "worker restart" in stderr


@pytest.mark.slow
def test_ray_cluster_with_a_worker_node_killed_mid_sweep(tmp_path):
    """A real Ray cluster on loopback: a head and a worker node. The worker node is removed (its raylet
    and workers killed) mid-sweep; Ray retries its tasks on the head; the store has every cell once."""
    ray = pytest.importorskip("ray")  # installed by `make test` (jaxparity[ray])
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    node = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        spec = load_spec(write_spec(tmp_path, sleep=0.4, samples=4))
        store = Store(tmp_path / "ray", Store.spec_text(spec))
        removed = []

        def progress(done, total, cell, record):
            if done == 3 and not removed:
                removed.append(threading.Thread(target=cluster.remove_node, args=(node,)))
                removed[0].start()

        counts = run_sweep(spec, store, executor="ray", address=cluster.address, progress=progress)
        assert removed, "the worker node was never removed"
        removed[0].join()
        rows = list(store.rows())
        assert counts["ran"] == 16 and counts["duplicates"] == 0
        assert len(rows) == 16 and len({r["key"] for r in rows}) == 16
        assert all(r["status"] == "ok" for r in rows)
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.slow
def test_cli_sweep_writes_html_and_json(tmp_path, capsys):
    spec = write_spec(tmp_path, samples=1)
    html, js = tmp_path / "s.html", tmp_path / "s.json"
    assert main(["sweep", str(spec), "--jobs", "1", "--html", str(html), "--json", str(js), "-q"]) == 1
    said = capsys.readouterr().out
    assert "sweep t: 4 cells, 1 diverge" in said
    assert "<table>" in html.read_text() and json.loads(js.read_text())["diverging"] == 1


@pytest.mark.slow
def test_cells_in_another_environment_run_there_on_the_same_input_set(tmp_path):
    """[envs]: a path written NAME@ENV runs in that environment's worker (jax 0.4.38, built once and
    cached, as in test_envs), fed the cell's drawn input set bit for bit."""
    spec_file = tmp_path / "env.toml"
    conv = Path(__file__).parents[1] / "examples" / "conv_bf16.py"
    spec_file.write_text(f'cases = ["{conv}"]\npaths = ["eager@old", "declared"]\nsamples = 2\n'
                         '[envs]\nold = "jax==0.4.38 jaxlib==0.4.38 flax==0.10.2 tensorflow-cpu==2.18.0"\n')
    spec = load_spec(spec_file)
    store = Store(tmp_path / "store", Store.spec_text(spec))
    counts = run_sweep(spec, store, jobs=1)
    rows = {(r["sample"], r["path"]): r for r in store.rows()}
    assert counts["ran"] == 4 and all(r["status"] == "ok" for r in rows.values()), rows
    # eager in jax 0.4.38 rounds the bf16 conv where it declares, as eager here does: the same numbers
    assert all(rows[(s, "eager@old")]["verdict"] == "identical" for s in (0, 1))


def test_workers_keep_to_the_cases_they_have_loaded():
    """The local pool's placement (and Ray's, per node CPU): the paths of an input set go where its
    baseline ran, a loaded case before a new one, a new case before one another worker holds; a
    second worker loads a held case only once sharing its cells saves more than the load costs."""
    from jaxparity.sweep.cells import Cell
    from jaxparity.sweep.executors import _Costs, _Queue, _Slot

    a, b = _Slot("a"), _Slot("b")
    cells = [Cell("m1", s, p) for s in range(4) for p in ("jit", "export")] + [Cell("m2", 0, "jit")]
    queue, costs = _Queue(cells), _Costs()
    assert queue.take(a, costs) == Cell("m1", 0, "jit")
    assert queue.take(b, costs) == Cell("m2", 0, "jit")  # a new case, not m1 that a holds
    assert queue.take(a, costs) == Cell("m1", 0, "export")  # input set 0's other path: its baseline is in a
    assert queue.take(b, costs) is None  # only m1 is left, its costs unknown: b waits rather than load it
    costs.add(Cell("m1", 0, "jit"), {"seconds": 13.0, "load_seconds": 10.0})  # a 10 s load, a first cell
    assert queue.take(b, costs) is None  # no warm cell yet: what a cell costs once compiled is unknown
    costs.add(Cell("m1", 0, "export"), {"seconds": 2.0, "warm": True})  # 2 s a warm cell: warm-up 1 s
    assert queue.take(b, costs) is None  # 6 cells x 2 s / 2 = 6 s saved < 10 s load + 1 s warm-up
    costs.add(Cell("m1", 1, "export"), {"seconds": 30.0, "warm": True})  # warm cells now 16 s on average
    assert queue.take(b, costs) == Cell("m1", 3, "jit")  # worth it: from the far end of m1's queue
    assert queue.take(b, costs) == Cell("m1", 3, "export")  # then the rest of that input set
    assert queue.take(a, costs) == Cell("m1", 1, "jit")
    queue.put_back(Cell("m1", 1, "jit"))  # a's worker died with it: first in line, anyone's
    queue.forget(a)
    assert queue.take(b, costs) == Cell("m1", 1, "jit") and len(queue) == 3
    assert [queue.take(b, costs) for _ in range(4)] == [Cell("m1", 1, "export"), Cell("m1", 2, "jit"),
                                                         Cell("m1", 2, "export"), None]


def test_placement_costs_a_look_at_each_case_not_at_each_cell():
    """100,000 cells (5 cases x 10,000 input sets x 2 paths) handed out to two workers in well under a
    second per 10,000: a pick does not scan the queue."""
    from jaxparity.sweep.cells import Cell
    from jaxparity.sweep.executors import _Costs, _Queue, _Slot

    queue = _Queue([Cell(f"m{c}", s, p) for c in range(5) for s in range(10_000) for p in ("jit", "export")])
    workers, costs, taken = (_Slot("a"), _Slot("b")), _Costs(), []
    start = time.perf_counter()
    while len(queue):
        for w in workers:
            if (cell := queue.take(w, costs, force=True)) is not None:
                taken.append(cell)
    assert len(taken) == len(set(taken)) == 100_000
    assert time.perf_counter() - start < 30  # linear; scanning the queue took 2 ms a pick at 20,000 cells


@pytest.mark.slow
def test_a_hanging_cell_is_stopped_and_recorded_and_the_others_run(tmp_path):
    spec = load_spec(write_spec(tmp_path, sleep=60, samples=2, paths=('"jit"',), timeout=1))
    store = Store(tmp_path / "store", Store.spec_text(spec))
    start = time.monotonic()
    counts = run_sweep(spec, store, jobs=2)
    assert time.monotonic() - start < 120  # not the 60 s each hanging cell would take
    rows = {(Path(r["case"]).name, r["sample"]): r for r in store.rows()}
    assert counts["ran"] == len(rows) == 4 and counts["restarts"] >= 2
    hung = [r for (case, _), r in rows.items() if case == "case.py"]
    assert all(r["status"] == "timeout" and "timed out after 3 s" in r["error"] for r in hung)
    assert all(r["status"] == "ok" for (case, _), r in rows.items() if case == "planted.py")


@pytest.mark.slow
def test_a_worker_explains_later_input_sets_on_reused_compiles_with_the_same_results(tmp_path, monkeypatch):
    """A sweep worker makes what depends only on the program once per case and path (executables, the
    flat program, the instrumented program, compiler evidence) and explains every later input set
    on them: each cell's explanation is the one it gets with nothing reused."""
    import jaxparity.paths.staging as staging
    from jaxparity.sweep.cells import run_cell

    spec_file = tmp_path / "s.toml"
    spec_file.write_text(f'name = "r"\ncases = ["{CASES / "planted.py"}:make_fma", "{CASES / "loops.py"}:make_scan_fma"]\n'
                         'paths = ["jit", "export"]\nsamples = 2\nexplain = true\n')
    spec = load_spec(spec_file)
    keys = ("status", "verdict", "max_ulp", "n_differ", "cause", "op", "line", "summary")
    reused = [{k: run_cell(c, spec).get(k) for k in keys} for c in cells_of(spec)]
    monkeypatch.setattr(staging, "config_key", lambda: None)  # nothing reused from here on
    fresh = [{k: run_cell(c, spec).get(k) for k in keys} for c in cells_of(spec)]
    assert sum(r["cause"] is not None for r in reused) == len(reused) == 8
    assert reused == fresh


THREADED_DOT = '''
import jax.numpy as jnp
import numpy as np


def make():
    # On XLA:CPU an (8, 128) @ (128, 2) product sums in another order when Eigen runs on one thread
    # (--xla_cpu_multi_thread_eigen=false): its float32 result moves by an ULP or two.
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.standard_normal((128, 2)), jnp.float32)
    return (lambda x, w: x @ w), (jnp.asarray(rng.standard_normal((8, 128)), jnp.float32), w)
'''


def test_jobs_never_change_a_number(tmp_path):
    """A pool of two workers measures what one worker measures: the workers keep XLA's thread pools as
    `compare` has them. (Starting them with Eigen on one thread changed the baseline's float32 sums of
    this product, and so each cell's distance from f64: 8 and 12 ULP against 14 and 9.)"""
    (tmp_path / "dot.py").write_text(THREADED_DOT)
    spec_file = tmp_path / "s.toml"
    spec_file.write_text('name = "d"\ncases = ["dot.py"]\npaths = ["f64"]\nsamples = 4\n')
    spec = load_spec(spec_file)
    measured = {}
    for jobs in (1, 2):
        store = Store(tmp_path / f"store{jobs}", Store.spec_text(spec))
        run_sweep(spec, store, jobs=jobs)
        measured[jobs] = [(r["sample"], r["max_ulp"], r["n_differ"]) for r in store.rows()]
        store.close()
    assert len(measured[1]) == 4 and all(ulp for _, ulp, _ in measured[1])  # float32 sums against f64's
    assert measured[1] == measured[2]


ZERO_HEAD = '''
import jax.numpy as jnp
import numpy as np


def make_zero_head():
    """A classifier whose head is zero-initialised (as a ViT's): every logit is 0 whatever the image."""
    rng = np.random.default_rng(0)
    params = {"body": jnp.asarray(rng.standard_normal((16, 8)), jnp.float32), "head": jnp.zeros((8, 4), jnp.float32)}
    return (lambda params, x: jnp.tanh(x @ params["body"]) @ params["head"]), (params, jnp.ones((2, 16)) * 0.5)


def make_weights_only():
    """Outputs computed from the weights alone: the same on every drawn input set, though not constant."""
    rng = np.random.default_rng(1)
    params = {"w": jnp.asarray(rng.standard_normal((4, 4)), jnp.float32)}
    return (lambda params, x: jnp.sin(params["w"]) / 3.0 + 0.0 * x.sum()), (params, jnp.linspace(-1, 1, 8))
'''


def test_a_sweep_over_outputs_that_show_nothing_names_them_and_does_not_pass(tmp_path, capsys):
    (tmp_path / "deg.py").write_text(ZERO_HEAD)
    spec_file = tmp_path / "s.toml"
    spec_file.write_text('name = "z"\ncases = ["deg.py:make_zero_head", "deg.py:make_weights_only", '
                         f'"{CASES / "planted.py"}:make_clean"]\npaths = ["jit"]\nsamples = 3\n')
    assert main(["sweep", str(spec_file), "--jobs", "1", "-q", "--json", str(tmp_path / "z.json")]) == 1
    said = capsys.readouterr().out
    assert "make_zero_head on jit: 3 cells, 0 diverge, 3 with baseline outputs that show nothing" in said
    assert "shows nothing: deg.py:make_zero_head: out: every one of its 8 elements is 0" in said
    assert "shows nothing: deg.py:make_weights_only: the baseline's outputs are the same on all 3 input sets" in said
    assert "planted.py:make_clean" not in " ".join(ln for ln in said.splitlines() if "shows nothing" in ln)
    assert len(json.loads((tmp_path / "z.json").read_text())["shows_nothing"]) == 2


def test_bf16_outputs_that_show_nothing_never_pass_a_sweep(tmp_path, capsys):
    """All NaN and a zero head in bfloat16 (ml_dtypes: numpy kind 'V'), as in float32: named, exit 1."""
    frameworks = CASES / "frameworks.py"
    spec_file = tmp_path / "s.toml"
    spec_file.write_text(f'name = "b"\ncases = ["{frameworks}:make_all_nan_bf16", "{frameworks}:make_zero_head_bf16"]'
                         '\npaths = ["jit"]\nsamples = 1\n')
    assert main(["sweep", str(spec_file), "--jobs", "1", "-q", "--json", str(tmp_path / "b.json")]) == 1
    said = capsys.readouterr().out
    assert "shows nothing: frameworks.py:make_all_nan_bf16: out: 0 of 6 outputs finite (all NaN)" in said
    assert "shows nothing: frameworks.py:make_zero_head_bf16: out: every one of its 6 elements is 0" in said
    assert len(json.loads((tmp_path / "b.json").read_text())["shows_nothing"]) == 2


def test_a_sweep_draws_input_sets_for_an_nnx_module_holding_rngs(tmp_path):
    """An NNX module whose Dropout holds its Rngs (PRNG key leaves): each drawn input set runs, as in
    `compare --samples`; its key stays the module's, the images vary."""
    from jaxparity.case import load_case
    from jaxparity.execution.samples import draw_sample
    from jaxparity.pytree import argument_leaves, host
    from jaxparity.sweep.cells import Cell, _inputs, run_cell

    case = f"{CASES / 'frameworks.py'}:make_nnx_module"
    spec_file = tmp_path / "s.toml"
    spec_file.write_text(f'cases = ["{case}"]\npaths = ["jit"]\nsamples = 2\n')
    spec = load_spec(spec_file)
    records = [run_cell(Cell(spec.cases[0], s, "jit"), spec) for s in (0, 1)]
    assert [(r["status"], r["error"]) for r in records] == [("ok", None)] * 2
    assert records[0]["baseline_digest"] != records[1]["baseline_digest"]  # the images varied
    loaded = load_case(case)
    example = {n: host(x) for n, x in argument_leaves(loaded.args)}
    drawn = draw_sample(example, spec.seed, 1, loaded.data_leaves())  # what compare --samples draws
    args = dict(argument_leaves(_inputs(loaded, Cell(spec.cases[0], 1, "jit"), spec)))
    assert set(drawn) == {"arg1"} and host(args["arg1"]).tobytes() == drawn["arg1"].tobytes()


def test_cases_whose_files_share_a_name_are_told_apart(tmp_path, capsys):
    from jaxparity.sweep.summary import case_names

    assert case_names(["/x/a/case.py", "/x/b/case.py", "/x/b/other.py:make"]) == {
        "/x/a/case.py": "a/case.py", "/x/b/case.py": "b/case.py", "/x/b/other.py:make": "other.py:make"}
    assert case_names(["/x/case.py", "/y/x/case.py"]) == {"/x/case.py": "/x/case.py", "/y/x/case.py": "y/x/case.py"}
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "case.py").write_text(SLOW_CASE.format(sleep=0.0))
    (tmp_path / "run").mkdir()
    spec_file = tmp_path / "run" / "s.toml"
    spec_file.write_text('name = "two"\ncases = ["../a/case.py", "../b/case.py"]\npaths = ["jit"]\nsamples = 0\n')
    html, js = tmp_path / "s.html", tmp_path / "s.json"
    main(["sweep", str(spec_file), "--jobs", "1", "-q", "--html", str(html), "--json", str(js)])
    said = capsys.readouterr().out
    assert "sweep two: 2 cells," in said
    assert "  a/case.py on jit: 1 cell, " in said and "  b/case.py on jit: 1 cell, " in said
    assert {r["case"] for r in json.loads(js.read_text())["rows"]} == {"a/case.py", "b/case.py"}
    assert "<td>a/case.py</td>" in html.read_text() and "<td>b/case.py</td>" in html.read_text()
