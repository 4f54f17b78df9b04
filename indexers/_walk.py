"""Which files of a workspace get indexed, and why the others do not.

``walk`` lists the candidates (``git ls-files`` in a git work tree, else the folder), then
reads them one at a time, in path order, yielding a ``SourceFile`` or a ``Skipped`` with
exactly one reason: the first check in ``_Walker.classify`` that applies. Cheap name checks
run before any system call, the size check before any read, content sniffs last
(``indexers._sniff``).

Globs are gitignore-like over the '/'-separated workspace-relative path (see
``indexers._globs``). An include glob forces a file past the LOCKFILE, TRANSLATION, MINIFIED,
GENERATED and DATA defaults when it matches; it forces a file past VENDORED only when it also
names the vendored folder (``node_modules/left-pad/**``, not ``**/*.js``), so scoping a walk to
``*.py`` never drags a virtualenv in. Nothing forces a file past SECRET, BINARY, TOO_LARGE or
SYMLINK_ESCAPE.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import json
import os
import posixpath
import re
import stat
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, fields
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from indexers._gitenv import git_overrides
from indexers._globs import glob_to_regex
from indexers._secrets import redacted_path, secret_paths
from indexers._sniff import size_text, sniff

if TYPE_CHECKING:
    import git

__all__ = ["SkipReason", "Skipped", "SourceFile", "WalkOptions", "walk"]

# Third-party, build-output and cache folders (names or globs): nobody wrote that code here.
_VENDORED_DIRS = (
    ".git", ".hg", ".svn", ".cortex", "node_modules", "bower_components", "jspm_packages",
    "vendor", ".venv", "site-packages", "__pycache__", ".tox", ".nox", ".eggs",
    "*.egg-info", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".cache",
    "htmlcov", ".gradle", ".next", ".nuxt", ".svelte-kit", ".parcel-cache", ".terraform",
)  # fmt: skip
# Folders a symlink must not lead into: version control's data (a git config holds remote
# credentials and CI tokens) and cortex's own state.
_PRIVATE_DIRS = frozenset({".git", ".hg", ".svn", ".cortex"})
# Build outputs and local environments. Their names are also common package names
# (pypa/build's ``src/build``, CPython's ``Lib/venv``), so files git tracks under them are
# indexed; untracked ones, and any in a folder without git, are skipped as vendored.
_OUTPUT_DIRS = ("build", "dist", "target", "out", "venv", "env")
# Dependency lock files: machine-written, often huge, and noise in search results.
_LOCKFILES = (
    "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "Cargo.lock", "poetry.lock",
    "Pipfile.lock", "composer.lock", "Gemfile.lock", "go.sum", "uv.lock", "*.lock",
)  # fmt: skip
# Translation catalogs: one copy of every user-facing message per language (Django ships
# 1,257 gettext `.po` files, 20% of its bytes; Sphinx 107, 32%), so a search for a message
# finds sixty translations before the code that emits it. Gettext's template (`.pot`) is
# one file with the message ids and their source lines: it stays. Files in a gettext
# `LC_MESSAGES` folder are catalogs whatever their suffix (Sphinx's compiled `sphinx.js`).
_TRANSLATIONS = ("*.po", "*.mo")
_TRANSLATION_DIRS = ("LC_MESSAGES",)
# Basenames (case-insensitive) that usually hold credentials: never read, whatever is included.
_SECRET_PATTERNS = (
    ".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "*.p12", "*.pfx", "*.jks", "*.keystore", ".netrc", ".pypirc", ".npmrc", ".htpasswd",
    "credentials", "credentials.json", "*.credentials", "secrets.yml", "secrets.yaml",
    "secrets.json", "*.ppk", ".pgpass",
)  # fmt: skip
# Extensions (case-insensitive) of formats that are binary by definition: skipped unread.
_BINARY_EXTENSIONS = (
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "pdf", "zip", "gz", "tgz", "bz2", "xz",
    "7z", "tar", "jar", "war", "class", "so", "dylib", "dll", "exe", "o", "a", "pyc", "pyo",
    "whl", "woff", "woff2", "ttf", "otf", "eot", "mp3", "mp4", "wav", "ogg", "mov", "avi",
    "sqlite", "db", "bin", "npy", "npz", "pkl", "pickle", "parquet",
)  # fmt: skip
# Bundler output and source maps: one giant line each, useless as evidence.
_MINIFIED_SUFFIXES = (".min.js", ".min.css", ".map")
# A copied-in library release: `jquery-3.5.1.js`, `underscore-1.13.1.js`, `bootstrap-4.6.css`.
_VERSIONED_LIBRARY = re.compile(r"^[A-Za-z][\w.]*?-v?\d+(\.\d+)+([.-][\w]+)*\.(js|mjs|css)$")

_MAX_FILE_BYTES = 1 << 20  # 1 MiB: past this a "source" file is data or generated
# Bump when a check changes beyond what ``WalkOptions``' fields say (a threshold, a sniff
# in ``indexers._sniff``), so indexes built under the old rules are rebuilt
# (``WalkOptions.fingerprint``).
# 2: Go's generated marker after a licence header; "generated ... do not edit" only in a comment
# 3: a UTF-16 or UTF-32 file with a byte-order mark is text, not binary
_RULES_VERSION = 3
# Read without following a last-component symlink (it was checked) and without blocking on
# a FIFO that replaced a regular file after the lstat.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class SkipReason(StrEnum):
    """Why a candidate path was not indexed; ``describe`` is the text for CLI output."""

    BINARY = "binary"
    TOO_LARGE = "too_large"
    VENDORED = "vendored"
    GENERATED = "generated"
    MINIFIED = "minified"
    DATA = "data"
    LOCKFILE = "lockfile"
    TRANSLATION = "translation"
    SECRET = "secret"
    SYMLINK_ESCAPE = "symlink_escape"
    EXCLUDED = "excluded"
    NOT_INCLUDED = "not_included"
    NOT_REGULAR = "not_regular"
    MISSING = "missing"
    UNREADABLE = "unreadable"
    EMPTY = "empty"

    @property
    def describe(self) -> str:
        """A short human description, e.g. ``"dependency lock file"``."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS: dict[SkipReason, str] = {
    SkipReason.BINARY: "binary file",
    SkipReason.TOO_LARGE: "larger than the size limit",
    SkipReason.VENDORED: "in a vendored, build or cache folder",
    SkipReason.GENERATED: "generated code",
    SkipReason.MINIFIED: "minified code or source map",
    SkipReason.DATA: "a large table of literals, not code",
    SkipReason.LOCKFILE: "dependency lock file",
    SkipReason.TRANSLATION: "translation catalog",
    SkipReason.SECRET: "may hold credentials",
    SkipReason.SYMLINK_ESCAPE: "symlink pointing outside the workspace",
    SkipReason.EXCLUDED: "matched an exclude glob",
    SkipReason.NOT_INCLUDED: "matched no include glob",
    SkipReason.NOT_REGULAR: "not a regular file",
    SkipReason.MISSING: "gone before it could be read",
    SkipReason.UNREADABLE: "could not be read",
    SkipReason.EMPTY: "empty or only white space",
}


