"""Evaluating models and checking datasets over the protocol: ``analyst-env eval`` and
``validate``.

``run`` takes an eval from settings to report; ``engine`` plays every task with a
``policies`` policy through ``agent_loop``; ``chat_client`` talks to an
OpenAI-compatible endpoint; ``html_report`` turns a run's report into a page;
``validation`` checks that every task of a dataset is sound. The run's log and the
numbers of its report (``run_records``) sit a layer below, where ``/web`` reads them too.
"""
