"""The Kubernetes Agent Sandbox backend: one claimed agent sandbox per slot, running the runner.

A thin link over ``k8s-agent-sandbox`` (kubernetes-sigs/agent-sandbox's Python SDK) and
the ``kubernetes`` client it is built on. Per slot, the SDK's ``SandboxClient.create_sandbox``
creates a ``SandboxClaim`` against a ``SandboxWarmPool`` and waits until the claimed
``Sandbox`` is Ready (a pre-started pod from the pool, when one is idle). The SDK runs
commands only as request/response (``commands.run``), so the runner is started one layer
down, with a Kubernetes ``pods/exec`` whose WebSocket carries the runner's stdin and stdout
(channels 0 and 1 of the ``v4/v5.channel.k8s.io`` protocol) as bytes. Episodes are forked
inside it, as on Docker and Modal. Deleting the claim deletes the sandbox and its pod.

What the cluster decides, not the server: the image and CPU/memory come from the
``SandboxTemplate`` behind the warm pool (the SDK has no sizing knobs; a recipe's sizing is
ignored), the isolation from its ``runtimeClassName`` (gVisor, Kata). The backend checks at
start-up that the template's image is the one this server's runner needs and that its
network policy denies egress, and refuses to serve otherwise.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote import artifacts, runner_image
from analyst_env.envs.remote.bounded import BackendUnavailable, call_within, import_sdk
from analyst_env.envs.remote.channel import QueueChannel, StderrTail
from analyst_env.envs.remote.options import Timeouts, WarmPool, options_from_settings
from analyst_env.envs.remote.runner_link import RunnerClient
from analyst_env.envs.remote.slots import (
    BuildLog,
    RunnerBackend,
    Slot,
    before_half_life,
    quiet_build,
)
from analyst_env.envs.sandbox import SandboxError

if TYPE_CHECKING:
    from analyst_env.envs.backends import BackendSettings

#: Labels on every claim this backend makes (``kubectl get sandboxclaims -l ...`` finds them).
CLAIM_LABELS = {"app.kubernetes.io/managed-by": "analyst-env"}
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_STDOUT, _STDERR, _ERROR = 1, 2, 3
_EXTENSIONS = ("extensions.agents.x-k8s.io", "v1beta1")


def kube_api_client(kube: ModuleType) -> Any:
    """An ``ApiClient`` for the cluster: the pod's service account in-cluster, else ``KUBECONFIG``
    (or ``~/.kube/config``).

    Raises:
        BackendUnavailable: Neither exists, or the kubeconfig cannot be used.
    """
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = kube.client.Configuration()
        try:
            kube.config.load_incluster_config(client_configuration=configuration)
        except kube.config.ConfigException as exc:
            raise BackendUnavailable(
                f"the agent-sandbox backend runs in a pod without a usable service account: {exc}"
            ) from None
        return kube.client.ApiClient(configuration)
    paths = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if not any(os.path.isfile(p) for p in paths.split(os.pathsep) if p):
        raise BackendUnavailable(
            "the agent-sandbox backend needs a Kubernetes API: run the server in a pod with the "
            "service account of deploy/kubernetes/agent-sandbox/, or set KUBECONFIG to a "
            f"kubeconfig file (none at {paths})"
        )
    try:
        return kube.config.new_client_from_config(config_file=paths)
    except (kube.config.ConfigException, OSError, ValueError) as exc:
        raise BackendUnavailable(f"the kubeconfig {paths} cannot be used: {exc}") from None


def default_namespace() -> str:
    """The server pod's own namespace in-cluster, else ``default``."""
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def network_problem(template: dict) -> str | None:
    """Why sandboxes from ``template`` could reach the network, or None when egress is denied.

    Agent Sandbox's controller applies ``spec.networkPolicy`` as one NetworkPolicy per
    template, where an empty ``egress`` list blocks all egress; with the field omitted it
    applies a default that allows the public internet, and ``Unmanaged`` applies none.
    """
    spec = template.get("spec") or {}
    if spec.get("networkPolicyManagement") == "Unmanaged":
        return "its networkPolicyManagement is Unmanaged (no policy is applied)"
    policy = spec.get("networkPolicy")
    if policy is None:
        return "it has no spec.networkPolicy (the controller's default allows the internet)"
    if policy.get("egress"):
        return "its spec.networkPolicy.egress allows traffic out"
    return None


def template_images(template: dict) -> list[str]:
    """The container images of ``template``'s pod."""
    pod = ((template.get("spec") or {}).get("podTemplate") or {}).get("spec") or {}
    return [c.get("image", "") for c in pod.get("containers") or []]


def exec_chunks(stream: Any, stderr: StderrTail) -> Iterator[bytes]:
    """The runner's stdout from a ``pods/exec`` WebSocket (``kubernetes.stream``, binary mode);
    stderr and the exec's final status go to ``stderr``. Ends when the exec ends."""
    while stream.is_open():
        stream.update(timeout=0.5)  # bounded, so a closed stream is noticed
        yield from _buffered(stream, stderr, (_STDERR,))
    yield from _buffered(stream, stderr, (_STDERR, _ERROR))


