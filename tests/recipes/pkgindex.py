"""A PEP 503 package index on a loopback port, serving wheels written by the test.

Builds stay offline and deterministic: the wheel is assembled here (a zip with
METADATA, WHEEL and a RECORD of sha256 hashes) and the index is a real
``http.server``, which ``uv`` talks to exactly as it talks to PyPI.
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.server
import json
import threading
import zipfile
from pathlib import Path

#: Module and value of the package the build tests install.
TINY = "tinypkg_recipes"
TINY_VALUE = 4242


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of ``name`` holding ``files`` (path -> source)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    entries = dict(files)
    entries[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    entries[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [
        f"{path},{_digest(text.encode())},{len(text.encode())}" for path, text in entries.items()
    ]
    record.append(f"{info}/RECORD,,")
    entries[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in entries.items():
            zf.writestr(member, text)
    return path


class PackageIndex:
    """Serves ``root/simple/<project>/`` pages linking to the wheels in ``root/files``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "files").mkdir(parents=True, exist_ok=True)
        (root / "simple").mkdir(exist_ok=True)
        #: Cleared, requests wait until it is set again: holds a build in ``building``.
        self.open = threading.Event()
        self.open.set()
        gate = self.open

        class Handler(_QuietHandler):
            def do_GET(self) -> None:
                gate.wait(120)
                super().do_GET()

        handler = lambda *a, **k: Handler(*a, directory=str(root), **k)  # noqa: E731
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/simple"

    def add(self, name: str, version: str, files: dict[str, str]) -> Path:
        wheel = write_wheel(self.root / "files", name, version, files)
        self._write_page(name)
        return wheel

    def add_sdist(self, name: str, version: str, files: dict[str, str]) -> Path:
        """Publish a source distribution (``.tar.gz``) of ``name`` holding ``files`` under
        ``<name>-<version>/``."""
        import io
        import tarfile

        dist = name.replace("-", "_")
        base = f"{dist}-{version}"
        entries = {
            "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            **files,
        }
        path = self.root / "files" / f"{base}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for member, text in entries.items():
                data = text.encode()
                info = tarfile.TarInfo(f"{base}/{member}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        self._write_page(name)
        return path

    def _write_page(self, name: str) -> None:
        page = self.root / "simple" / name.lower().replace("_", "-")
        page.mkdir(exist_ok=True)
        dist = name.replace("-", "_")
        files = sorted(
            [
                *(self.root / "files").glob(f"{dist}-*.whl"),
                *(self.root / "files").glob(f"{dist}-*.tar.gz"),
            ]
        )
        links = "".join(
            "<a "
            f'href="../../files/{html.escape(w.name)}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">'
            f"{html.escape(w.name)}</a><br>\n"
            for w in files
        )
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")

    def __enter__(self) -> PackageIndex:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class NpmRegistry:
    """A loopback npm registry: ``GET /<name>`` gives the packument, tarballs under ``/-/``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.packuments: dict[str, dict] = {}
        registry = self

        class Handler(_QuietHandler):
            def do_GET(self) -> None:
                from urllib.parse import unquote

                path = unquote(self.path.split("?")[0]).lstrip("/")
                if path.startswith("-/"):
                    super().do_GET()
                    return
                doc = registry.packuments.get(path)
                body = json.dumps(doc).encode() if doc else b'{"error":"Not found"}'
                self.send_response(200 if doc else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), lambda *a, **k: Handler(*a, directory=str(root), **k)
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def add(
        self,
        name: str,
        version: str,
        bin_name: str,
        script: str,
        scripts: dict[str, str] | None = None,
    ) -> None:
        """Publish ``name@version`` with one executable ``bin_name`` running ``script``
        (JavaScript).

        ``scripts`` are the package's lifecycle scripts (``{"postinstall": "..."}``).
        """
        import gzip
        import io
        import tarfile

        manifest = {"name": name, "version": version, "bin": {bin_name: "cli.js"}}
        if scripts:
            manifest["scripts"] = scripts
        files = {
            "package/package.json": json.dumps(manifest),
            "package/cli.js": "#!/usr/bin/env node\n" + script,
        }
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as tar:
            for member, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(member)
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
        tgz = gzip.compress(raw.getvalue(), mtime=0)
        (self.root / "-").mkdir(exist_ok=True)
        file_name = f"{name.replace('/', '-').lstrip('@')}-{version}.tgz"
        (self.root / "-" / file_name).write_bytes(tgz)
        doc = self.packuments.setdefault(name, {"name": name, "dist-tags": {}, "versions": {}})
        doc["dist-tags"]["latest"] = version
        doc["versions"][version] = {
            **manifest,
            **({"hasInstallScript": True} if scripts else {}),
            "dist": {
                "tarball": f"{self.url}-/{file_name}",
                "shasum": hashlib.sha1(tgz).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode(),
            },
        }

    def __enter__(self) -> NpmRegistry:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
