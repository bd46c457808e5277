"""`pacplan data paper` against a local HTTP server on 127.0.0.1 (never the internet): pinned
hashes accepted, wrong bytes refused with no partial file, one-line network errors, and the order
in which `paper_data_dir` looks for the matrices.

The prior's published `.pt` files are not here (no network): the server serves stand-ins holding
the real values (from the converted `.npy`), saved with torch.save, whose own sha256 is pinned
in place of the real one; the `.npy` they become must still hash to the real pinned value."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import shlex
import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from pacplan.cli import app as pacplan_app
from pacplan.cli.data import data_app
from pacplan.errors import PacplanError
from pacplan.io import paperdata
from pacplan.io.paperdata import PAPER_FILES, PRIOR_FILES, fetch_paper_data, paper_data_dir

NAMES = {f.name for f in PAPER_FILES}
STORED = NAMES | {t.stored.name for t in PRIOR_FILES}
"""What a complete cache holds: the matrices and the prior as .npy (no .pt is kept)."""
FETCHED = NAMES | {t.source.name for t in PRIOR_FILES}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that stops reading (an oversized body refused) is expected here."""


class FileServer:
    """Serves `files` under /Weights/ and records every requested path."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.requests: list[str] = []
        self.cut: set[str] = set()  # names whose body stops halfway (a dropped connection)
        self.httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/Weights/"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                body = server.files.get(self.path.removeprefix("/Weights/"))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                name = self.path.removeprefix("/Weights/")
                self.wfile.write(body[: len(body) // 2] if name in server.cut else body)
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@pytest.fixture(scope="session")
def paper_bytes(paper_dir: Path) -> dict[str, bytes]:
    """The real published files, read once."""
    return {f.name: (paper_dir / f.name).read_bytes() for f in PAPER_FILES}


def torch_file(array: np.ndarray) -> bytes:
    """`{'0': tensor}` as torch.save writes it."""
    buf = io.BytesIO()
    torch.save({"0": torch.from_numpy(array)}, buf)
    return buf.getvalue()


@pytest.fixture(scope="session")
def prior_pt(paper_dir: Path) -> dict[str, bytes]:
    """Stand-ins for the published .pt files, holding the real values."""
    return {t.source.name: torch_file(np.load(paper_dir / t.stored.name, allow_pickle=False))
            for t in PRIOR_FILES}


@pytest.fixture
def stand_in_pins(prior_pt: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """Pin the stand-ins' sha256 for the .pt; the .npy pins stay the real ones."""
    pinned = tuple(dataclasses.replace(t, source=dataclasses.replace(
        t.source, sha256=hashlib.sha256(prior_pt[t.source.name]).hexdigest()))
        for t in PRIOR_FILES)
    monkeypatch.setattr(paperdata, "PRIOR_FILES", pinned)


