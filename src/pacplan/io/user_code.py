"""The one boundary to Python code pacplan did not write: a user's policy, cost function,
environment or randomizer, named `module:attribute`.

- Importing: the working folder is searched *after* the installed libraries, never ahead of
  them, so a `torch.py` or `onnxruntime.py` lying beside a downloaded model is never what
  `import torch` finds (`find_modules_in_working_folder`).
- Calling: any exception of the user's code, `SystemExit` included (a `sys.exit(0)` inside a
  policy must not end a command with exit 0 and no certificate), becomes one `PacplanError`
  line naming what was called (`calling_user_code`); Ctrl-C still stops the command.
- Identity: a user's code is identified by the sha256 of every user file it imports, found by
  reading its `import` statements (`user_code_sha256`), so a resumed run notices a changed
  helper module and not only a changed entry module. Installed libraries (the standard library,
  site-packages) and pacplan itself are not user files; their versions are recorded elsewhere.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pacplan.errors import PacplanError
from pacplan.io.renamed import current_path

MAX_USER_FILES = 2000
"""The most files one user entry point may import from the user's own folders (a guard against
hashing a home directory's worth of scripts through a stray `sys.path` entry)."""


def reason(exc: BaseException) -> str:
    """An exception as one short line: its type and first 200 characters."""
    if isinstance(exc, ExitCalled):
        return f"it called os._exit({exc.code!r}), which would end pacplan with no certificate"
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r})"
    text = " ".join(str(exc).split())
    return type(exc).__name__ + (f": {text[:200]}" if text else "")


def find_modules_in_working_folder() -> None:
    """Let `module:callable` arguments name modules of the working folder, searched last.

    A console script's `sys.path` has no working folder; `python -m pacplan` puts it first,
    which is Python's own rule and the user's choice."""
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.append(cwd)


def working_folder_modules(names: Iterable[str]) -> list[str]:
    """The files of the modules `names` (of those imported) that came from the working folder
    as a `sys.path` entry (`name.py` or a package `name/` right there: the user's code found
    there, which a command says it ran), relative to it."""
    cwd = Path(os.getcwd()).resolve()
    found = []
    for name in names:
        module = sys.modules.get(name)
        source = getattr(module, "__file__", None)
        if not isinstance(source, str):
            continue
        path = Path(source).resolve()
        top = name.partition(".")[0]
        if path.is_relative_to(cwd) and path.relative_to(cwd).parts[0] in (top, f"{top}.py") \
                and is_user_file(path):
            found.append(path.relative_to(cwd).as_posix())
    return sorted(found)


def import_target(spec: str, what: str) -> Any:
    """`module:attribute` imported and looked up; any failure, an exception raised while the
    module runs (a SyntaxError, `sys.exit`) included, is one line naming `what`."""
    module_name, sep, attr = current_path(spec).partition(":")  # pacplan's renamed packages
    if not (sep and module_name and attr):
        raise PacplanError(f"{what} must be 'module:attribute', got {spec!r}")
    module = import_module(module_name, what)
    try:
        return getattr(module, attr)
    except AttributeError:
        source = getattr(module, "__file__", None)
        raise PacplanError(f"{what} is not available: module {module_name}"
                           f"{f' ({source})' if source else ''} has no attribute "
                           f"{attr!r}") from None


def import_module(module_name: str, what: str) -> Any:
    """Module `module_name` imported; any failure, an exception raised while the module runs
    (a SyntaxError, `sys.exit`) included, is one line naming `what`."""
    try:
        with exit_refused():  # an os._exit at import would end pacplan with exit 0
            return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise PacplanError(f"{what} is not available: no module named {exc.name!r} (looked "
                               "in the installed libraries, then the working folder)") from None
        raise PacplanError(f"{what}: importing {module_name} failed ({reason(exc)})") from None
    except (Exception, SystemExit) as exc:
        where = f" at {exc.filename}:{exc.lineno}" if isinstance(exc, SyntaxError) else ""
        raise PacplanError(f"{what}: importing {module_name} failed{where} "
                           f"({reason(exc)})") from None


class ExitCalled(SystemExit):
    """User code called `os._exit`: in this process that would end pacplan at once, with exit
    status 0 and no certificate, so it is raised instead (`calling_user_code`)."""


_REAL_EXIT = os._exit


def _exit_in_user_code(owner: int) -> Any:
    def refused(status: int = 0) -> None:
        if os.getpid() != owner:  # a process the user's code forked: its own exit is real
            _REAL_EXIT(status)
        raise ExitCalled(status)
    return refused