def _buffered(stream: Any, stderr: StderrTail, side_channels: tuple[int, ...]) -> Iterator[bytes]:
    """What ``stream`` holds now: ``side_channels`` into ``stderr`` first, then stdout."""
    for channel in side_channels:
        data = stream.read_channel(channel)
        if data:
            stderr.add(data)
    out = stream.read_channel(_STDOUT)
    if out:
        yield out


class AgentSandboxBackend(RunnerBackend):
    """Episodes in Kubernetes Agent Sandboxes claimed from a warm pool, one runner per slot.

    Args:
        resolve: Maps an image name to its recipe.
        namespace: Where the warm pools live and the claims are made.
        warm_pool: The ``SandboxWarmPool`` serving the ``default`` image. A sandbox
            environment's image ``env-<hash>`` is served by the pool ``analyst-env-<tag>``
            (``artifact_name``), which the operator creates.
        claim_timeout_s: How long a claim may take to become Ready (a cold start when the
            pool is empty).
        sdk, kube: The ``k8s_agent_sandbox`` and ``kubernetes`` modules (default: imported).
        timeouts: ``connect_s`` bounds each Kubernetes API call, ``boot_s`` a new slot's
            runner to be ready; ``sandbox_s`` is each claim's ``shutdownTime`` (the
            controller deletes it after, also when the server died), and slots are retired
            at half of it.
        pool: See ``RunnerBackend``.

    Raises:
        BackendUnavailable: SDK missing, no kubeconfig or service account, the API server
            unreachable in time, the Agent Sandbox CRDs or permissions missing, or the
            default image's warm pool missing or its template refused.
    """

    name = "agent-sandbox"

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        namespace: str = "default",
        warm_pool: str = "analyst-env-sandbox",
        claim_timeout_s: float = 180.0,
        sdk: ModuleType | None = None,
        kube: ModuleType | None = None,
        timeouts: Timeouts | None = None,
        pool: WarmPool | None = None,
    ) -> None:
        self.sdk = sdk if sdk is not None else import_sdk("k8s_agent_sandbox", "agent-sandbox")
        self.kube = kube if kube is not None else import_sdk("kubernetes", "agent-sandbox")
        import_sdk("kubernetes.stream", "agent-sandbox")
        models = import_sdk("k8s_agent_sandbox.models", "agent-sandbox")
        self.namespace, self.warm_pool = namespace, warm_pool
        self.claim_timeout_s = claim_timeout_s
        self.timeouts = timeouts or self.timeouts
        api = kube_api_client(self.kube)
        self._configuration = api.configuration
        self._objects = self.kube.client.CustomObjectsApi(api)
        # Only the claim lifecycle goes through the SDK's client; its command and file
        # channels (connection_config) are never opened, so no router or tunnel is needed.
        self._client = self.sdk.SandboxClient(
            connection_config=models.SandboxInClusterConnectionConfig(), api_client=api
        )
        self._api_call(
            "listing SandboxClaims",
            lambda: self._client.list_all_sandboxes(
                self.namespace, label_selector=_selector(CLAIM_LABELS)
            ),
            unavailable=True,
        )
        self._pools: dict[str, str] = {}
        try:  # the default image's pool and template, so a refusal stops `serve` in one line
            self._prepare_image("default", resolve("default"), quiet_build)
        except BackendUnavailable:
            raise
        except SandboxError as exc:
            raise BackendUnavailable(str(exc)) from None
        super().__init__(resolve, pool=pool)

    def artifact_name(self, recipe: Recipe) -> str:
        """The warm pool serving a sandbox environment's image (created by the operator)."""
        return f"analyst-env-{runner_image.artifact_tag(recipe)}"

    def _api_call(self, what: str, fn: Callable[[], Any], *, unavailable: bool = False) -> Any:
        """``fn`` bounded by the connect timeout, its API errors as one line naming the cause."""
        error = BackendUnavailable if unavailable else SandboxError
        try:
            return call_within(self.timeouts.connect_s, f"Kubernetes API ({what})", fn)
        except self.kube.client.ApiException as exc:
            raise error(
                f"Kubernetes API ({what}) in namespace {self.namespace!r}: {_explain(exc)}"
            ) from None
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise error(f"Kubernetes API ({what}) failed: {type(exc).__name__}: {exc}") from None

    def _get(self, plural: str, name: str) -> dict | None:
        group, version = _EXTENSIONS

        def get() -> dict | None:
            try:
                return self._objects.get_namespaced_custom_object(
                    group, version, self.namespace, plural, name
                )
            except self.kube.client.ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        return self._api_call(f"reading {plural}/{name}", get)

    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        pool_name = self.warm_pool if image == "default" else self.artifact_name(recipe)
        pool = self._get("sandboxwarmpools", pool_name)
        if pool is None:
            raise SandboxError(
                f"no SandboxWarmPool {pool_name!r} in namespace {self.namespace!r} for image "
                f"{image!r}: apply deploy/kubernetes/agent-sandbox/ (or create the pool)"
            )
        template_name = pool["spec"]["sandboxTemplateRef"]["name"]
        template = self._get("sandboxtemplates", template_name)
        if template is None:
            raise SandboxError(
                f"the SandboxTemplate {template_name!r} of pool {pool_name!r} does not exist"
            )
        tag = runner_image.artifact_tag(recipe)
        if not any(i.endswith(f":{tag}") for i in template_images(template)):
            raise SandboxError(
                f"the SandboxTemplate {template_name!r} runs {template_images(template)}, but "
                f"image {image!r} needs one tagged {tag!r} (the recipe with this server's "
                f"runner revision {runner_image.RUNNER_REVISION})"
            )
        problem = network_problem(template)
        if problem:
            raise SandboxError(
                f"refusing the SandboxTemplate {template_name!r}: {problem}; set "
                "spec.networkPolicy: {} so its sandboxes have no network"
            )
        self._pools[image] = pool_name

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        pool = self._pools[image]
        try:
            sandbox = self._client.create_sandbox(
                pool,
                namespace=self.namespace,
                sandbox_ready_timeout=int(self.claim_timeout_s),
                labels=dict(CLAIM_LABELS),
                shutdown_after_seconds=self.timeouts.sandbox_s,
            )
        except Exception as exc:
            detail = _explain(exc) if isinstance(exc, self.kube.client.ApiException) else exc
            raise SandboxError(
                f"could not claim a sandbox from warm pool {pool!r} in namespace "
                f"{self.namespace!r}: {detail}"
            ) from None
        created = time.monotonic()
        claim = sandbox.claim_name

        def delete() -> None:
            # The client's delete, not the handle's: it also forgets the handle it tracks.
            self._client.delete_sandbox(claim, namespace=self.namespace)

        try:
            stream = self._exec(sandbox.get_pod_name(), runner_image.runner_command(recipe))
            tail = StderrTail()
            channel = QueueChannel(
                exec_chunks(stream, tail), stream.write_stdin, stream.close, tail.text
            )
            client = RunnerClient(channel, f"agent sandbox {sandbox.sandbox_id}")
            client.wait_ready(self.timeouts.boot_s)
        except BaseException as exc:
            delete()
            if isinstance(exc, self.kube.client.ApiException):
                raise SandboxError(
                    f"could not start the runner in agent sandbox {sandbox.sandbox_id}: "
                    f"{_explain(exc)}"
                ) from None
            raise
        return Slot(client, delete, meta={"created": created, "sandbox": sandbox})

    def _exec(self, pod: str, command: list[str]) -> Any:
        """A ``pods/exec`` WebSocket running ``command`` with stdin, in binary mode.

        ``kubernetes.stream.stream`` swaps the transport of the ``ApiClient`` it is given
        while it connects, so each exec gets a client of its own: calls other threads make
        meanwhile (claims, deletes, other slots' execs) keep their own transport.
        """
        api = self.kube.client.ApiClient(self._configuration)
        try:
            return self.kube.stream.stream(
                self.kube.client.CoreV1Api(api).connect_get_namespaced_pod_exec,
                pod,
                self.namespace,
                command=command,
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
                binary=True,
            )
        finally:
            api.close()  # the WebSocket has its own connection

    def _slot_usable(self, slot: Slot) -> bool:
        # Retire a sandbox well before its claim's shutdownTime ends it under an episode.
        return before_half_life(slot, self.timeouts.sandbox_s)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def _explain(exc: Any) -> str:
    """One line for an ``ApiException``: what its status means here, and the server's reason."""
    status = getattr(exc, "status", None)
    reason = str(getattr(exc, "reason", "") or "")
    # An exec's WebSocket refused by the API server: ``status`` 0, the HTTP status in the text.
    handshake = re.match(r"Handshake status (\d+) ([^-]*)", reason) if status == 0 else None
    if handshake:
        status, reason = int(handshake[1]), handshake[2].strip()
    hint = {
        401: "not authenticated (check the kubeconfig or service account token)",
        403: "forbidden (the server's service account needs the Role in "
        "deploy/kubernetes/agent-sandbox/rbac.yaml)",
        404: "not found (are the Agent Sandbox CRDs and controller installed?)",
    }.get(status or 0)
    return f"{hint} [{status} {reason}]" if hint else f"{status} {reason}".strip()


def from_settings(settings: BackendSettings) -> AgentSandboxBackend:
    """The backend ``make_backend`` builds: the cluster from the pod's service account or
    ``KUBECONFIG``; namespace and warm pool from the settings."""
    _, timeouts, pool = options_from_settings(settings, AgentSandboxBackend)
    return AgentSandboxBackend(
        artifacts.settings_resolver(settings, "agent-sandbox"),
        namespace=settings.agent_sandbox_namespace or default_namespace(),
        warm_pool=settings.agent_sandbox_warm_pool,
        timeouts=timeouts,
        pool=pool,
    )
