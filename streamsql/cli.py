"""The `streamsql` command: run Flink SQL scripts on Spark.

Parsing and validation happen before Spark is imported, so a mistake in a script is
reported in a fraction of a second.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from pathlib import Path

from streamsql.errors import StreamsqlError, with_whole_chain

PROJECT_CATALOG = Path(__file__).resolve().parent.parent / "catalog"


def default_catalog_dir() -> Path:
    """$STREAMSQL_CATALOG, else the project's catalog/ (a source checkout), else ~/.streamsql/catalog."""
    if os.environ.get("STREAMSQL_CATALOG"):
        return Path(os.environ["STREAMSQL_CATALOG"])
    if PROJECT_CATALOG.is_dir():
        return PROJECT_CATALOG
    return Path.home() / ".streamsql" / "catalog"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamsql", description="Flink SQL on Apache Spark. Without a command: the interactive SQL shell."
    )
    parser.add_argument("--catalog", help="catalog directory (default: $STREAMSQL_CATALOG or the project's catalog/)")
    parser.add_argument("--master", help="Spark master URL (default: local[*])")
    parser.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002")
    parser.add_argument("--format", choices=["table", "csv", "json"], default="table", help="how SELECT results print")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a SET before the script")
    parser.add_argument("-v", "--verbose", action="store_true", help="show stack traces (and Spark's start-up log)")
    parser.add_argument("--version", action="version", version=version_text())
    parser.add_argument("-i", "--init", metavar="FILE", help="the shell: run this SQL file (DDL, SET) first")
    parser.add_argument("-f", "--file", dest="script", metavar="FILE",
                        help="run this SQL file as the shell would (tableau results, [INFO] lines) and exit")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                        help="the shell: do not warm Spark up with a small query of its own once it is ready")
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="run a SQL script (DDL, INSERT INTO pipelines, SELECTs)")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", help="the .sql script")
    source.add_argument("-e", "--execute", metavar="SQL", help="SQL text to run instead of a file")
    run.add_argument("-d", "--detach", action="store_true", help="run as a background job (see SHOW JOBS, STOP JOB)")
    for flag in ("--catalog", "--master", "--remote", "--format", "--conf", "--verbose"):
        _share(run, parser, flag)
    serve = commands.add_parser("serve", help="start a Spark Connect endpoint with the catalog's tables")
    serve.add_argument("--port", type=int, default=15002, help="port to listen on (default 15002)")
    serve.add_argument("--thrift", type=int, nargs="?", const=10000, metavar="PORT",
                       help="also serve JDBC/ODBC (Spark's Thrift server, HiveServer2 protocol) on PORT (default 10000)")
    serve.add_argument("--bind", default="127.0.0.1", metavar="HOST",
                       help="address to listen on (default 127.0.0.1; any other needs authentication)")
    serve.add_argument("--token-file", metavar="FILE",
                       help="Spark Connect's client token (else $STREAMSQL_CONNECT_TOKEN); required beyond loopback")
    serve.add_argument("--users", metavar="FILE", help="JDBC/ODBC users and password hashes (streamsql user add);"
                       " default ~/.streamsql/users when it exists, required beyond loopback")
    serve.add_argument("--thrift-keystore", metavar="FILE",
                       help="JDBC/ODBC over TLS with this Java keystore (password in $STREAMSQL_KEYSTORE_PASSWORD)")
    serve.add_argument("--gateway", type=int, nargs="?", const=8083, metavar="PORT",
                       help="serve Flink's SQL Gateway REST API on PORT (default 8083) instead of Spark Connect")
    serve.add_argument("--read-only", action="store_true",
                       help="answer queries over the catalog's tables only: refuse DDL, INSERT, jars, functions, paths")
    for flag in ("--catalog", "--master", "--conf", "--verbose"):
        _share(serve, parser, flag)
    ui = commands.add_parser("ui", help="a web dashboard of the catalog's jobs, with Prometheus metrics (/metrics)")
    ui.add_argument("--port", type=int, default=8081, help="port to listen on (default 8081, Flink's web UI port)")
    ui.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                    help="address to listen on (default 127.0.0.1; any other needs a token)")
    ui.add_argument("--token-file", metavar="FILE",
                    help="the token its users and scrapers send (else $STREAMSQL_CONNECT_TOKEN); required beyond loopback")
    _share(ui, parser, "--catalog")
    user = commands.add_parser("user", help="manage the users of `streamsql serve --thrift`")
    user_commands = user.add_subparsers(dest="user_command", required=True)
    add = user_commands.add_parser("add", help="add a user, or set a user's password (read from the terminal or stdin)")
    add.add_argument("name")
    add.add_argument("--users", metavar="FILE", help="the users file (default ~/.streamsql/users)")
    return parser


