"""The checks of every exercise: one module per exercise, named after it (``ex01_chain_rule`` for ``01-chain-rule``;
a package of one module per part where an exercise outgrows one module, as ``ex11_capstone``), whose ``check_*``
functions are the whole body of one test cell each. A notebook imports its module as ``checks``::

    from autograder.checks import ex01_chain_rule as checks
    checks.check_central_difference(central_difference)                                   # the visible test
    checks.check_central_difference(central_difference, grading_seed=grading_seed())      # a hidden test

Without ``grading_seed`` a check runs the public cases a learner sees; a hidden test cell passes the grading seed
(:func:`autograder.seeding.grading_seed`) and gets fresh cases drawn from it (:func:`.cases.case_stream`). Every case
is a :func:`~autograder.checking.trial`, built so that each catalogued mistake shows in at least two cases of the
visible and of the hidden test, and a case never names a mistake whose value there is the right answer
(:func:`~autograder.misconceptions.armed`). Shared machinery: :mod:`.cases` (case streams and case helpers),
:mod:`.shared` (misconceptions and answer readers several exercises use), :func:`autograder.routes.watch_calls`
(a call to a library function the part asks the learner to write).
"""