@pytest.fixture
def server(paper_bytes: dict[str, bytes], prior_pt: dict[str, bytes],
           stand_in_pins: None) -> Iterator[FileServer]:
    srv = FileServer({**paper_bytes, **prior_pt})
    thread = threading.Thread(target=srv.httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
    thread.join(5)


@pytest.fixture(autouse=True)
def _no_user_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never read or write the real user cache; the tests set what they need."""
    for var in ("PACPLAN_PAPER_DATA", "PACPLAN_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _one_line_error(excinfo: pytest.ExceptionInfo[PacplanError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message and message
    return message


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _corrupt(data: bytes) -> bytes:
    """Same length, one byte of the array flipped: only the hash can tell."""
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def test_pinned_hashes_are_those_of_the_real_files(paper_bytes: dict[str, bytes]) -> None:
    for f in PAPER_FILES:
        assert hashlib.sha256(paper_bytes[f.name]).hexdigest() == f.sha256
        assert len(paper_bytes[f.name]) == f.size


def test_pinned_prior_hashes_are_those_of_the_converted_files(paper_dir: Path) -> None:
    for t in PRIOR_FILES:
        assert _sha(paper_dir / t.stored.name) == t.stored.sha256
        assert (paper_dir / t.stored.name).stat().st_size == t.stored.size


def test_right_hash_accepted_and_cached(server: FileServer, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    report = fetch_paper_data(server.url, cache)
    assert set(report.downloaded) == FETCHED and report.cached == ()
    assert {p.name for p in cache.iterdir()} == STORED  # no temporary file or .pt left behind
    for f in PAPER_FILES:
        assert _sha(cache / f.name) == f.sha256
    for t in PRIOR_FILES:  # the values read from the .pt, saved as the real .npy byte for byte
        assert _sha(cache / t.stored.name) == t.stored.sha256
    assert sorted(server.requests) == sorted(f"/Weights/{n}" for n in FETCHED)


def test_second_run_downloads_nothing(server: FileServer, tmp_path: Path) -> None:
    fetch_paper_data(server.url, tmp_path)
    first = len(server.requests)
    report = fetch_paper_data(server.url, tmp_path)
    assert report.downloaded == () and set(report.cached) == STORED
    assert len(server.requests) == first
    forced = fetch_paper_data(server.url, tmp_path, force=True)
    assert set(forced.downloaded) == FETCHED and len(server.requests) == 2 * first


def test_wrong_bytes_refused_without_partial_file(server: FileServer, tmp_path: Path) -> None:
    spec = PAPER_FILES[0]
    server.files[spec.name] = _corrupt(server.files[spec.name])
    with pytest.raises(PacplanError) as excinfo:
        fetch_paper_data(server.url, tmp_path)
    message = _one_line_error(excinfo)
    actual = hashlib.sha256(server.files[spec.name]).hexdigest()
    assert spec.name in message and spec.sha256 in message and actual in message
    assert list(tmp_path.iterdir()) == []


def test_wrong_bytes_leave_an_earlier_good_file_intact(server: FileServer, tmp_path: Path,
                                                       paper_bytes: dict[str, bytes]) -> None:
    fetch_paper_data(server.url, tmp_path)
    spec = PAPER_FILES[1]
    server.files[spec.name] = _corrupt(paper_bytes[spec.name])
    with pytest.raises(PacplanError, match="sha256 mismatch"):
        fetch_paper_data(server.url, tmp_path, force=True)
    assert {p.name for p in tmp_path.iterdir()} == STORED
    assert (tmp_path / spec.name).read_bytes() == paper_bytes[spec.name]


def test_a_bad_cached_file_is_replaced(server: FileServer, tmp_path: Path,
                                       paper_bytes: dict[str, bytes]) -> None:
    fetch_paper_data(server.url, tmp_path)
    spec = PAPER_FILES[0]
    (tmp_path / spec.name).write_bytes(_corrupt(paper_bytes[spec.name]))
    report = fetch_paper_data(server.url, tmp_path)
    assert report.downloaded == (spec.name,)
    assert (tmp_path / spec.name).read_bytes() == paper_bytes[spec.name]


def test_oversized_body_refused(server: FileServer, tmp_path: Path) -> None:
    spec = PAPER_FILES[2]
    server.files[spec.name] += b"\0" * (1 << 20)
    with pytest.raises(PacplanError) as excinfo:
        fetch_paper_data(server.url, tmp_path)
    assert "more than the expected" in _one_line_error(excinfo)
    # the files fetched before it are kept; it and the ones after it are not there
    assert {p.name for p in tmp_path.iterdir()} == {f.name for f in PAPER_FILES[:2]}


def test_dropped_connection_is_one_line_and_leaves_nothing(server: FileServer,
                                                            tmp_path: Path) -> None:
    spec = PAPER_FILES[0]
    server.cut.add(spec.name)
    with pytest.raises(PacplanError) as excinfo:
        fetch_paper_data(server.url, tmp_path)
    assert _one_line_error(excinfo).startswith(f"cannot download {server.url}{spec.name}")
    assert list(tmp_path.iterdir()) == []


def test_404_is_one_line(server: FileServer, tmp_path: Path) -> None:
    with pytest.raises(PacplanError) as excinfo:
        fetch_paper_data(server.url + "missing/", tmp_path)
    message = _one_line_error(excinfo)
    assert "HTTP 404" in message and "missing/C_quadrotor.npy" in message
    assert list(tmp_path.iterdir()) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_port_is_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/Weights/"
    with pytest.raises(PacplanError) as excinfo:
        fetch_paper_data(url, tmp_path, timeout=5)
    assert _one_line_error(excinfo).startswith(f"cannot download {url}")
    assert list(tmp_path.iterdir()) == []


def test_silent_server_times_out(tmp_path: Path) -> None:
    with socket.socket() as listener:  # accepts connections (backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/Weights/"
        with pytest.raises(PacplanError) as excinfo:
            fetch_paper_data(url, tmp_path, timeout=0.5)
    assert "no answer within 0.5 s" in _one_line_error(excinfo)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["ftp://example.org/Weights/", "Weights/", ""])
def test_other_url_schemes_refused(url: str, tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="--url must start with"):
        fetch_paper_data(url, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_file_url_mirror(paper_bytes: dict[str, bytes], prior_pt: dict[str, bytes],
                         stand_in_pins: None, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, data in {**paper_bytes, **prior_pt}.items():
        (mirror / name).write_bytes(data)
    report = fetch_paper_data(mirror.as_uri() + "/", tmp_path / "cache")
    assert set(report.downloaded) == FETCHED
    assert paperdata.is_complete(tmp_path / "cache")


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert paperdata.default_cache_dir() == tmp_path / "xdg" / "pacplan" / "paper"
    monkeypatch.setenv("PACPLAN_CACHE", str(tmp_path / "pc"))
    assert paperdata.default_cache_dir() == tmp_path / "pc" / "paper"


def test_paper_data_dir_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                              paper_dir: Path) -> None:
    shared = tmp_path / "shared" / "data" / "paper"
    monkeypatch.setattr(paperdata, "SHARED_DIR", shared)
    monkeypatch.setenv("PACPLAN_CACHE", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "paper"
    assert paper_data_dir() is None  # nothing anywhere
    shutil.copytree(paper_dir, cache)
    assert paper_data_dir() == cache  # a complete cache
    shared.mkdir(parents=True)
    assert paper_data_dir() == shared  # the checkout's shared/ (CI) before the cache
    monkeypatch.setenv("PACPLAN_PAPER_DATA", str(tmp_path / "mine"))
    assert paper_data_dir() == tmp_path / "mine"  # the variable before everything


def test_incomplete_or_wrong_cache_is_not_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               paper_dir: Path) -> None:
    monkeypatch.setattr(paperdata, "SHARED_DIR", None)  # as in an installed wheel
    monkeypatch.setenv("PACPLAN_CACHE", str(tmp_path))
    cache = tmp_path / "paper"
    shutil.copytree(paper_dir, cache)
    assert paper_data_dir() == cache
    spec = PAPER_FILES[0]
    (cache / spec.name).write_bytes(_corrupt((cache / spec.name).read_bytes()))
    assert paper_data_dir() is None
    (cache / spec.name).unlink()
    assert paper_data_dir() is None


def test_minitaur_files_are_fetched_and_make_a_cache_complete(
        server: FileServer, tmp_path: Path) -> None:
    """`pacplan data paper` fetches the paper's quadruped matrices and posterior too; a cache
    without one of them (an older pacplan's) is not complete, and a rerun fetches just it."""
    minitaur = {"C_minitaur.npy", "C_minitaur_emp_test.npy", "p_minitaur.npy"}
    assert minitaur <= NAMES
    cache = tmp_path / "cache"
    fetch_paper_data(server.url, cache)
    c = np.load(cache / "C_minitaur.npy", allow_pickle=False)
    t = np.load(cache / "C_minitaur_emp_test.npy", allow_pickle=False)
    p = np.load(cache / "p_minitaur.npy", allow_pickle=False)
    assert c.shape == (4000, 50) and t.shape == (5000, 50) and p.shape == (50,)
    assert int((c > 1).sum()) == 48 and c.min() >= 0  # the paper's unclipped cost
    assert p.sum() == pytest.approx(1.0, abs=1e-6)
    assert paperdata.is_complete(cache)
    for name in sorted(minitaur):
        (cache / name).unlink()
        assert not paperdata.is_complete(cache)
        before = len(server.requests)
        report = fetch_paper_data(server.url, cache)
        assert report.downloaded == (name,)
        assert server.requests[before:] == [f"/Weights/{name}"]
        assert paperdata.is_complete(cache)


def test_checkout_shared_dir_is_beside_the_repository() -> None:
    repo = Path(__file__).resolve().parents[2]
    assert repo.parent / "shared" / "data" / "paper" == paperdata.SHARED_DIR


def _cli() -> typer.Typer:
    """The `pacplan` layout: `data` registered as a sub-app, as cli.py does."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    app.add_typer(data_app, name="data")
    return app


def test_cli_downloads_into_the_cache_and_the_printed_command_runs(
        server: FileServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PACPLAN_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    result = runner.invoke(_cli(), ["data", "paper", "--url", server.url])
    assert result.exit_code == 0, result.output
    cache = (tmp_path / "cache" / "paper").resolve()
    assert str(cache) in result.output and "PACPLAN_PAPER_DATA" not in result.output
    assert paper_data_dir() == (paperdata.SHARED_DIR if paperdata.SHARED_DIR.is_dir() else cache)
    again = runner.invoke(_cli(), ["data", "paper", "--url", server.url])
    assert again.exit_code == 0 and "downloaded" not in again.output
    lines = [s for s in again.output.splitlines() if s.startswith("next: ")]
    assert len(lines) == 2 and "C_quadrotor.npy" in lines[0] and "C_minitaur.npy" in lines[1]
    for i, line in enumerate(lines):  # each printed command runs (the quadruped's clips)
        args = shlex.split(line.removeprefix("next: "))
        assert args[:2] == ["pacplan", "certify-matrix"]
        out = tmp_path / f"certificate-{i}.json"
        args = [*args[1:-2], "--out", str(out), "--rows", "1000", "--json"]
        certified = runner.invoke(pacplan_app, args)
        assert certified.exit_code == 0, certified.output
        assert out.is_file()


def test_cli_custom_cache_names_the_variable(server: FileServer, tmp_path: Path) -> None:
    result = CliRunner().invoke(_cli(), ["data", "paper", "--url", server.url,
                                         "--cache", str(tmp_path / "here")])
    assert result.exit_code == 0, result.output
    assert f"PACPLAN_PAPER_DATA={tmp_path / 'here'}" in result.output


def test_cli_wrong_hash_is_a_pacplan_error(server: FileServer, tmp_path: Path) -> None:
    spec = PAPER_FILES[0]
    server.files[spec.name] = _corrupt(server.files[spec.name])
    result = CliRunner().invoke(_cli(), ["data", "paper", "--url", server.url,
                                         "--cache", str(tmp_path)])
    assert isinstance(result.exception, PacplanError)  # cli.main prints it as one line, exit 2
    assert "\n" not in str(result.exception)
    assert list(tmp_path.iterdir()) == []


def test_cli_timeout_must_be_positive(tmp_path: Path) -> None:
    result = CliRunner().invoke(_cli(), ["data", "paper", "--timeout", "0",
                                         "--cache", str(tmp_path)])
    assert isinstance(result.exception, PacplanError)
    assert "--timeout" in str(result.exception)