def version_text() -> str:
    """streamsql's version, and the Spark it runs on (read from package metadata: no JVM)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "unknown"

    return f"streamsql {of('streamsql')} (Flink SQL 1.20 dialect, PySpark {of('pyspark')})"


def _share(sub: argparse.ArgumentParser, parent: argparse.ArgumentParser, flag: str) -> None:
    """Let global options also follow the subcommand (`streamsql run --format csv x.sql`)."""
    action = next(a for a in parent._actions if flag in a.option_strings)
    kwargs = {"dest": action.dest, "help": argparse.SUPPRESS, "default": argparse.SUPPRESS}
    if isinstance(action, argparse._StoreTrueAction):
        sub.add_argument(*action.option_strings, action="store_true", **kwargs)
    elif isinstance(action, argparse._AppendAction):
        sub.add_argument(*action.option_strings, action="append", **kwargs)
    else:
        sub.add_argument(*action.option_strings, choices=action.choices, **kwargs)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.verbose:  # Spark's start-up log too (runtime/lifetime.py)
        os.environ["STREAMSQL_VERBOSE"] = "1"
    else:  # py4j logs each call a dead JVM refuses, with its traceback: the error says it once
        import logging

        logging.getLogger("py4j").addHandler(logging.NullHandler())
        logging.getLogger("py4j").propagate = False
        # (some of its calls log on the root logger itself: logging.exception)
        logging.getLogger().addFilter(lambda record: "/py4j/" not in record.pathname.replace("\\", "/"))
    try:
        if args.command == "run" and args.detach:
            return _detach(argv if argv is not None else sys.argv[1:], args)
        if args.command == "serve":
            return _serve(args)
        if args.command == "user":
            return _add_user(args)
        if args.command == "ui":
            return _ui(args)
        return _run(args) if args.command == "run" else _repl(args)
    except StreamsqlError as error:
        if _jvm_died(args, error):
            return 1
        _print_error(error.render())
        if args.verbose:
            _print_trace(error)
        return 1
    except KeyboardInterrupt:
        _print_error("Cancelled.")
        return 130
    except _stop_requested():
        print("Job stopped.", file=sys.stderr)
        return 0
    except Exception as error:  # a bug in streamsql: say so plainly
        if _jvm_died(args, error):
            if args.verbose:
                traceback.print_exc()
            return 1
        _print_error(f"Internal error: {type(error).__name__}: {error}" + ("" if args.verbose else " (run with --verbose for details)"))
        if args.verbose:
            traceback.print_exc()
        return 2


def _serve(args) -> int:
    from streamsql.catalog import Catalog
    from streamsql.runtime.serve import Access, serve
    from streamsql.runtime.server_auth import default_users_file, read_token

    if args.gateway is not None:  # Flink's SQL Gateway alone: its sessions run on a local Spark of its own
        from streamsql.runtime.gateway import serve_gateway

        if args.thrift is not None:
            raise StreamsqlError("--gateway serves alone: run a second `streamsql serve --thrift` for JDBC/ODBC")
        return serve_gateway(args.catalog or default_catalog_dir(), args.gateway, args.bind, args.master,
                             read_token(args.token_file), read_only=args.read_only)
    users = Path(args.users) if args.users else default_users_file()
    if args.users and not users.is_file():
        raise StreamsqlError(f"The users file '{users}' does not exist (streamsql user add NAME --users {users})")
    access = Access(args.bind, read_token(args.token_file), users if users.is_file() else None, args.thrift_keystore,
                    read_only=args.read_only)
    conf = dict((k.strip(), v.strip()) for k, _, v in (item.partition("=") for item in args.conf))
    return serve(Catalog(args.catalog or default_catalog_dir()), args.port, args.master, args.thrift, access,
                 spark_conf={k: v for k, v in conf.items() if k.startswith("spark.")})


def _ui(args) -> int:
    """`streamsql ui`: the dashboard over the catalog's job registry (runtime.dashboard)."""
    from streamsql.runtime.dashboard.server import serve_ui
    from streamsql.runtime.server_auth import read_token

    return serve_ui(_engine(args).jobs_registry, args.port, args.bind, read_token(args.token_file))


def _add_user(args) -> int:
    """`streamsql user add NAME`: the password twice from a terminal, else one line of stdin."""
    import getpass

    from streamsql.runtime.server_auth import add_user, default_users_file

    path = Path(args.users) if args.users else default_users_file()
    if sys.stdin.isatty():
        password = getpass.getpass(f"Password for {args.name}: ")
        if getpass.getpass("Again: ") != password:
            raise StreamsqlError("The two passwords differ; nothing was changed")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    new = add_user(path, args.name, password)
    print(f"{'Added user' if new else 'Changed the password of'} '{args.name}' in {path}")
    return 0


def _jvm_died(args, error: Exception) -> bool:
    """Whether Spark's JVM exited under the command; if so, say it in one paragraph. A
    streamsql error was raised after the JVM answered (or its death was seen and said
    already): no waiting for an exit then, only for an error from a call the JVM dropped."""
    if "pyspark" not in sys.modules:
        return False
    from streamsql.runtime.lifetime import driver_jvm_exit, jvm_exit_message

    died = driver_jvm_exit(wait=0 if isinstance(error, StreamsqlError) else 2)
    if died is not None:
        _print_error(jvm_exit_message(*died, resumable=args.command == "run"))
    return died is not None


def _print_trace(error: BaseException) -> None:
    """The whole trace, the Spark (and Java) failure an error was translated from included."""
    traceback.print_exception(with_whole_chain(error))


