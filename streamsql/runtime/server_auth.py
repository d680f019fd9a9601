"""Who may use streamsql's servers: loopback by default, and credentials once exposed.

``streamsql serve`` runs any Spark SQL its clients send, as the user who started it:
reading any file that user can read, adding jars, running Python. So each server binds
to 127.0.0.1 unless ``--bind`` says otherwise, and streamsql refuses to listen on any
other address without authentication, saying how to set it:

- **Spark Connect**: Spark's pre-shared bearer token (``spark.connect.authenticate.token``),
  read from ``--token-file`` or ``$STREAMSQL_CONNECT_TOKEN`` and handed to the server in its
  environment (never on a command line, where ``ps`` shows it, nor in a log). Spark
  Connect has no TLS of its own: exposed, it belongs behind a TLS proxy (the docs show one).
- **HiveServer2** (``--thrift``): user names and passwords, checked by HiveServer2's CUSTOM
  authentication (``hive_auth/PasswordFile.java``) against a users file of salted
  PBKDF2-HMAC-SHA256 hashes (600,000 iterations) that ``streamsql user add NAME`` writes;
  exposed, it also needs TLS (``--thrift-keystore``, its password in
  ``$STREAMSQL_KEYSTORE_PASSWORD``). Its settings go into a private ``hive-site.xml``.
  Refusals are logged in the server's log; three in a row for a user name slow further
  attempts at it down (HiveServer2 checks a password before it knows the client's address).

PBKDF2 rather than scrypt or argon2: the server's check runs in the JVM, whose standard
library has PBKDF2 and neither of the others; at 600,000 iterations it is the strength
OWASP asks of it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from xml.sax.saxutils import escape

from streamsql.errors import StreamsqlError

TOKEN_ENV, KEYSTORE_PASSWORD_ENV, USERS_ENV = "STREAMSQL_CONNECT_TOKEN", "STREAMSQL_KEYSTORE_PASSWORD", \
    "STREAMSQL_USERS_FILE"
SERVER_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # what Spark's Connect server reads
ITERATIONS = 600_000
AUTHENTICATOR = "streamsql.hive.PasswordFile"
SOURCES = Path(__file__).with_name("hive_auth")


def default_users_file() -> Path:
    return Path(os.environ.get(USERS_ENV) or Path.home() / ".streamsql" / "users")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(token_file: str | None) -> str | None:
    """The Connect token: the file's first line, else $STREAMSQL_CONNECT_TOKEN, else None."""
    if token_file:
        try:
            lines = Path(token_file).read_text().strip().splitlines()
            token = lines[0].strip() if lines else ""
        except OSError as error:
            raise StreamsqlError(f"The token file '{token_file}' cannot be read: {error.strerror}") from None
        if len(token) < 16:
            raise StreamsqlError(f"The token in '{token_file}' is too short: use at least 16 characters"
                                 " (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
        return token
    return os.environ.get(TOKEN_ENV) or None


def check_exposure(bind: str, token: str | None, thrift: bool = False, users: Path | None = None,
                   keystore: str | None = None, server: str = "Spark Connect",
                   exposes: str = "run any SQL as this user") -> None:
    """Refuse to listen beyond loopback without authentication (see the module). ``server``:
    what listens with the token alone (Spark Connect, or the SQL Gateway: runtime.gateway);
    ``exposes``: what anyone reaching it could do (the refusal says it)."""
    if is_loopback(bind):
        return
    if token is None:
        raise StreamsqlError(
            f"Refusing to serve {server} on {bind} without authentication: anyone who reaches the port"
            f" could {exposes}. Give the clients' token with --token-file FILE (or"
            f" ${TOKEN_ENV}), and put a TLS proxy in front ({server} has no TLS of its own); or serve on"
            " loopback (the default, --bind 127.0.0.1).")
    if thrift and (users is None or not has_users(users)):
        raise StreamsqlError(
            f"Refusing to serve JDBC/ODBC on {bind} without users: add one with `streamsql user add NAME`"
            f" (it writes {users or default_users_file()}; --users FILE for another), or serve on loopback.")
    if thrift and not keystore:
        raise StreamsqlError(
            f"Refusing to serve JDBC/ODBC on {bind} without TLS: passwords would cross the network in the"
            f" clear. Give a Java keystore with --thrift-keystore FILE and its password in ${KEYSTORE_PASSWORD_ENV}"
            " (e.g. keytool -genkeypair -keyalg RSA -keystore server.p12 -storetype PKCS12).")


# -- the users file ---------------------------------------------------------------------------


def hash_password(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"pbkdf2_sha256${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def verify_password(stored: str, password: str) -> bool:
    try:
        kind, iterations, salt, digest = stored.split("$")
        expected = base64.b64decode(digest)
        actual = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), int(iterations))
    except (ValueError, TypeError):
        return False
    return kind == "pbkdf2_sha256" and hmac.compare_digest(expected, actual)


def read_users(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip()
            for line in lines if ":" in line and not line.startswith("#")}


def has_users(path: Path) -> bool:
    return bool(read_users(path))


def add_user(path: Path, name: str, password: str) -> bool:
    """Add the user, or set a new password; True when the user is new. The file is written
    whole (renamed into place), readable by its owner only."""
    if not name or any(c in name for c in ":\n\r") or name != name.strip():
        raise StreamsqlError(f"'{name}' cannot be a user name: no ':', line breaks or surrounding spaces")
    if len(password) < 8:
        raise StreamsqlError("The password is too short: use at least 8 characters")
    users = read_users(path)
    new = name not in users
    users[name] = hash_password(password)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("# streamsql users: name:pbkdf2_sha256$iterations$salt$hash (streamsql user add NAME)\n")
        handle.writelines(f"{user}:{stored}\n" for user, stored in sorted(users.items()))
    os.replace(staged, path)
    return new


# -- HiveServer2's settings ---------------------------------------------------------------


def authenticator_jar() -> Path | None:
    """The jar of hive_auth/*.java (runtime.java_build), or None without a javac."""
    from streamsql.runtime import java_build

    needed = [java_build.spark_jar("spark-hive-thriftserver_*.jar")]
    if any(j is None for j in needed):
        return None
    return java_build.built_jar("streamsql-hive-auth", sorted(SOURCES.glob("*.java")), needed)


def hive_site(directory: Path, bind: str, port: int, users: Path | None, keystore: str | None) -> dict[str, str]:
    """Write ``directory``/hive-site.xml (owner-only: it may hold the keystore's password) for
    the Thrift server; returns the environment the server needs besides."""
    settings = {"hive.server2.thrift.bind.host": bind, "hive.server2.thrift.port": str(port),
                "hive.server2.transport.mode": "binary"}
    env = {}
    if users is not None:
        settings.update({"hive.server2.authentication": "CUSTOM",
                         "hive.server2.custom.authentication.class": AUTHENTICATOR})
        env[USERS_ENV] = str(users.resolve())
    if keystore:
        password = os.environ.get(KEYSTORE_PASSWORD_ENV)
        if not password:
            raise StreamsqlError(f"--thrift-keystore needs the keystore's password in ${KEYSTORE_PASSWORD_ENV}")
        if not Path(keystore).is_file():
            raise StreamsqlError(f"The keystore '{keystore}' does not exist")
        settings.update({"hive.server2.use.SSL": "true", "hive.server2.keystore.path": str(Path(keystore).resolve()),
                         "hive.server2.keystore.password": password})
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in settings.items())
    path = directory / "hive-site.xml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"<?xml version=\"1.0\"?>\n<configuration>\n{body}</configuration>\n")
    return env
