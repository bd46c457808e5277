"""The paper's published UAV and Minitaur cost matrices and its UAV and Minitaur priors: where
to find them, how to fetch them.

The files come from the paper's public repository at one pinned commit and are accepted only
when their sha256 matches the value pinned here, so a moved branch, a proxy or a tampered mirror
can never feed other numbers into a certificate. The prior comes as torch files holding
`{'0': tensor}`: each is hash-checked before it is read, read with `torch.load(weights_only=True)`
(the restricted loader, never a plain unpickle), checked for shape and dtype, and stored as
`.npy`; the `.pt` itself is not kept. A download lands in a temporary file inside the
cache folder and is renamed over the target only after its hash matched: an interrupted or
refused download leaves the cache as it was, with no partial file.

The Minitaur prior as a pacplan prior file (`pacplan data minitaur-prior`) is pinned here too,
so any command that finds a run directory missing it names the command that writes it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import shlex
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_bytes, npy_bytes, sha256_bytes, sha256_file

COMMIT = "ef4063c808b9cf57d6a1b4a3fad37efbb1999fdd"
BASE_URL = f"https://raw.githubusercontent.com/irom-lab/PAC-Vision-Planning/{COMMIT}/Weights/"
DEFAULT_TIMEOUT = 30.0
_CHUNK = 1 << 16

MINITAUR_PRIOR_SHA256 = "9b495b0f537e6e8fb11ebb1508a669ec8bcd3c108c27f3ac4988599cabc94288"
"""The sha256 of the paper's Minitaur prior as `pacplan data minitaur-prior` writes it (float64
μ and log σ², its metadata): what a run of the paper's prior records in its manifest."""


def restore_command(path: Path) -> str:
    """The commands that put the paper's Minitaur prior back at `path`."""
    return f"pacplan data paper && pacplan data minitaur-prior {shlex.quote(str(path))}"


def missing_minitaur_prior(path: Path, recorded_sha256: str) -> str | None:
    """What to say of a missing file recorded with the paper's Minitaur prior's sha256 (a run of
    that prior is kept without it: pacplan fetches the paper's files rather than ship them);
    None for any other file."""
    if recorded_sha256 != MINITAUR_PRIOR_SHA256:
        return None
    return (f"{path} is missing: it is the paper's published Minitaur prior, which pacplan "
            f"fetches rather than ships; put it back with `{restore_command(path)}`")


@dataclass(frozen=True)
class PaperFile:
    """One published file: its name in `Weights/`, pinned sha256 and size in bytes (with
    `exact_size` False, only the most it may have: its exact size is not recorded)."""

    name: str
    sha256: str
    size: int
    exact_size: bool = True


@dataclass(frozen=True)
class PaperTensor:
    """A published torch file `{'0': tensor}` and the `.npy` it is stored as."""

    source: PaperFile
    stored: PaperFile
    shape: tuple[int, ...]


PAPER_FILES: tuple[PaperFile, ...] = (
    PaperFile("C_quadrotor.npy",
              "c9225e62e765b6e5352a7c6b942810ff4a5e6e1016d8798517fad3c9f767a9f6", 800_128),
    PaperFile("C_quadrotor_emp_test.npy",
              "4e0ac4244b05b4049580c90c76a6c96aa022ee00c5902d04ea4d9ef79426937c", 1_000_128),
    PaperFile("p_quadrotor.npy",
              "0fcd57cb6620bff651ad10c3feb014d60320f9333892590a485679c779b4c273", 528),
    # The Minitaur's: its code's cost |x − 6| / 6 was not clipped, so 48 entries of C_minitaur
    # (80 of the test matrix) exceed 1; certify-matrix needs --clip.
    PaperFile("C_minitaur.npy",
              "43007585a081267256ce99a9f6588cab10184b054c0cba883ce631def550c92a", 800_128),
    PaperFile("C_minitaur_emp_test.npy",
              "4e231af5cdd6996ad13c942fab1dbdef50fb8a5843c8ae5f420fec79acec0b35", 1_000_128),
    PaperFile("p_minitaur.npy",
              "246d69f3bea8adde5dff8cbc5bde49f5fe0a767f36d236df978d4aaba0cebc37", 528),
)
"""The published cost matrices (certification 4000 × 50, test 5000 × 50) and posteriors (50,)
of the UAV (`quadrotor`) and the Minitaur, fetched as they are."""

_PT_CAP = 1 << 20
"""The most bytes a prior's .pt may have: 13,943 float32 values are 55,772 bytes plus a header."""

