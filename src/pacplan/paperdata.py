"""The paper's published UAV cost matrices: where to find them and how to fetch them safely.

The files come from the paper's public repository at one pinned commit and are accepted only
when their sha256 matches the value pinned here, so a moved branch, a proxy or a tampered mirror
can never feed other numbers into a certificate. A download lands in a temporary file inside the
cache folder and is renamed over the target only after its hash matched: an interrupted or
refused download leaves the cache as it was, with no partial file.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pacplan.errors import PacplanError
from pacplan.files import sha256_file

COMMIT = "ef4063c808b9cf57d6a1b4a3fad37efbb1999fdd"
BASE_URL = f"https://raw.githubusercontent.com/irom-lab/PAC-Vision-Planning/{COMMIT}/Weights/"
DEFAULT_TIMEOUT = 30.0
_CHUNK = 1 << 16


@dataclass(frozen=True)
class PaperFile:
    """One published file: its name in `Weights/`, pinned sha256 and size in bytes."""

    name: str
    sha256: str
    size: int


PAPER_FILES: tuple[PaperFile, ...] = (
    PaperFile("C_quadrotor.npy",
              "c9225e62e765b6e5352a7c6b942810ff4a5e6e1016d8798517fad3c9f767a9f6", 800_128),
    PaperFile("C_quadrotor_emp_test.npy",
              "4e0ac4244b05b4049580c90c76a6c96aa022ee00c5902d04ea4d9ef79426937c", 1_000_128),
    PaperFile("p_quadrotor.npy",
              "0fcd57cb6620bff651ad10c3feb014d60320f9333892590a485679c779b4c273", 528),
)


@dataclass(frozen=True)
class FetchReport:
    """What `fetch_paper_data` did: the folder, and which files it downloaded or found there."""

    directory: Path
    downloaded: tuple[str, ...]
    cached: tuple[str, ...]


def _checkout_shared_dir() -> Path | None:
    """`../shared/data/paper` beside a source checkout (where CI keeps the data), else None."""
    src = Path(__file__).resolve().parents[1]
    repo = src.parent
    if src.name != "src" or not (repo / "pyproject.toml").is_file():
        return None  # an installed wheel: there is no checkout to look beside
    return repo.parent / "shared" / "data" / "paper"


SHARED_DIR: Path | None = _checkout_shared_dir()


def _user_cache_root() -> Path:
    """The platform's user cache folder (what platformdirs would say), honouring XDG."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) if local else Path.home() / "AppData" / "Local"
    return Path.home() / ".cache"


def default_cache_dir() -> Path:
    """`$PACPLAN_CACHE/paper`, else `<user cache>/pacplan/paper` (e.g. ~/.cache/pacplan/paper)."""
    root = os.environ.get("PACPLAN_CACHE")
    return (Path(root) if root else _user_cache_root() / "pacplan") / "paper"


def _has_pinned_copy(path: Path, spec: PaperFile) -> bool:
    """True when `path` is a file whose bytes hash to the pinned sha256."""
    return path.is_file() and path.stat().st_size == spec.size and sha256_file(path) == spec.sha256


def is_complete(directory: Path) -> bool:
    """True when every published file is in `directory` with its pinned hash."""
    return all(_has_pinned_copy(directory / f.name, f) for f in PAPER_FILES)


def paper_data_dir() -> Path | None:
    """Where code and tests read the paper's matrices, or None when nowhere.

    Order: $PACPLAN_PAPER_DATA (taken as given), `../shared/data/paper` beside the checkout
    (CI), the user cache when it holds every file with its pinned hash.
    """
    env = os.environ.get("PACPLAN_PAPER_DATA")
    if env:
        return Path(env)
    if SHARED_DIR is not None and SHARED_DIR.is_dir():
        return SHARED_DIR
    cache = default_cache_dir()
    return cache if is_complete(cache) else None


def _file_url(base_url: str, name: str) -> str:
    """`base_url` joined with a file name; only http(s) and file URLs are accepted."""
    scheme = urllib.parse.urlsplit(base_url).scheme.lower()
    if scheme not in ("http", "https", "file"):
        raise PacplanError(f"--url must start with https://, http:// or file://, got {base_url!r}")
    return base_url.rstrip("/") + "/" + urllib.parse.quote(name)


