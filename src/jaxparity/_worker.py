"""Worker process: loads one case, then runs the paths it is asked for (see execute.IsolatedRunner)."""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection


def main(fd: int) -> None:
    conn = Connection(fd)
    case = None
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "exit":
            return
        if message[0] == "load":
            from .case import CaseError, load_case
            from .execute import case_info

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
        elif message[0] == "run":
            from .execute import run_in_process
            from .paths import make_path

            assert case is not None, "run before load"
            _, spec, timeout = message
            conn.send(("done", run_in_process(make_path(spec), case.fn, case.args, timeout)))
        elif message[0] == "run_many":
            from .paths.xla import compile_once

            assert case is not None, "run_many before load"
            _, spec, sets, repeat, timeout = message
            with compile_once():
                runs = _run_sets(case, spec, sets, repeat, timeout)
            conn.send(("done_many", runs))
        elif message[0] == "arrays":
            from .pytree import argument_leaves, host

            assert case is not None, "arrays before load"
            conn.send(("arrays", [(name, host(x)) for name, x in argument_leaves(case.args)]))
        elif message[0] == "explain":
            from .explain.explainer import explain_path

            assert case is not None, "explain before load"
            _, paths, baseline, base_out = message
            base = [a for _, a in base_out]
            try:
                found = [explain_path(case.fn, case.args, spec, baseline, [a for _, a in outs], base)
                         for spec, outs in paths]
            except Exception as e:  # report, keep the comparison
                import traceback

                found = f"explaining failed: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}"
            conn.send(("explained", found))


def _run_sets(case, spec: str, sets: list, repeat: int, timeout: float | None) -> list:
    """``spec`` on every input set (None: the case's own inputs), ``repeat`` times each."""
    from .execute import run_in_process
    from .paths import make_path
    from .samples import args_with

    runs = []
    for arrays in sets:
        try:
            args = args_with(case.args, arrays) if arrays is not None else case.args
        except ValueError as e:
            runs.append([run_in_process(make_path(spec), _raise(e), (), timeout)])
            continue
        runs.append([run_in_process(make_path(spec), case.fn, args, timeout) for _ in range(repeat)])
    return runs


def _raise(e: Exception):
    def fail(*_: object) -> None:
        raise e
    return fail


if __name__ == "__main__":
    main(int(sys.argv[1]))