@dataclass(frozen=True, slots=True)
class WalkOptions:
    """What ``walk`` lists and skips.

    Extend a default rather than replace it, e.g.
    ``WalkOptions(vendored_dirs=WalkOptions().vendored_dirs + ("third_party",))``.
    """

    max_file_bytes: int = _MAX_FILE_BYTES
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    vendored_dirs: tuple[str, ...] = _VENDORED_DIRS
    output_dirs: tuple[str, ...] = _OUTPUT_DIRS
    lockfiles: tuple[str, ...] = _LOCKFILES
    translations: tuple[str, ...] = _TRANSLATIONS
    translation_dirs: tuple[str, ...] = _TRANSLATION_DIRS
    secret_patterns: tuple[str, ...] = _SECRET_PATTERNS
    binary_extensions: tuple[str, ...] = _BINARY_EXTENSIONS
    follow_symlinks: bool = True
    use_git: bool = True

    def __post_init__(self) -> None:
        if self.max_file_bytes < 0:
            raise ValueError(f"max_file_bytes must be >= 0, got {self.max_file_bytes}")
        # A bare string would be iterated as one-character globs: fail loudly instead.
        for field in fields(self):
            if isinstance(getattr(self, field.name), str):
                raise TypeError(f"WalkOptions.{field.name} must be a tuple of strings, not a str")

    def is_secret_name(self, path: str) -> bool:
        """Whether ``path``'s file name is one the walk skips unread as secret (``.env``)."""
        return bool(_secret_names(tuple(self.secret_patterns)).fullmatch(posixpath.basename(path)))

    def is_left_out(self, path: str) -> bool:
        """Whether the user's ``exclude`` and ``include`` globs leave ``path`` out (what
        else shows a workspace's files, as its diff lane, shows no other either)."""
        exclude, include = _scope_regexes(tuple(self.exclude), tuple(self.include))
        if any(rx.fullmatch(path) for rx in exclude):
            return True
        return bool(include) and not any(rx.fullmatch(path) for rx in include)

    def fingerprint(self) -> str:
        """A short digest of every setting and rule that decides which files are indexed:
        an index built under another fingerprint may hold files these options skip, or
        lack files they admit."""
        settings = [_RULES_VERSION, *(getattr(self, f.name) for f in fields(self))]
        return hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file to index: its bytes as read, with the stat that preceded the read."""

    path: str  # workspace-relative, '/'-separated; a followed symlink keeps the link's path
    abs_path: Path
    data: bytes
    size: int  # len(data)
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Skipped:
    """A candidate that was not indexed. A pruned folder's path ends with '/'."""

    path: str
    reason: SkipReason
    detail: str = ""  # e.g. "2 MiB > 1 MiB", "target /etc/passwd is outside the workspace"