def _network_error(url: str, exc: BaseException, timeout: float) -> PacplanError:
    """One line naming the URL and why it could not be read."""
    if isinstance(exc, urllib.error.HTTPError):
        why = f"HTTP {exc.code} {exc.reason}"
    elif isinstance(exc, urllib.error.URLError):
        why = str(exc.reason)
    else:
        why = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) or "timed out" in why:
        why = f"no answer within {timeout:g} s"
    return PacplanError(f"cannot download {url}: {' '.join(why.split())}")


_MIN_BYTES_PER_TIMEOUT = 1024
"""--timeout is also the window in which a server must send at least this much."""


def _chunks(url: str, spec: PaperFile, timeout: float) -> Iterator[bytes]:
    """The response body in blocks; any network failure becomes one `PacplanError` line."""
    request = urllib.request.Request(url, headers={"User-Agent": "pacplan"})
    total = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            read = getattr(response, "read1", response.read)  # returns what has arrived
            window_start, window_bytes = time.monotonic(), 0
            while chunk := read(_CHUNK):
                window_bytes += len(chunk)
                if time.monotonic() - window_start >= timeout:  # a trickle is not an answer
                    if window_bytes < _MIN_BYTES_PER_TIMEOUT:
                        raise PacplanError(
                            f"cannot download {url}: under {_MIN_BYTES_PER_TIMEOUT} bytes in "
                            f"{timeout:g} s (the server trickles); nothing was written")
                    window_start, window_bytes = time.monotonic(), 0
                total += len(chunk)
                if total > spec.size:  # never fill a disk from a wrong or hostile server
                    raise PacplanError(f"{spec.name}: {url} sent more than the expected "
                                       f"{spec.size} bytes; nothing was written")
                yield chunk
    except (OSError, http.client.HTTPException) as exc:  # URLError, HTTPError, timeouts
        raise _network_error(url, exc, timeout) from None


def _download(url: str, target: Path, spec: PaperFile, timeout: float) -> None:
    """Fetch `url` into a temporary file beside `target`; rename it only if the hash matches."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    renamed = False
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for chunk in _chunks(url, spec, timeout):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
            received = out.tell()
        if received < spec.size:  # the server closed the connection early
            raise PacplanError(f"cannot download {url}: the connection ended after {received} "
                               f"of {spec.size} bytes; the file was not saved")
        actual = digest.hexdigest()
        if actual != spec.sha256:
            raise PacplanError(f"{spec.name}: sha256 mismatch for {url}: expected {spec.sha256}, "
                               f"got {actual}; the file was not saved")
        tmp.chmod(0o644)  # mkstemp makes it private; a cache file is ordinary data
        os.replace(tmp, target)
        renamed = True
    finally:
        if not renamed:
            with contextlib.suppress(OSError):
                tmp.unlink()


def fetch_paper_data(base_url: str = BASE_URL, cache: Path | None = None, *, force: bool = False,
                     timeout: float = DEFAULT_TIMEOUT) -> FetchReport:
    """Download every published file missing from `cache` (or all with `force`), hash-checked.

    A file already there with its pinned hash is not fetched again. On the first failure a
    `PacplanError` is raised; files fetched before it are kept (each one is complete and right).
    """
    if not timeout > 0:
        raise PacplanError(f"--timeout must be > 0 seconds, got {timeout:g}")
    urls = {spec.name: _file_url(base_url, spec.name) for spec in PAPER_FILES}
    directory = Path(cache) if cache is not None else default_cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    downloaded: list[str] = []
    cached: list[str] = []
    for spec in PAPER_FILES:
        target = directory / spec.name
        if not force and _has_pinned_copy(target, spec):
            cached.append(spec.name)
            continue
        _download(urls[spec.name], target, spec, timeout)
        downloaded.append(spec.name)
    return FetchReport(directory, tuple(downloaded), tuple(cached))
