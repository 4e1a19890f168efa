"""Where paths run: the execution layer the commands (compare, explain, sweep, reduce) share.

- ``runs``: what a run gives back (``PathRun``) and what is recorded of the case (``CaseInfo``);
- ``inprocess``: one path in this process (``run_in_process``), failures as runs, never raised;
- ``isolated``: paths in a worker process (``IsolatedRunner``), replaced when a path kills it, with
  ``worker`` the worker's side;
- ``runners``: the workers of one comparison, per environment and per concurrent lane (``Runners``);
- ``envs``: other package versions in their own cached virtual environments (``NAME@ENV`` paths);
- ``samples``: input sets, drawn or read, put in place of the case's own inputs.
"""
