"""Sandbox backends that run episodes somewhere else: Docker, Modal and E2B.

Docker and Modal run the *slot runner* (``runner``) in a long-lived container
or sandbox per slot and fork one episode kernel inside it per episode; the
server drives it with the kernel's framed-JSON requests (``envs.kernel.child``) over a byte
stream (``runner_link``). E2B runs cells in its own Jupyter kernel (``e2b_backend``).
Vendor SDKs are imported only when their backend is built.
"""