def walk(
    root: str | os.PathLike[str],
    options: WalkOptions = WalkOptions(),
    *,
    only: Collection[str] | None = None,
) -> Iterator[SourceFile | Skipped]:
    """Yield every candidate under ``root`` once, sorted by path, read lazily.

    Listing happens before this returns (so a bad root or a failing git raises here);
    reading happens as the iterator advances. A root that is a file yields just that file,
    under its basename. Raises ``FileNotFoundError`` for a missing root, ``ValueError`` for a
    malformed glob, ``RuntimeError`` when ``git ls-files`` fails.

    ``only`` limits the result to those relative paths (what an overlay re-reads): each is
    judged exactly as in a full walk, listed files not named are not read, and folder
    verdicts are left out.

    >>> counts = Counter(getattr(x, "reason", "indexed") for x in walk("."))  # doctest: +SKIP
    """
    given = Path(root)
    try:
        root_stat = given.stat()
    except FileNotFoundError as exc:
        raise FileNotFoundError(errno.ENOENT, "workspace root does not exist", str(root)) from exc
    if not stat.S_ISDIR(root_stat.st_mode):
        # A single file is checked as if its folder were the workspace.
        absolute = given.absolute()
        walker = _Walker(os.path.realpath(absolute.parent), options)
        return walker.emit([absolute.name])
    walker = _Walker(os.path.realpath(given), options)
    listed = _git_list(walker) if options.use_git else None
    paths = listed if listed is not None else _tree_list(walker)
    if only is not None:
        wanted = set(only)
        walker.pre.clear()
        paths = [p for p in paths if p in wanted]
    return walker.emit(paths)


def _read_file(path: str, limit: int) -> bytes:
    """Read at most ``limit`` bytes of ``path`` (tests patch this to simulate I/O failures)."""
    with os.fdopen(os.open(path, _OPEN_FLAGS), "rb") as handle:
        return handle.read(limit)


def _is_text(name: str) -> bool:
    """Whether ``name`` (decoded with ``os.fsdecode``) is valid UTF-8: undecodable bytes
    come back as lone surrogates, which SQLite, tantivy and JSON refuse."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@cache
def _scope_regexes(
    exclude: tuple[str, ...], include: tuple[str, ...]
) -> tuple[list[re.Pattern[str]], list[re.Pattern[str]]]:
    """The exclude and include globs compiled once."""
    return [glob_to_regex(p) for p in exclude], [glob_to_regex(p) for p in include]


@cache
def _secret_names(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """The secret-name patterns compiled once (the diff lane asks on every call)."""
    return _names_regex(patterns, ignore_case=True)


def _names_regex(patterns: Iterable[str], *, ignore_case: bool) -> re.Pattern[str]:
    """One regex that fullmatches a single name against any of ``patterns`` (fnmatch)."""
    alternatives = [fnmatch.translate(p) for p in patterns]
    flags = re.IGNORECASE if ignore_case else 0
    return re.compile("|".join(alternatives) if alternatives else "(?!)", flags)


def _matching_parts(
    folder: str, names: re.Pattern[str], cache: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The components of ``folder`` that ``names`` matches, outermost first; ``cache``
    (seeded with ``{"": ()}``) keeps each folder's answer for the files beside it."""
    cached = cache.get(folder)
    if cached is None:
        parent, _, name = folder.rpartition("/")
        own = (name,) if names.fullmatch(name) else ()
        cached = cache[folder] = _matching_parts(parent, names, cache) + own
    return cached


