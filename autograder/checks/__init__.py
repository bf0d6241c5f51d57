"""The checks of every exercise: one module per exercise, named after it (``ex01_chain_rule`` for
``01-chain-rule``), whose ``check_*`` functions are the whole body of one test cell each; shared case helpers are in
:mod:`.cases`. A notebook imports its module as ``checks``::

    from autograder.checks import ex01_chain_rule as checks
    checks.check_central_difference(central_difference)
"""
