"""The worker: execute notebooks, many at once, each in a process of its own, and say what happened, typed.

It imports :mod:`..isolation` only. The grader's side is :mod:`.pool`; everything else runs in the sandbox.

* :mod:`.pool` :class:`~.pool.Pool` starts one worker server per slot (in the sandbox, or not with ``--no-sandbox``),
  hands out :class:`~.pool.Job` s, follows each child through its pipe without trusting it, enforces the deadlines,
  replaces a worker that fails, and yields an :class:`~.protocol.Execution` per notebook;
* :mod:`.server` the worker server: imports torch and the checks once, warms up on the reference notebooks, takes
  the pristine snapshot, then forks one confined child per notebook and sweeps what it left;
* :mod:`.kernel` in the child: executes the code cells in one IPython shell and records their outputs as nbclient
  does, restoring the pristine world before every instructor cell;
* :mod:`.protocol` the typed messages between grader, server and child (cells travel as :class:`~.protocol.Cell`),
  and what the orchestration receives: :class:`~.protocol.Execution`, :class:`~.protocol.CellResult`,
  :class:`~.protocol.Stop`.
"""
