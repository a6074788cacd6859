"""The command line answers ``--help``, ``--version`` and its one-line errors without loading
the server, the wire types or the task templates (each costs a second or more on 2 cores)."""

import subprocess
import sys

HEAVY = ("openenv", "pandas", "fastapi", "gradio", "analyst_env.datasets.procedural.generator")


def test_building_the_parser_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from analyst_env.cli import build_parser\n"
        "build_parser().parse_args(['tasks'])\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_lazy_names_still_import():
    from analyst_env.datasets import describe_file
    from analyst_env.datasets.procedural import ProceduralDataset

    assert callable(describe_file) and ProceduralDataset.__name__ == "ProceduralDataset"
