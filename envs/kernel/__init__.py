"""What runs inside every sandbox, whichever backend started it.

An episode kernel is a process forked from a warm parent that imported the image's
modules (``image_specs``) and built the IPython shell (``ipyshell``, with figures through
``mpl_backend``); it serves the server's requests (``child.serve_episode``), capturing the
output of cells and shell commands (``capture``) and keeping file paths inside its working
directory (``workpath``); ``procctl`` is the process control it and its parents share.

The local backend's zygote (``envs.local``) and the remote slot runner (``envs.remote``)
both import these modules; nothing here imports either of them.
"""
