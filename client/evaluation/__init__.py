"""Evaluating models and checking datasets over the protocol: ``analyst-env eval`` and
``validate``.

``run`` takes an eval from settings to report; ``engine`` plays every task with a
``policies`` policy through ``agent_loop``; ``chat_client`` talks to an
OpenAI-compatible endpoint; ``run_log`` makes a run resumable; ``report`` and
``html_report`` turn its rows into numbers and a page; ``validation`` checks that
every task of a dataset is sound.
"""
