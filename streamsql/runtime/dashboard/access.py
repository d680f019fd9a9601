"""Who may use the dashboard: the rules of streamsql's other servers (runtime.server_auth).

It binds 127.0.0.1 unless ``--bind`` says otherwise, and beyond loopback it refuses to start
without a token (``--token-file FILE`` or ``$STREAMSQL_CONNECT_TOKEN``, as ``serve``):
anyone reaching the port could read every job's log and stop any job. With a token each
request needs it, as ``Authorization: Bearer <token>`` (Prometheus' ``authorization``
setting, curl) or as the session cookie the login page sets (HttpOnly, SameSite=Strict; it
holds an HMAC of the token, not the token). Refusals are logged with the client's address.

A browser visiting another site can also reach a dashboard on loopback, so: on loopback a
request must name a loopback host (``Host``: a DNS name rebound to 127.0.0.1 is refused),
and a STOP is a JSON POST whose ``Origin``, when the browser sends one, is this server's
(another site's page can neither send it without a CORS preflight, which is never
granted, nor read any answer).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from streamsql.runtime.server_auth import check_exposure, is_loopback

COOKIE = "streamsql_ui"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Access:
    bind: str = "127.0.0.1"
    token: str | None = None

    def check(self) -> None:
        """Refuse to start beyond loopback without a token (before listening)."""
        check_exposure(self.bind, self.token, server="the streamsql dashboard",
                       exposes="read every job's log and stop any job")

    @property
    def session(self) -> str | None:
        """The login cookie's value: derived from the token, so the cookie does not disclose it."""
        if self.token is None:
            return None
        return hmac.new(self.token.encode(), b"streamsql-ui-session", hashlib.sha256).hexdigest()

    def refusal(self, headers) -> str | None:
        """Why a request may not be served ('no token', 'wrong token'), or None."""
        if self.token is None:
            return None
        scheme, _, value = (headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode()):
            return None
        cookie = _cookie(headers.get("Cookie"))
        if cookie is not None and hmac.compare_digest(cookie.encode(), self.session.encode()):
            return None
        return "wrong token" if value or cookie is not None else "no token"

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.strip().encode(), self.token.encode())

    def host_allowed(self, host: str | None) -> bool:
        """On loopback, only a loopback name in ``Host`` (else DNS rebinding would expose it)."""
        if not is_loopback(self.bind):
            return True
        if not host:
            return False
        name = urlsplit(f"//{host}").hostname or ""
        return name in LOOPBACK_NAMES or name == self.bind or is_loopback(name)

    def same_origin(self, headers) -> bool:
        """A state-changing request came from this server's own page (or from no browser)."""
        origin = headers.get("Origin")
        if origin is None:  # curl, a script: no browser to forge it
            return True
        return urlsplit(origin).netloc == (headers.get("Host") or "")

    def cookie_header(self) -> str:
        return f"{COOKIE}={self.session}; HttpOnly; SameSite=Strict; Path=/"


def _cookie(header: str | None) -> str | None:
    if not header:
        return None
    jar = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # noqa: BLE001 (a malformed cookie header is no cookie)
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None