PRIOR_FILES: tuple[PaperTensor, ...] = (
    PaperTensor(
        PaperFile("mu_quadrotor_best.pt",
                  "e2513324510a2034a8f943445b411c0f231679d5fc736201ec49d5c95ab5cb10", _PT_CAP,
                  exact_size=False),
        PaperFile("mu_quadrotor_best.npy",
                  "5941e26e561b7896c457a51d7b07f1f19fc33f71fb58770ce5b3866256d79f64", 55_900),
        (13_943,)),
    PaperTensor(
        PaperFile("logvar_quadrotor_best.pt",
                  "cc0cb7165fe68b359a214cf01cd731a221061063a069fe4f42dd32bae4126998", _PT_CAP,
                  exact_size=False),
        PaperFile("logvar_quadrotor_best.npy",
                  "f95f887f3bd0f8bf7ea4bf7c287f6c8e50e644d4e78f1298c698b6b3e1ca763b", 55_900),
        (13_943,)),
    PaperTensor(
        PaperFile("mu_minitaur_best.pt",
                  "2c221119fbebc52b33c51f36fec11f4e710890d21d6ed29844f9dd94ae8b9968", _PT_CAP,
                  exact_size=False),
        PaperFile("mu_minitaur_best.npy",
                  "43c1470426d5e6d1a50b902fcffa56c3d77ded3572c205e3825f4060498f67ad", 3_904),
        (944,)),
    PaperTensor(
        PaperFile("logvar_minitaur_best.pt",
                  "da54eca9bd790d3ab3bade9de1227da8849aaaea3368a854732fe191456072a5", _PT_CAP,
                  exact_size=False),
        PaperFile("logvar_minitaur_best.npy",
                  "dd25e94f656e14d4f24d48565de90927ae28b73385636c06457deccbc1e72858", 3_904),
        (944,)),
)
"""The paper's UAV and Minitaur priors N(μ, diag exp(logvar)), its ES results
(`Weights/*_best.pt`)."""


@dataclass(frozen=True)
class FetchReport:
    """What `fetch_paper_data` did: the folder, and which files it downloaded or found there."""

    directory: Path
    downloaded: tuple[str, ...]
    cached: tuple[str, ...]


def _checkout_shared_dir() -> Path | None:
    """`../shared/data/paper` beside a source checkout (where CI keeps the data), else None."""
    src = Path(__file__).resolve().parents[2]  # src/pacplan/io/paperdata.py
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
    """True when every published file (the prior as its `.npy`) is in `directory`, pinned."""
    files = (*PAPER_FILES, *(t.stored for t in PRIOR_FILES))
    return all(_has_pinned_copy(directory / f.name, f) for f in files)


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


def local_folder(base_url: str) -> Path | None:
    """The folder a file:// URL names (an input a cache must not be written over), else None."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme.lower() != "file":
        return None
    return Path(urllib.request.url2pathname(parts.path))


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
                    what = "the expected" if spec.exact_size else "the allowed"
                    raise PacplanError(f"{spec.name}: {url} sent more than {what} "
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
        if spec.exact_size and received < spec.size:  # the server closed the connection early
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

    A file already there with its pinned hash is not fetched again (for the prior: its `.npy`).
    On the first failure a `PacplanError` is raised; files fetched before it are kept (each one
    is complete and right). `downloaded` names the prior by its `.pt`, `cached` by its `.npy`.
    """
    if not timeout > 0:
        raise PacplanError(f"--timeout must be > 0 seconds, got {timeout:g}")
    sources = (*PAPER_FILES, *(t.source for t in PRIOR_FILES))
    urls = {spec.name: _file_url(base_url, spec.name) for spec in sources}
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
    for tensor in PRIOR_FILES:
        if not force and _has_pinned_copy(directory / tensor.stored.name, tensor.stored):
            cached.append(tensor.stored.name)
            continue
        pt = directory / tensor.source.name
        _download(urls[tensor.source.name], pt, tensor.source, timeout)  # hash checked here
        try:
            store_tensor(pt, tensor, directory / tensor.stored.name)
        finally:
            with contextlib.suppress(OSError):
                pt.unlink()
        downloaded.append(tensor.source.name)
    return FetchReport(directory, tuple(downloaded), tuple(cached))


def read_tensor(pt: Path, tensor: PaperTensor) -> np.ndarray:
    """The array in a hash-checked `.pt` holding `{'0': tensor}`, read with the restricted
    loader; anything else, or another shape or dtype, is a `PacplanError` naming the file."""
    import torch  # only here: the matrices need no torch

    name = tensor.source.name
    try:
        obj = torch.load(pt, map_location="cpu", weights_only=True)
    except Exception as exc:  # the restricted unpickler refuses all but tensors and containers
        why = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise PacplanError(f"{name}: not a tensor file torch.load(weights_only=True) accepts "
                           f"({why})") from None
    value = obj.get("0") if isinstance(obj, dict) else None
    if not isinstance(value, torch.Tensor) or len(obj) != 1:
        raise PacplanError(f"{name}: expected {{'0': tensor}}, got {type(obj).__name__}"
                           + (f" with keys {sorted(map(str, obj))}" if isinstance(obj, dict)
                              else ""))
    if tuple(value.shape) != tensor.shape or value.dtype != torch.float32:
        raise PacplanError(f"{name}: expected a float32 tensor of shape {tensor.shape}, got "
                           f"{str(value.dtype).removeprefix('torch.')} {tuple(value.shape)}")
    array = value.detach().cpu().numpy().astype(np.float32, copy=True)
    if not np.isfinite(array).all():
        raise PacplanError(f"{name}: holds values that are not finite")
    return array


def store_tensor(pt: Path, tensor: PaperTensor, target: Path) -> None:
    """Read `pt` (`read_tensor`) and write it as `target` `.npy`, atomically and only when
    its bytes hash to the pinned sha256 of the stored file."""
    data = npy_bytes(read_tensor(pt, tensor))
    actual = sha256_bytes(data)
    if actual != tensor.stored.sha256:
        raise PacplanError(f"{target.name}: converted from {tensor.source.name}, sha256 "
                           f"{actual} is not the pinned {tensor.stored.sha256}; not saved")
    atomic_write_bytes(target, data)
