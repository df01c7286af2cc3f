"""Where the store's master key comes from.

In order: ``TURNBACK_KEY`` (when set, the only key used), the store's key
file (``<home>/key``, a regular file of mode 0600 made with
``O_EXCL|O_NOFOLLOW``), the OS keyring when the store was created with one.
A new store takes the keyring when one works, else a new key file. A key
file with wrong permissions, a missing key or a wrong key is refused; there
is never a plaintext fallback.
"""

from __future__ import annotations

import base64
import contextlib
import os
import stat
from typing import Literal

from turnback.catalog import Message
from turnback.errors import KeyUnavailableError
from turnback.store.crypto import KEY_LEN, derive_master_from_secret

KeySource = Literal["env", "file", "keyring"]
KEY_FILE = "key"
KEYRING_SERVICE = "turnback"


def key_source(stored: bytes) -> KeySource:
    """The key source a store's meta names; an unknown one is refused rather than guessed."""
    text = stored.decode("ascii", "replace")
    if text == "env":
        return "env"
    if text == "file":
        return "file"
    if text == "keyring":
        return "keyring"
    raise KeyUnavailableError(Message("key_source_unknown", source=repr(text)))


def key_file_path(home: str) -> str:
    return os.path.join(home, KEY_FILE)


def read_key_file(home: str) -> bytes | None:
    """The key in the store's key file; ``None`` when there is none. Unsafe files are refused."""
    path = key_file_path(home)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyUnavailableError(Message("key_file_unopenable", path=path, reason=str(exc.strerror))) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyUnavailableError(Message("key_file_not_regular", path=path))
        if st.st_uid != os.getuid():
            raise KeyUnavailableError(Message("key_file_other_owner", path=path))
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise KeyUnavailableError(Message("key_file_mode", path=path, mode=f"{stat.S_IMODE(st.st_mode):o}"))
        data = os.read(fd, 4 * KEY_LEN)
    finally:
        os.close(fd)
    try:
        key = base64.b64decode(data.strip(), validate=True)
    except ValueError:
        key = b""
    if len(key) != KEY_LEN:
        raise KeyUnavailableError(Message("key_file_not_key", path=path))
    return key


def create_key_file(home: str) -> bytes:
    """Make a new random key in ``<home>/key``: 0600, ``O_EXCL|O_NOFOLLOW``, fsynced."""
    return write_key_file(home, os.urandom(KEY_LEN))


def write_key_file(home: str, key: bytes) -> bytes:
    """Keep *key* in ``<home>/key`` (a new file: 0600, ``O_EXCL|O_NOFOLLOW``, fsynced)."""
    path = key_file_path(home)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise KeyUnavailableError(Message("key_file_uncreatable", path=path, reason=str(exc.strerror))) from exc
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, base64.b64encode(key) + b"\n")
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    dir_fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return key


def _working_keyring() -> object | None:
    """The OS keyring backend if one is usable here, else ``None`` (headless machines have none)."""
    try:
        import keyring
        from keyring.backends import fail, null
    except Exception:  # keyring missing or broken at import: fall back to the key file
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:
        return None
    if isinstance(backend, fail.Keyring | null.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    return backend


def keyring_get(store_id: str) -> bytes | None:
    backend = _working_keyring()
    if backend is None:
        return None
    try:
        value = backend.get_password(KEYRING_SERVICE, store_id)  # type: ignore[attr-defined]
    except Exception:
        return None
    if not value:
        return None
    key = base64.b64decode(value)
    return key if len(key) == KEY_LEN else None


def keyring_create(store_id: str) -> bytes | None:
    """Store a new key in the OS keyring and read it back; ``None`` when no keyring works."""
    backend = _working_keyring()
    if backend is None:
        return None
    key = os.urandom(KEY_LEN)
    try:
        backend.set_password(KEYRING_SERVICE, store_id, base64.b64encode(key).decode())  # type: ignore[attr-defined]
    except Exception:
        return None
    return key if keyring_get(store_id) == key else None


def master_for_existing_store(
    home: str, source: KeySource, salt: bytes, store_id: str, env_secret: str | None
) -> bytes:
    if env_secret is not None:
        return derive_master_from_secret(env_secret, salt)
    if source == "env":
        raise KeyUnavailableError(Message("key_env_unset"))
    if source == "keyring":
        key = keyring_get(store_id)
        if key is None:
            raise KeyUnavailableError(Message("key_keyring_unreachable"))
        return key
    key = read_key_file(home)
    if key is None:
        raise KeyUnavailableError(Message("key_file_missing", path=key_file_path(home)))
    return key


def master_for_new_store(
    home: str, salt: bytes, store_id: str, env_secret: str | None, *, try_keyring: bool
) -> tuple[bytes, KeySource]:
    if env_secret is not None:
        return derive_master_from_secret(env_secret, salt), "env"
    existing = read_key_file(home)
    if existing is not None:
        return existing, "file"
    if try_keyring:
        key = keyring_create(store_id)
        if key is not None:
            return key, "keyring"
    return create_key_file(home), "file"


__all__ = ["KeySource", "master_for_existing_store", "master_for_new_store", "read_key_file", "write_key_file"]
