"""Sandboxes: where the model's code runs, one persistent kernel per episode.

``sandbox`` is the interface (``Sandbox``, ``SandboxBackend``, results, errors) and
``capabilities`` what a backend declares and the optional parts only some have;
``kernel_sandbox`` the one policy for limits, interrupts and kernel restarts,
over a link per transport; ``model_texts`` the words the model reads when its
code hits a limit; ``kernel`` the code that runs inside every sandbox (the
kernel's request loop, output capture, the IPython shell). Backends: ``local``
(kernels forked from a warm zygote on this host), ``remote`` (Docker and Modal
slot runners, E2B), chosen by name in ``backends``. ``recipes`` describes what a
baked image contains and builds it. ``docs/architecture-sandbox.md`` draws the whole.
"""
