"""Regenerate the vendored CRD schemas from a checkout of kubernetes-sigs/agent-sandbox.

    python extract.py /path/to/agent-sandbox

Reads ``k8s/crds/*.yaml``, keeps each CRD's ``v1beta1`` ``openAPIV3Schema`` with its
``description`` texts removed (they are most of the bytes), and writes one JSON file per
kind beside this script.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

KINDS = {
    "SandboxTemplate": "extensions.agents.x-k8s.io_sandboxtemplates.yaml",
    "SandboxWarmPool": "extensions.agents.x-k8s.io_sandboxwarmpools.yaml",
    "SandboxClaim": "extensions.agents.x-k8s.io_sandboxclaims.yaml",
}


def without_descriptions(node: object) -> object:
    if isinstance(node, dict):
        return {
            k: without_descriptions(v)
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [without_descriptions(v) for v in node]
    return node


def main(repo: str) -> None:
    here = Path(__file__).resolve().parent
    for kind, name in KINDS.items():
        crd = yaml.safe_load((Path(repo) / "k8s" / "crds" / name).read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
        schema = without_descriptions(version["schema"]["openAPIV3Schema"])
        out = {"group": crd["spec"]["group"], "version": "v1beta1", "kind": kind, "schema": schema}
        (here / f"{kind}.json").write_text(json.dumps(out, separators=(",", ":"), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
