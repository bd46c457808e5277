"""Check a Ray cluster address before `ray.init`, which would otherwise retry a dead address for
many minutes: nothing listening is an error at once, and a cluster that accepts the connection
but does not answer is one after `RAY_CONNECT_TIMEOUT_S`.
"""

from __future__ import annotations

import socket
import threading

from pacplan.errors import PacplanError

RAY_CONNECT_TIMEOUT_S = 30.0
"""How long a Ray cluster address may take to answer before the run gives up with an error."""

_TCP_TIMEOUT_S = 5.0
"""How long to wait for a TCP connection to the address (a host that drops packets)."""


def _host_port(address: str) -> tuple[str, int] | None:
    """`host:port` of an address (`ray://` prefix and IPv6 brackets allowed), or None."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _bootstrap_address(address: str) -> str:
    """The `host:port` Ray itself would connect to (`auto` found, localhost made the node's IP);
    the address unchanged where Ray's helper is missing or for a Ray Client (`ray://`)."""
    if address.startswith("ray://"):
        return address
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die
    except ImportError:  # pragma: no cover - another Ray layout: check the address as given
        return address
    try:
        return canonicalize_bootstrap_address_or_die(address)
    except (ConnectionError, ValueError) as exc:
        raise PacplanError(f"could not connect to the Ray cluster at {address}: {exc}") from None


def check_ray_address(address: str, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Raise a one-line `PacplanError` unless a Ray cluster answers at `address` within about
    `timeout` seconds.

    A TCP connection first (refused or unreachable: an error at once), then, for a cluster
    address, Ray's GCS handshake in a daemon thread: `ray.init` retries a GCS that does not
    answer for many minutes, so it is only called once the handshake worked. A handshake still
    hanging after `timeout` is left to its daemon thread and reported.
    """
    where = f"the Ray cluster at {address}"
    target = _bootstrap_address(address)
    host_port = _host_port(target)
    if host_port is None:
        return  # not host:port (e.g. a name Ray resolves itself): Ray's own errors apply
    host, port = host_port
    try:
        with socket.create_connection((host, port), timeout=min(_TCP_TIMEOUT_S, timeout)):
            pass
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise PacplanError(f"could not connect to {where}: {host}:{port}: {reason} (start one "
                           "with `ray start --head`, or check the address)") from None
    if target.startswith("ray://"):
        return  # a Ray Client server: ray.init has its own timeouts there
    try:
        from ray._raylet import GcsClient
    except ImportError:  # pragma: no cover - another Ray layout: the TCP check must do
        return
    outcome: dict[str, BaseException | None] = {}

    def handshake() -> None:
        try:
            GcsClient(address=target)
            outcome["error"] = None
        except BaseException as exc:  # reported below, in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=handshake, name="pacplan-ray-check", daemon=True)
    thread.start()
    thread.join(timeout)
    if "error" not in outcome:
        raise PacplanError(f"could not connect to {where}: {target} accepts connections but no "
                           f"Ray cluster answered within {timeout:g} s (is it the head's GCS "
                           "port, 6379 by default?)")
    if outcome["error"] is not None:
        first_line = (str(outcome["error"]).strip().splitlines() or [""])[0]
        raise PacplanError(f"could not connect to {where}: {type(outcome['error']).__name__}: "
                           f"{first_line}")
