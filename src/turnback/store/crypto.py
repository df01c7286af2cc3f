"""Keys, keyed hashes and authenticated encryption for everything the store keeps.

One 32-byte master key yields three sub-keys (HKDF-SHA256): one encrypts
(AES-256-GCM), one names content (keyed BLAKE2b, so a blob id never reveals
which well-known file the store holds), one names paths (so a path can be
looked up without being stored in plain text).

Sealed data is ``version byte || 12-byte random nonce || ciphertext+tag``;
the associated data binds it to where it belongs (a blob's id, a row's
column), so a sealed value moved elsewhere does not open.
"""

from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from turnback.catalog import Message
from turnback.errors import BlobCorruptError, KeyUnavailableError
from turnback.model import BlobId

SEAL_VERSION = 1
NONCE_LEN = 12
KEY_LEN = 32
ID_LEN = 32
PATH_ID_LEN = 16
MIN_SECRET_LEN = 16
_KEY_CHECK = b"turnback key check v1"


def derive_master_from_secret(secret: str, salt: bytes) -> bytes:
    """The master key for a ``TURNBACK_KEY`` secret (at least 16 characters) and this store's salt."""
    if len(secret) < MIN_SECRET_LEN:
        raise KeyUnavailableError(Message("key_secret_too_short", length=len(secret), minimum=MIN_SECRET_LEN))
    return HKDF(algorithm=hashes.SHA256(), length=KEY_LEN, salt=salt, info=b"turnback master v1").derive(
        secret.encode("utf-8")
    )


class Keys(NamedTuple):
    encrypt: bytes
    content: bytes
    path: bytes

    @classmethod
    def from_master(cls, master: bytes) -> Keys:
        if len(master) != KEY_LEN:
            raise KeyUnavailableError(Message("key_wrong_length", expected=KEY_LEN, length=len(master)))
        material = HKDF(algorithm=hashes.SHA256(), length=3 * KEY_LEN, salt=None, info=b"turnback keys v1").derive(
            master
        )
        return cls(material[:KEY_LEN], material[KEY_LEN : 2 * KEY_LEN], material[2 * KEY_LEN :])


class Crypto:
    """Seals and opens values, and computes keyed content and path ids."""

    def __init__(self, keys: Keys):
        self._keys = keys
        self._aead = AESGCM(keys.encrypt)

    # -- ids -------------------------------------------------------------------------------

    def content_hasher(self) -> hashlib.blake2b:
        """A keyed hash to feed content into; its 32-byte digest is the content's blob id."""
        return hashlib.blake2b(key=self._keys.content, digest_size=ID_LEN, person=b"tb-content")

    def content_id(self, data: bytes) -> BlobId:
        hasher = self.content_hasher()
        hasher.update(data)
        return BlobId(hasher.digest())

    def path_id(self, scope: str, path: str) -> bytes:
        """A keyed id of *path* within *scope* (a project id, or ``root`` for project roots)."""
        hasher = hashlib.blake2b(key=self._keys.path, digest_size=PATH_ID_LEN, person=b"tb-path")
        hasher.update(scope.encode("ascii"))
        hasher.update(b"\0")
        hasher.update(os.fsencode(path))
        return hasher.digest()

    # -- sealing ---------------------------------------------------------------------------

    def seal(self, plaintext: bytes, context: bytes) -> bytes:
        nonce = os.urandom(NONCE_LEN)
        return bytes([SEAL_VERSION]) + nonce + self._aead.encrypt(nonce, plaintext, bytes([SEAL_VERSION]) + context)

    def open(self, sealed: bytes, context: bytes) -> bytes:
        if len(sealed) < 1 + NONCE_LEN + 16 or sealed[0] != SEAL_VERSION:
            raise BlobCorruptError(Message("sealed_format_unknown"))
        nonce = sealed[1 : 1 + NONCE_LEN]
        try:
            return self._aead.decrypt(nonce, sealed[1 + NONCE_LEN :], bytes([SEAL_VERSION]) + context)
        except InvalidTag as exc:
            raise BlobCorruptError(Message("sealed_not_decrypting")) from exc

    def seal_text(self, text: str | None, context: str) -> bytes | None:
        if text is None:
            return None
        return self.seal(text.encode("utf-8", "surrogateescape"), context.encode("utf-8", "surrogateescape"))

    # -- the key check ---------------------------------------------------------------------

    def make_key_check(self) -> bytes:
        return self.seal(_KEY_CHECK, b"key-check")

    def verify_key_check(self, sealed: bytes) -> None:
        try:
            ok = self.open(sealed, b"key-check") == _KEY_CHECK
        except BlobCorruptError:
            ok = False
        if not ok:
            raise KeyUnavailableError(Message("key_does_not_open"))


__all__ = ["MIN_SECRET_LEN", "Crypto", "Keys", "derive_master_from_secret"]
