"""An evaluation run as files: the log ``analyst-env eval`` writes and ``/web`` reads.

``run_log`` is where a run lives and its resumable JSONL log; ``report`` computes the
run's numbers from the log's rows. Both are the standard library only and sit below
the server and the evaluation harness, so ``/web``'s Runs page reads runs without
importing the harness that plays them.
"""
