"""Deprecated: the evaluation harness moved to ``analyst_env.evaluation`` (and the run log
and report to ``analyst_env.run_records``). Each old module name here still imports the
moved module, with a ``DeprecationWarning`` (``analyst_env.moved_modules``).
"""