def _names_folder(segment: str, folder: str) -> bool:
    """Whether an include segment names ``folder`` itself rather than any name at all."""
    return segment.strip("*?") != "" and fnmatch.fnmatchcase(folder, segment)


def _file_kind(mode: int) -> str:
    """Name the kind of a non-regular file for a Skipped detail."""
    kinds = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
             (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "special file")


class _Walker:
    """Compiled options plus per-folder caches for one walk over one resolved root."""

    def __init__(self, root: str, options: WalkOptions) -> None:
        self.root = root
        self.options = options
        self.include = [(p, glob_to_regex(p), p.strip("/").split("/")) for p in options.include]
        self.exclude = [(p, glob_to_regex(p)) for p in options.exclude]
        self.vendored = _names_regex(
            (*options.vendored_dirs, *options.output_dirs), ignore_case=False
        )
        self.output = _names_regex(options.output_dirs, ignore_case=False)
        self.lockfile = _names_regex(options.lockfiles, ignore_case=False)
        self.translation = _names_regex(options.translations, ignore_case=True)
        self.translation_dir = _names_regex(options.translation_dirs, ignore_case=False)
        self.secret = _secret_names(tuple(options.secret_patterns))
        self.binary = {e.lower().lstrip(".") for e in options.binary_extensions}
        self.pre: dict[str, Skipped] = {}  # verdicts reached while listing (pruned folders)
        self.folder_hint: dict[str, str] = {}  # path -> "git submodule" etc.
        self.tracked: set[str] = set()
        self._vendored_cache: dict[str, tuple[str, ...]] = {"": ()}
        self._escape_cache: dict[str, str] = {"": ""}
        self._catalog_cache: dict[str, tuple[str, ...]] = {"": ()}

    def emit(self, paths: Iterable[str]) -> Iterator[SourceFile | Skipped]:
        """Classify ``paths`` and the pruned folders, in path order, each once. A path whose
        names hold a credential is skipped under its redacted name: no store takes it."""
        listed = sorted(set(paths) | self.pre.keys())
        named = secret_paths(p for p in listed if _is_text(p))
        for rel in listed:
            pre = self.pre.get(rel)
            if rel in named:
                yield Skipped(redacted_path(rel), SkipReason.SECRET, "a credential in its name")
            else:
                yield pre if pre is not None else self.classify(rel)

    def prune(self, folder: str, reason: SkipReason, detail: str) -> None:
        """Record one verdict for a whole folder that the listing does not enter."""
        self.pre[folder + "/"] = Skipped(folder + "/", reason, detail)

    def excluded_by(self, rel: str) -> str | None:
        """The first exclude glob matching ``rel``, if any."""
        return next((p for p, rx in self.exclude if rx.fullmatch(rel)), None)

    def vendored_parts(self, folder: str) -> tuple[str, ...]:
        """The components of ``folder`` (a relative folder path) that are vendored."""
        return _matching_parts(folder, self.vendored, self._vendored_cache)

    def parent_escape(self, folder: str) -> str:
        """Where ``folder`` really lives when a symlink in it leads outside the root (or into
        its version control or cortex's state), else ''."""
        cached = self._escape_cache.get(folder)
        if cached is None:
            real = os.path.realpath(f"{self.root}{os.sep}{folder}")
            cached = self._escape_cache[folder] = "" if self.reachable(real) else real
        return cached

    def inside(self, real: str) -> bool:
        """Whether the resolved path ``real`` is the root or under it."""
        return real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)

    def reachable(self, real: str) -> bool:
        """Whether a symlink may lead to the resolved path ``real``: under the root, and not
        into a version-control or cortex state folder (a committed ``notes.txt ->
        .git/config`` served the git config, a CI job's token in it)."""
        if not self.inside(real):
            return False
        return not _PRIVATE_DIRS.intersection(Path(real[len(self.root) :]).parts)

    def is_translation(self, folder: str, name: str) -> bool:
        """Whether ``name`` in ``folder`` is a translation catalog (``_TRANSLATIONS``)."""
        return bool(self.translation.fullmatch(name)) or bool(
            _matching_parts(folder, self.translation_dir, self._catalog_cache)
        )

    def classify(self, rel: str) -> SourceFile | Skipped:
        """Check one listed path; the first reason that applies wins (see module docstring)."""
        if not _is_text(rel):  # bytes in its name that no UTF-8 reads: no store takes it
            shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return Skipped(shown, SkipReason.UNREADABLE, "its name is not valid UTF-8")
        folder, _, name = rel.rpartition("/")
        pattern = self.excluded_by(rel)
        if pattern is not None:
            return Skipped(rel, SkipReason.EXCLUDED, f"matches {pattern!r}")
        matched = [segs for _, rx, segs in self.include if rx.fullmatch(rel)]
        if self.include and not matched:
            return Skipped(rel, SkipReason.NOT_INCLUDED)
        vendored = self.vendored_parts(folder)
        if vendored and rel in self.tracked:
            vendored = tuple(v for v in vendored if not self.output.fullmatch(v))
        if vendored and not any(
            all(any(_names_folder(s, v) for s in segs) for v in vendored) for segs in matched
        ):
            return Skipped(rel, SkipReason.VENDORED, f"under {vendored[0]}/")
        if self.secret.fullmatch(name):
            return Skipped(rel, SkipReason.SECRET)
        if not matched and self.lockfile.fullmatch(name):
            return Skipped(rel, SkipReason.LOCKFILE)
        if not matched and self.is_translation(folder, name):
            return Skipped(rel, SkipReason.TRANSLATION)
        if not matched and name.lower().endswith(_MINIFIED_SUFFIXES):
            return Skipped(rel, SkipReason.MINIFIED, "by name")
        if not matched and _VERSIONED_LIBRARY.match(name):
            return Skipped(rel, SkipReason.VENDORED, "a versioned third-party library file")
        if "." in name and name.rpartition(".")[2].lower() in self.binary:
            return Skipped(rel, SkipReason.BINARY, "by extension")
        return self._check_file(rel, forced=bool(matched))

    def _check_file(self, rel: str, *, forced: bool) -> SourceFile | Skipped:
        """The checks that need the file system: symlinks, kind, size, then the content."""
        escaped = self.parent_escape(rel.rpartition("/")[0])
        if escaped:
            detail = f"folder {escaped} is outside the workspace"
            return Skipped(rel, SkipReason.SYMLINK_ESCAPE, detail)
        # Plain strings, not Path objects: this runs once per file and Path costs add up.
        link = target = f"{self.root}{os.sep}{rel}"
        try:
            st = os.lstat(link)
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(link)
                if not self.reachable(target):
                    where = "outside the workspace" if not self.inside(target) else (
                        "in version-control or cortex state data")  # fmt: skip
                    detail = f"target {target} is {where}"
                    return Skipped(rel, SkipReason.SYMLINK_ESCAPE, detail)
                if not self.options.follow_symlinks:
                    return Skipped(rel, SkipReason.NOT_REGULAR, "symlink (follow_symlinks is off)")
                if self.secret.fullmatch(target.rpartition(os.sep)[2]):
                    return Skipped(rel, SkipReason.SECRET, "symlink to a secret")
                st = os.lstat(target)  # realpath left no symlink in ``target`` to follow
                if stat.S_ISDIR(st.st_mode):
                    return Skipped(rel, SkipReason.NOT_REGULAR, "directory symlink")
        except (FileNotFoundError, NotADirectoryError):
            if target != link:
                return Skipped(rel, SkipReason.MISSING, "broken symlink")
            if rel in self.tracked:
                return Skipped(rel, SkipReason.MISSING, "tracked but deleted in the working tree")
            return Skipped(rel, SkipReason.MISSING, "vanished after listing")
        except OSError as exc:
            return Skipped(rel, SkipReason.UNREADABLE, exc.strerror or str(exc))
        if not stat.S_ISREG(st.st_mode):
            detail = self.folder_hint.get(rel) or _file_kind(st.st_mode)
            return Skipped(rel, SkipReason.NOT_REGULAR, detail)
        limit = self.options.max_file_bytes
        if st.st_size > limit:
            detail = f"{size_text(st.st_size)} > {size_text(limit)}"
            return Skipped(rel, SkipReason.TOO_LARGE, detail)
        try:
            data = _read_file(target, limit + 1)
        except (FileNotFoundError, NotADirectoryError):
            return Skipped(rel, SkipReason.MISSING, "vanished before it could be read")
        except OSError as exc:
            return Skipped(rel, SkipReason.UNREADABLE, exc.strerror or str(exc))
        if len(data) > limit:
            detail = f"grew past {size_text(limit)} while being read"
            return Skipped(rel, SkipReason.TOO_LARGE, detail)
        verdict = sniff(data, forced=forced)
        if verdict is not None:
            kind, detail = verdict
            return Skipped(rel, SkipReason(kind), detail)
        return SourceFile(rel, Path(link), data, len(data), st.st_mtime_ns)