@contextlib.contextmanager
def calling_user_code(what: str) -> Iterator[None]:
    """Run user code; its exception, `SystemExit` or `os._exit` becomes
    `PacplanError(what (reason))`.

    A `PacplanError` passes through unchanged (pacplan's own checks inside the call, e.g. an
    imported policy's reader, already say what went wrong). While the block runs, `os._exit`
    raises `ExitCalled` in this process (a policy's `os._exit(0)` ended certify-policy with
    exit 0 and no certificate); a child the user's code forks keeps the real one."""
    try:
        with exit_refused():
            yield
    except PacplanError:
        raise
    except (Exception, SystemExit) as exc:
        raise PacplanError(f"{what} ({reason(exc)})") from None


@contextlib.contextmanager
def exit_refused() -> Iterator[None]:
    """`os._exit` raises `ExitCalled` in this process while the block runs."""
    previous = os._exit
    os._exit = _exit_in_user_code(os.getpid())
    try:
        yield
    finally:
        os._exit = previous


@functools.cache
def _library_roots() -> tuple[Path, ...]:
    """Folders whose files are libraries, not the user's: the interpreter's, every site
    folder, and pacplan's own package."""
    roots = {Path(p) for key in ("stdlib", "platstdlib", "purelib", "platlib")
             if (p := sysconfig.get_paths().get(key))}
    roots.update(Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))
    roots.add(Path(__file__).resolve().parents[1])
    return tuple(r.resolve() for r in roots)


def is_user_file(path: str | Path) -> bool:
    """Whether `path` is a Python source file outside the libraries (the user's code)."""
    p = Path(path).resolve()
    if p.suffix != ".py" or not p.is_file():
        return False
    return not any(p.is_relative_to(root) for root in _library_roots())


def _origin(name: str) -> Path | None:
    """The source file of module `name` without running it (a package's parents may be
    imported by `find_spec`, as `import` itself would); a script run as __main__ has its
    file."""
    loaded = sys.modules.get(name)
    if name == "__main__" or (loaded is not None and getattr(loaded, "__spec__", None) is None):
        source = getattr(loaded, "__file__", None)
        return Path(source) if isinstance(source, str) else None
    try:
        spec = importlib.util.find_spec(name)
    except (Exception, SystemExit):  # a parent package that fails: nothing to hash here
        return None
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin else None


def _imported_names(path: Path, package: str) -> set[str]:
    """Every module name an `import` statement of `path` may load (with its parents)."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError, OSError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, *([base] if base else [])])
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
    expanded = set()
    for name in names:
        parts = name.split(".")
        expanded.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return expanded


def user_files(module_name: str) -> list[Path]:
    """The user files `module_name` is made of: its own file and, recursively, every user
    file its `import` statements name (sorted; empty for a library module)."""
    first = _origin(module_name)
    if first is None or not is_user_file(first):
        return []
    seen: dict[Path, str] = {first.resolve(): module_name}
    todo = [(first.resolve(), module_name)]
    while todo:
        path, name = todo.pop()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported in sorted(_imported_names(path, package)):
            origin = _origin(imported)
            if origin is None or not is_user_file(origin) or origin.resolve() in seen:
                continue
            if len(seen) >= MAX_USER_FILES:
                raise PacplanError(f"{module_name} imports more than {MAX_USER_FILES} files "
                                   "from outside the installed libraries: install your "
                                   "package, or run from a smaller folder")
            seen[origin.resolve()] = imported
            todo.append((origin.resolve(), imported))
    return sorted(seen)


_RECORDS: list[dict[Path, str]] = []


@contextlib.contextmanager
def recording_user_files() -> Iterator[dict[Path, str]]:
    """Every user file `user_code_sha256` hashes inside the block, as {path: sha256 of the
    bytes it hashed}: what a certificate records so that `verify` can re-hash each file
    without importing (running) anything."""
    record: dict[Path, str] = {}
    _RECORDS.append(record)
    try:
        yield record
    finally:
        _RECORDS.remove(record)


def user_code_sha256(obj_or_module: Any, spec: str) -> str:
    """One sha256 over the user files behind `obj_or_module` (a module name, or an object
    whose `__module__` names one): each file's path relative to the first and its bytes.
    Code without user files (a library function, a lambda typed at a prompt) is identified by
    `spec` alone."""
    name = obj_or_module if isinstance(obj_or_module, str) else getattr(obj_or_module,
                                                                      "__module__", None)
    files = user_files(name) if isinstance(name, str) and name else []
    digest = hashlib.sha256(spec.encode())
    if not files:
        return digest.hexdigest()
    root = os.path.commonpath([p.parent for p in files])
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise PacplanError(f"cannot read {path}, a file of {spec} ({exc.strerror})") from None
        label = os.path.relpath(path, root)
        digest.update(f"\n{label}\n{len(data)}\n".encode())
        digest.update(data)
        for record in _RECORDS:
            record[path] = hashlib.sha256(data).hexdigest()
    return digest.hexdigest()
