"""API tokens: who may call the service, and the secret each one's callbacks are signed with.

`grade token new NAME --tokens FILE` makes a token and prints it once, with its signing secret:

    token   gt_3f9c2a1b.Vb7...   the bearer token; the file keeps only a salted SHA-256 of it
    secret  whs_Qm1...           the key of the HMAC-SHA256 that signs this token's callbacks

The service reads the file again when it changes (its inode, size or modification time), so a
token made or revoked (`grade token revoke ID`) counts from the next request, without a restart.
A file that has become unreadable or malformed keeps the tokens last read, and says so in the log;
a file removed leaves no token (every request 401).

The token itself cannot be recovered from the file. The signing secret must be kept, since the
service signs with it (as a webhook sender does): the file is written readable by its owner only.
A token is looked up by its public id (the part before the dot) and checked with a constant-time
comparison, so neither a wrong token nor a wrong id tells anything by its timing.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from grader.errors import GraderError

SCHEMA = 1
PREFIX = "gt_"

log = logging.getLogger("grader.service")


class TokenFileError(GraderError):
    """The tokens file cannot be read or written, or is not a tokens file."""


@dataclass(frozen=True)
class Token:
    """One stored token: its public id and name, the salted hash of the bearer secret, and the key
    its callbacks are signed with."""
    id: str
    name: str
    salt: str
    digest: str
    signing_secret: str
    created: str = ""

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(_digest(self.salt, presented), self.digest)


def _digest(salt: str, token: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + token.encode("utf-8", "surrogatepass")).hexdigest()


class Tokens:
    """The tokens of one file, read again whenever the file changes (see above)."""

    def __init__(self, by_id: dict[str, Token], path: Path | None = None):
        self._by_id, self.path = by_id, path
        self._seen = _identity(path) if path is not None else None
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path) -> Tokens:
        """The tokens in `path`; TokenFileError when it cannot be read as a tokens file."""
        return cls({t.id: t for t in _read(path)}, path)

    def _current(self) -> dict[str, Token]:
        if self.path is None:
            return self._by_id
        seen = _identity(self.path)
        if seen == self._seen:
            return self._by_id
        with self._lock:
            if seen != self._seen:
                self._seen = seen
                if seen is None:
                    log.warning("the tokens file %s is gone: every API request is refused until it is back",
                                self.path)
                    self._by_id = {}
                else:
                    try:
                        self._by_id = {t.id: t for t in _read(self.path)}
                        log.info("tokens file %s read again: %d token(s)", self.path, len(self._by_id))
                    except TokenFileError as err:
                        log.error("%s; the %d token(s) read before stay in use", err, len(self._by_id))
            return self._by_id

    def __len__(self) -> int:
        return len(self._current())

    def get(self, token_id: str) -> Token | None:
        return self._current().get(token_id)

    def check(self, presented: str) -> Token | None:
        """The token `presented` is, or None for a wrong or unknown one."""
        token_id, dot, _ = presented.partition(".")
        stored = self._current().get(token_id) if dot else None
        if stored is None:
            _digest("00" * 16, presented)  # the same work as a known id: timing does not tell ids apart
            return None
        return stored if stored.matches(presented) else None


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """What changes when the file is rewritten (tokens.new replaces it), or None when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def revoke(path: Path, token_id: str) -> Token:
    """Remove the token `token_id` from the file; the removed record. TokenFileError if it has none."""
    tokens = _read(path)
    kept = [t for t in tokens if t.id != token_id]
    if len(kept) == len(tokens):
        known = ", ".join(t.id for t in tokens) or "none"
        raise TokenFileError(f"{path} has no token {token_id!r} (its tokens: {known})")
    _write(path, kept)
    return next(t for t in tokens if t.id == token_id)


def empty(path: Path) -> None:
    """Make `path` a tokens file holding no token, for a service started before its first platform
    (tokens added later with `new` are taken by the running service)."""
    _write(path, [])


def listed(path: Path) -> list[Token]:
    return _read(path)


def new(path: Path, name: str) -> tuple[str, Token]:
    """Add a token named `name` to the file at `path` (made if missing); return the bearer token,
    which exists nowhere else from now on, and the stored record."""
    tokens = _read(path) if path.exists() else []
    token_id = PREFIX + secrets.token_hex(4)
    while any(t.id == token_id for t in tokens):
        token_id = PREFIX + secrets.token_hex(4)
    bearer = f"{token_id}.{secrets.token_urlsafe(32)}"
    salt = secrets.token_hex(16)
    record = Token(id=token_id, name=name, salt=salt, digest=_digest(salt, bearer),
                   signing_secret="whs_" + secrets.token_urlsafe(32),
                   created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    _write(path, [*tokens, record])
    return bearer, record


def _read(path: Path) -> list[Token]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise TokenFileError(f"cannot read the tokens file {path}: {err.strerror or err}") from err
    except ValueError as err:
        raise TokenFileError(f"{path} is not a tokens file (not JSON: {err})") from err
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("tokens"), list):
        raise TokenFileError(f"{path} is not a tokens file of schema {SCHEMA}")
    try:
        return [Token(id=t["id"], name=t["name"], salt=t["salt"], digest=t["sha256"],
                      signing_secret=t["signing_secret"], created=t.get("created", "")) for t in data["tokens"]]
    except (KeyError, TypeError, AttributeError) as err:
        raise TokenFileError(f"{path} has a malformed token entry ({err})") from err


def _write(path: Path, tokens: list[Token]) -> None:
    """Atomically, readable by the owner only (the file holds the signing secrets)."""
    document = {"schema": SCHEMA, "tokens": [
        {"id": t.id, "name": t.name, "salt": t.salt, "sha256": t.digest, "signing_secret": t.signing_secret,
         "created": t.created} for t in tokens]}
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=2)
        os.replace(temporary, path)
    except OSError as err:
        temporary.unlink(missing_ok=True)
        raise TokenFileError(f"cannot write the tokens file {path}: {err.strerror or err}") from err
