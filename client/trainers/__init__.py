"""Deprecated: the trainer adapters moved to ``analyst_env.trainers`` (and the prompts to
``analyst_env.prompts``). Each old module name here still imports the moved module, with a
``DeprecationWarning`` (``analyst_env.moved_modules``).
"""