def _stop_requested():
    from streamsql.runtime.jobs import StopRequested

    return StopRequested


def _detach(argv: list[str], args) -> int:
    """Start this same command without --detach as a background process; print its job id."""
    import subprocess

    from streamsql.runtime.jobs import JobRecord

    registry = _engine(args).jobs_registry
    job_id = registry.new_id()
    registry.directory.mkdir(parents=True, exist_ok=True)
    log = registry.directory / f"{job_id}.log"
    child_args = [a for a in argv if a not in ("-d", "--detach")]
    if args.file:  # the child may run from another directory: give it the script's full path
        child_args = [str(Path(a).resolve()) if a == args.file else a for a in child_args]
    # The child imports this same streamsql, not whichever one its working directory or an
    # installed copy would give `python -m streamsql.cli`.
    search_path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, STREAMSQL_JOB_ID=job_id, STREAMSQL_JOB_LOG=str(log), PYTHONPATH=search_path)
    with open(log, "w") as out:
        child = subprocess.Popen([sys.executable, "-m", "streamsql.cli", *child_args], stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    registry.save(JobRecord(id=job_id, name=Path(args.file).name if args.file else "sql", pid=child.pid, log=str(log)))
    print(f"Job {job_id} started (pid {child.pid}); log: {log}")
    print(f"  streamsql run -e \"SHOW JOBS\"     streamsql run -e \"STOP JOB '{job_id}'\"")
    return 0


def _record_outcome(engine, error: BaseException | None) -> None:
    """A detached job that ran no streaming query still leaves its outcome in the registry."""
    import time

    from streamsql.runtime.jobs import CANCELED, FAILED, FINISHED, RUNNING, StopRequested

    job_id = os.environ.get("STREAMSQL_JOB_ID")
    record = engine.jobs_registry.get(job_id) if job_id else None
    if record is not None and record.pid == os.getpid() and record.status == RUNNING:
        record.status = FINISHED if error is None else CANCELED if isinstance(error, StopRequested) else FAILED
        record.error = None if error is None or isinstance(error, StopRequested) else str(error)
        record.ended = time.time()  # (the dashboard's uptime)
        engine.jobs_registry.save(record)


def _run(args) -> int:
    from streamsql.plan.udfs import add_search_path
    from streamsql.runtime.results import ResultWriter

    if getattr(args, "execute", None) is not None:
        text = args.execute
    else:
        path = Path(args.file)
        if not path.is_file():
            raise StreamsqlError(f"Script '{args.file}' does not exist")
        text = path.read_text()
        add_search_path(path.parent)
    add_search_path(Path.cwd())
    engine = _engine(args)
    engine.spark_ui = args.command == "run"  # a job: Spark's UI on (runtime.spark_ui); a piped shell keeps it off
    if sys.stderr.isatty():  # a transient line while Spark starts (the results go to stdout)
        from rich.console import Console

        engine.spark_starting = lambda target: Console(stderr=True).status(f"Starting Spark ({target})…")
    from streamsql.runtime.jobs import StopRequested, install_stop_handler, stop_requested

    install_stop_handler()
    try:
        engine.run_script(text, ResultWriter(args.format, settings=engine.settings))
    except BaseException as error:
        if stop_requested() and isinstance(error, StreamsqlError):  # SIGTERM cancelled a running query
            _record_outcome(engine, StopRequested())
            raise StopRequested() from error
        _record_outcome(engine, error)
        raise
    finally:
        engine.stop()
    _record_outcome(engine, None)
    return 0


def _engine(args):
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine

    engine = Engine(Catalog(args.catalog or default_catalog_dir()), args.master, args.remote)
    for item in args.conf:
        key, _, value = item.partition("=")
        engine.settings.set(key.strip(), value.strip())
    return engine


def _repl(args) -> int:
    """The interactive shell; with piped input (`streamsql < job.sql`), run that script."""
    from streamsql.plan.udfs import add_search_path

    add_search_path(Path.cwd())
    scripts = [_script_text(p) for p in (args.init, args.script) if p]
    if not args.script and not sys.stdin.isatty():
        args.execute = "\n".join([*scripts, sys.stdin.read()])
        return _run(args)
    from streamsql.repl import run_file, run_repl

    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so that Spark is stopped in order (atexit)
    engine = _engine(args)
    if args.init and run_file(engine, scripts[0]) != 0:
        engine.stop()
        return 1
    if args.script:
        try:
            return run_file(engine, scripts[-1])
        finally:
            engine.stop()
    return run_repl(engine, warm_up=args.warm_up)


def _script_text(name: str) -> str:
    """A SQL file's text; its directory is where its Python UDFs are found."""
    from streamsql.plan.udfs import add_search_path

    path = Path(name)
    if not path.is_file():
        raise StreamsqlError(f"Script '{name}' does not exist")
    add_search_path(path.parent)
    return path.read_text()


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _print_error(text: str) -> None:
    if sys.stderr.isatty():
        from rich.console import Console

        Console(stderr=True, highlight=False).print(text, style="red", markup=False)
    else:
        print(text, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
