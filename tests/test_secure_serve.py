"""`streamsql serve` closed by default (runtime.server_auth): loopback unless --bind says
otherwise, and then only with a Spark Connect token, HiveServer2 users and TLS; wrong
credentials refused (and logged), right ones let in, by real clients (PySpark's Connect
client, PySpark's bundled beeline over TLS)."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from streamsql.errors import StreamsqlError
from streamsql.runtime import server_auth
from tests.conftest import ROOT, write
from tests.ports import free_ports
from tests.spark_cluster import spark_home

TOKEN = "a-token-of-thirty-two-characters"
PASSWORD = "s3cret-pass"


# -- without a server ---------------------------------------------------------------------------


def test_loopback_needs_nothing_and_anything_else_needs_each_credential(tmp_path):
    server_auth.check_exposure("127.0.0.1", None, True, None, None)
    server_auth.check_exposure("localhost", None, True, None, None)
    server_auth.check_exposure("::1", None, False, None, None)
    with pytest.raises(StreamsqlError, match="Spark Connect on 0.0.0.0 without authentication.*--token-file"):
        server_auth.check_exposure("0.0.0.0", None, False, None, None)
    server_auth.check_exposure("0.0.0.0", TOKEN, False, None, None)
    users = tmp_path / "users"
    with pytest.raises(StreamsqlError, match="JDBC/ODBC on 10.1.2.3 without users: add one with `streamsql user add"):
        server_auth.check_exposure("10.1.2.3", TOKEN, True, users, "ks.p12")
    server_auth.add_user(users, "alice", PASSWORD)
    with pytest.raises(StreamsqlError, match="without TLS.*--thrift-keystore"):
        server_auth.check_exposure("10.1.2.3", TOKEN, True, users, None)
    server_auth.check_exposure("10.1.2.3", TOKEN, True, users, "ks.p12")


def test_the_users_file_holds_salted_hashes_only_its_owner_reads(tmp_path):
    users = tmp_path / "users"
    assert server_auth.add_user(users, "alice", PASSWORD) is True
    assert server_auth.add_user(users, "bob", "another-one") is True
    first = server_auth.read_users(users)["alice"]
    assert PASSWORD not in users.read_text() and first.startswith("pbkdf2_sha256$600000$")
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    assert server_auth.verify_password(first, PASSWORD) and not server_auth.verify_password(first, "s3cret-pasS")
    assert server_auth.add_user(users, "alice", PASSWORD) is False  # a new salt: another hash, same password
    assert server_auth.read_users(users)["alice"] != first
    assert set(server_auth.read_users(users)) == {"alice", "bob"}
    with pytest.raises(StreamsqlError, match="too short"):
        server_auth.add_user(users, "carol", "short")
    with pytest.raises(StreamsqlError, match="cannot be a user name"):
        server_auth.add_user(users, "a:b", PASSWORD)


def test_a_short_token_is_refused(tmp_path):
    write(tmp_path / "token", "tiny\n")
    with pytest.raises(StreamsqlError, match="too short"):
        server_auth.read_token(str(tmp_path / "token"))
    write(tmp_path / "token", TOKEN + "\n")
    assert server_auth.read_token(str(tmp_path / "token")) == TOKEN


def streamsql(tmp_path, *args, env=None, **popen):
    environment = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"), **(env or {}))
    environment.pop(server_auth.TOKEN_ENV, None)
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *args], cwd=tmp_path, env=environment,
                            start_new_session=True, text=True, **popen)


@pytest.mark.spark  # starts a process (no JVM: refused before Spark starts)
def test_exposed_without_credentials_refuses_to_start_and_says_how(tmp_path):
    started = time.monotonic()
    refused = streamsql(tmp_path, "serve", "--bind", "0.0.0.0", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 1 and "Refusing to serve Spark Connect on 0.0.0.0" in err and "Traceback" not in err
    assert time.monotonic() - started < 20  # no JVM was started for it
    added = streamsql(tmp_path, "user", "add", "alice", "--users", str(tmp_path / "users"), stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = added.communicate(PASSWORD + "\n", timeout=60)
    assert added.returncode == 0 and "Added user 'alice'" in out, err
    assert server_auth.verify_password(server_auth.read_users(tmp_path / "users")["alice"], PASSWORD)


# -- a served catalog, on loopback, with every credential ------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secure")
    write(tmp / "orders" / "a.csv", "1,apple\n2,pear\n3,fig\n")
    ddl = (f"CREATE TABLE orders (id BIGINT, item STRING) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp / 'orders'}', 'format' = 'csv')")
    assert streamsql(tmp, "run", "-e", ddl).wait(120) == 0
    server_auth.add_user(tmp / "users", "alice", PASSWORD)
    write(tmp / "token", TOKEN + "\n")
    keystore = tmp / "server.p12"
    subprocess.run(["keytool", "-genkeypair", "-alias", "streamsql", "-keyalg", "RSA", "-keysize", "2048",
                    "-validity", "2", "-dname", "CN=localhost", "-ext", "SAN=dns:localhost,ip:127.0.0.1",
                    "-keystore", str(keystore), "-storetype", "PKCS12", "-storepass", "keystore-pass",
                    "-keypass", "keystore-pass"], check=True, capture_output=True)
    port, thrift = free_ports(2)
    server = streamsql(tmp, "serve", "--port", str(port), "--thrift", str(thrift), "--master", "local[1]",
                       "--token-file", str(tmp / "token"), "--users", str(tmp / "users"),
                       "--thrift-keystore", str(keystore), env={server_auth.KEYSTORE_PASSWORD_ENV: "keystore-pass"},
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(server.stderr), daemon=True).start()
    try:
        lines = [server.stdout.readline() for _ in range(3)]
        assert lines[2].startswith("Connect with"), "".join(lines) + "".join(errors)
        threading.Thread(target=lambda: server.stdout.read(), daemon=True).start()
        yield tmp, port, thrift, errors
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, "".join(errors[-40:])
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.mark.spark
def test_both_servers_listen_on_loopback_only(secured):
    _, port, thrift, _ = secured
    listening = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, check=True).stdout
    for each in (port, thrift):
        addresses = {line.split()[3].rsplit(":", 1)[0] for line in listening.splitlines()
                     if line.split()[3].endswith(f":{each}")}
        assert addresses and addresses <= {"127.0.0.1", "[::ffff:127.0.0.1]"}, (each, listening)


def connect_count(port: int, token: str | None) -> str:
    """COUNT(*) of the served table through PySpark's Connect client, in a process of its own."""
    url = f"sc://localhost:{port}" + (f"/;token={token}" if token else "")
    code = ("import sys\nfrom pyspark.sql import SparkSession\n"
            f"s = SparkSession.builder.remote({url!r}).getOrCreate()\n"
            "print(s.sql('SELECT COUNT(*) AS n FROM default_database.orders').collect()[0].n)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() if done.returncode == 0 else done.stderr


@pytest.mark.spark
def test_spark_connect_takes_its_token_only(secured):
    _, port, _, _ = secured
    assert "UNAUTHENTICATED" in connect_count(port, None)
    assert "UNAUTHENTICATED" in connect_count(port, "not-the-token-at-all-0123456789")
    assert connect_count(port, TOKEN) == "3"


def beeline(tmp, thrift: int, password: str) -> subprocess.CompletedProcess:
    url = (f"jdbc:hive2://localhost:{thrift}/default_database;ssl=true;sslTrustStore={tmp / 'server.p12'};"
           "trustStorePassword=keystore-pass")
    return subprocess.run([str(spark_home() / "bin" / "beeline"), "-u", url, "-n", "alice", "-p", password,
                           "--outputformat=csv2", "--silent=true", "-e", "SELECT COUNT(*) AS n FROM orders"],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, SPARK_HOME=str(spark_home())))


@pytest.mark.spark
def test_beeline_over_tls_with_a_password_and_wrong_ones_refused_logged_and_slowed(secured):
    tmp, _, thrift, errors = secured
    right = beeline(tmp, thrift, PASSWORD)
    assert right.returncode == 0, right.stderr[-2000:]
    assert [re.sub(r"^\d+: jdbc:hive2://\S+> ", "", line) for line in right.stdout.splitlines() if line] == ["n", "3"]
    for _ in range(5):
        wrong = beeline(tmp, thrift, "not-the-password")
        assert "Error validating the login" in wrong.stdout + wrong.stderr, wrong.stderr[-2000:]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and sum("refused HiveServer2 login of user 'alice'" in e for e in errors) < 5:
        time.sleep(0.5)
    refused = [e.strip() for e in errors if "refused HiveServer2 login" in e]
    # the server's own account (beeline's JVM start varies more than a second under load):
    # the fourth in a row waited a second before it was refused, the fifth two
    assert [r.split("(wrong password), ")[1] for r in refused] == [
        "1 in a row", "2 in a row", "3 in a row", "4 in a row, after waiting 1 s", "5 in a row, after waiting 2 s"], errors
    assert beeline(tmp, thrift, PASSWORD).returncode == 0  # the right password resets the count
