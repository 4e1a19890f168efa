"""Worker process: loads one case, then runs the paths it is asked for (see isolated.IsolatedRunner)."""

from __future__ import annotations

import functools
import sys
from multiprocessing.connection import Connection
from typing import Any


def main(fd: int) -> None:
    conn = Connection(fd)
    case = None
    samples: tuple[list, object] | None = None  # (input sets, their InputSlots) for run_many
    while True:
        try:
            message = conn.recv()
        except EOFError:
            _exit()
        if message[0] == "exit":
            _exit()
        if message[0] == "load":
            from ..cache import jax_cache
            from ..cache.compiling import idle
            from ..case import CaseError, load_case
            from .runs import case_info

            jax_cache()  # compiled programs kept across commands (before the case compiles anything)

            try:
                case = load_case(message[1], message[2])
                info = case_info(case)
            except CaseError as e:
                conn.send(("case_error", str(e)))
                return
            except Exception as e:  # describing the inputs failed: still the case's inputs at fault
                conn.send(("case_error", f"{message[1]}: its inputs cannot be used: {type(e).__name__}: {e}"))
                return
            conn.send(("loaded", info))
            # What ``prestart`` asked for starts the first time the load waits for another worker's compile
            # (``cache.compiling.when_waiting``), else now that the case has loaded: a serving process's
            # imports never slow the load that every path waits for.
            idle()
        elif message[0] == "run":
            from .inprocess import run_in_process
            from ..paths import make_path

            assert case is not None, "run before load"
            _, spec, timeout = message
            conn.send(("done", run_in_process(make_path(spec), case.fn, case.args, timeout)))
        elif message[0] == "prestart":  # a head start for the paths to come; no answer
            from ..cache.compiling import idle, when_waiting

            when_waiting(functools.partial(_prestart, list(message[1])))
            if case is not None:  # loaded already: nothing to wait for
                idle()
        elif message[0] == "call":  # the function called plainly on the case's inputs: does the model run?
            from .inprocess import plain_call_failure

            assert case is not None, "call before load"
            conn.send(("called", plain_call_failure(case.fn, case.args, case.notes)))
        elif message[0] == "samples":  # kept for the run_many calls that follow
            from .samples import InputSlots

            assert case is not None, "samples before load"
            samples = (message[1], InputSlots(case.args))
        elif message[0] == "run_many":
            from ..paths.staging import compile_once

            assert case is not None and samples is not None, "run_many before load and samples"
            _, spec, start, stop, chunk, repeat, timeout = message
            with compile_once():
                for k in range(start, stop, chunk):  # each chunk's runs as soon as they are done
                    conn.send(("done_many", _run_sets(case, spec, samples[0][k:min(k + chunk, stop)], samples[1],
                                                      repeat, timeout)))
        elif message[0] == "arrays":
            from ..pytree import argument_leaves, host

            assert case is not None, "arrays before load"
            conn.send(("arrays", [(name, host(x)) for name, x in argument_leaves(case.args)]))
        elif message[0] == "keys":
            from .samples import key_inputs

            assert case is not None, "keys before load"
            conn.send(("keys", sorted(key_inputs(case.fn, case.args))))
        elif message[0] == "capture":  # every op's values along one path, this environment's own trace
            from ..localize.align import capture_ops

            assert case is not None, "capture before load"
            captured: list[Any] | str
            try:
                captured = capture_ops(case.fn, case.args, message[1])
            except Exception as e:  # report, keep the comparison
                captured = f"capturing per-op values failed: {type(e).__name__}: {e}"
            conn.send(("captured", captured))
        elif message[0] == "task":  # one of jaxparity's functions of the loaded case (the hunt's probes)
            import importlib

            assert case is not None, "task before load"
            _, name, payload = message
            module, _, function = name.partition(":")
            assert module.startswith("jaxparity."), name
            try:
                reply = ("ok", getattr(importlib.import_module(module), function)(case, *payload))
            except Exception as e:  # the caller decides what a failed task costs
                reply = ("error", f"{type(e).__name__}: {e}")
            conn.send(("task_done", reply))
        elif message[0] == "explain":
            from ..explain.pipeline import explain_paths

            assert case is not None, "explain before load"
            from .crashes import configure

            _, paths, baseline, base_out, breadcrumb, crashed, agreeing, explained = message
            configure(breadcrumb, crashed)
            base = [a for _, a in base_out]
            found: list[Any] | str
            try:  # the caller reasons across paths (``share_across``): some may be explained in another worker
                from ..explain.pipeline import watched

                def tell(spec: str, what: Any) -> None:  # each stage and each path explained, as it happens
                    conn.send(("stage", spec, what) if isinstance(what, str) else ("explained_one", spec, what))

                with watched(tell):
                    found = explain_paths(case.fn, case.args, [(spec, [a for _, a in outs]) for spec, outs in paths],
                                          baseline, base, agreeing, explained, across=False)
            except Exception as e:  # report, keep the comparison
                import traceback

                found = f"explaining failed: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}"
            conn.send(("explained", found))


def _run_sets(case, spec: str, sets: list, slots, repeat: int, timeout: float | None) -> list:
    """``spec`` on every input set (None: the case's own inputs), ``repeat`` times each; ``slots``
    (an InputSlots of the case's arguments) puts each set in place."""
    from .inprocess import run_in_process, to_host
    from ..paths import make_path

    runs = []
    for arrays in sets:
        try:
            args = slots.fill(arrays) if arrays is not None else case.args
        except ValueError as e:
            runs.append([run_in_process(make_path(spec), _raise(e), (), timeout)])
            continue
        # A fresh Path per run, as everywhere else: its notes belong to that run. Outputs are copied
        # to numpy after the whole chunk (one sync copy right after each run costs more on CPU).
        runs.append([run_in_process(make_path(spec), case.fn, args, timeout, on_host=False) for _ in range(repeat)])
    return [[to_host(r) for r in repeats] for repeats in runs]


def _prestart(specs: list[str]) -> None:
    from ..paths import make_path

    for spec in specs:
        try:
            make_path(spec).prestart()
        except Exception:  # noqa: BLE001 - a head start, never a failure
            pass


def _exit() -> None:
    """Leave at once: everything this worker produced has been sent. Tearing down an interpreter that
    holds JAX and TensorFlow takes over a second, which the command would otherwise wait for."""
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _raise(e: Exception):
    def fail(*_: object) -> None:
        raise e
    return fail


if __name__ == "__main__":
    main(int(sys.argv[1]))