def _tree_list(walker: _Walker) -> list[str]:
    """List the folder without git: never enter a symlinked folder; prune vendored and
    wholly excluded folders, recording one ``Skipped`` for each in ``walker.pre``."""
    files: list[str] = []
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(f"{walker.root}{os.sep}{folder}" if folder else walker.root)
        except OSError as exc:
            if not folder:
                raise
            walker.prune(folder, SkipReason.UNREADABLE, exc.strerror or str(exc))
            continue
        with entries:
            for entry in entries:
                rel = f"{folder}/{entry.name}" if folder else entry.name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False  # the per-file checks will say what it is
                if not is_dir:
                    files.append(rel)  # a folder symlink too: classify reports it
                    continue
                pattern = walker.excluded_by(rel + "/")
                if pattern is not None:
                    walker.prune(rel, SkipReason.EXCLUDED, f"matches {pattern!r}")
                elif walker.vendored.fullmatch(entry.name) and not any(
                    _names_folder(s, entry.name) for _, _, segs in walker.include for s in segs
                ):
                    walker.prune(rel, SkipReason.VENDORED, "folder not entered")
                else:
                    stack.append(rel)
    return files


def _git_list(walker: _Walker) -> list[str] | None:
    """The files ``git ls-files`` reports under the root, or None when git does not apply.

    Tracked files come from ``--stage`` (which also marks submodules, mode 160000), untracked
    ones from ``--others --exclude-standard``: two calls, because one call would mix both
    record shapes in a stream where a file name may contain a tab.
    """
    try:
        import git  # deferred: importing GitPython runs ``git version``
    except ImportError:  # GitPython is installed but found no git executable
        return None
    try:
        repo = git.Repo(walker.root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    repo.git.update_environment(**git_overrides())
    try:
        if repo.working_tree_dir is None:
            return None  # a bare repository has no files to index
        top = os.path.realpath(repo.working_tree_dir)
        prefix = os.path.relpath(walker.root, top).replace(os.sep, "/")
        if prefix.split("/")[0] in ("..", ".git"):
            return None  # the root is the .git folder or inside it
        if prefix != "." and _git_ignores(repo, prefix):
            return None  # git does not manage an ignored folder (a virtualenv, pyenv's versions)
        spec = ["--"] if prefix == "." else ["--", f":(literal){prefix}"]
        staged = repo.git.ls_files("-z", "--stage", *spec, stdout_as_string=False)
        others = repo.git.ls_files(
            "-z", "--others", "--exclude-standard", *spec, stdout_as_string=False
        )
    except git.GitCommandNotFound:
        return None
    except git.GitCommandError as exc:
        stderr = exc.stderr if isinstance(exc.stderr, str) else os.fsdecode(exc.stderr)
        raise RuntimeError(
            f"git ls-files failed in {walker.root}: {stderr.strip() or exc}; "
            "to walk the folder without git, pass WalkOptions(use_git=False)"
        ) from exc
    finally:
        repo.close()
    cut = 0 if prefix == "." else len(prefix) + 1  # paths come relative to the top
    files: list[str] = []
    for record in bytes(staged).split(b"\0"):
        info, _, raw = record.partition(b"\t")
        if raw:
            rel = os.fsdecode(raw)[cut:]
            files.append(rel)
            walker.tracked.add(rel)
            if info.startswith(b"160000 "):
                walker.folder_hint[rel] = "git submodule"
    for raw in bytes(others).split(b"\0"):
        if raw.endswith(b"/"):  # an untracked folder that is a repository of its own
            raw = raw.rstrip(b"/")
            walker.folder_hint[os.fsdecode(raw)[cut:]] = "nested git repository"
        if raw:
            files.append(os.fsdecode(raw)[cut:])
    return files


def _git_ignores(repo: git.Repo, folder: str) -> bool:
    """Whether ``folder`` (relative to the work tree's top) is ignored by git."""
    import git

    try:
        repo.git.check_ignore("-q", "--", folder)
    except git.GitCommandError as exc:
        if exc.status == 1:  # check-ignore's "not ignored"
            return False
        raise
    return True
