"""A real Spark standalone cluster for tests: one master and one worker from the installed PySpark.

Both run on 127.0.0.1 on free ports, small (the worker offers 1 core and 1 GB, one executor's
worth); they are stopped however the test ends, and their executors with them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streamsql.runtime.lifetime import die_with_parent, end_process
from tests.ports import free_ports

START_SECONDS = 180


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    ui: str  # the master's web UI, http://127.0.0.1:PORT
    started_in: float  # seconds from launch until the worker registered

    def applications(self) -> list[dict]:
        """The master's view of applications (running and completed)."""
        state = _master_state(self.ui)
        return state.get("activeapps", []) + state.get("completedapps", [])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@contextmanager
def standalone_cluster(work_dir: Path, cores: int = 1, memory: str = "1g"):
    """Start a master and one worker; yield the Cluster once the worker is registered."""
    work_dir.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
               SPARK_LOG_DIR=str(work_dir), SPARK_WORKER_DIR=str(work_dir / "worker"))
    env.pop("SPARK_CONF_DIR", None)
    port, ui_port, worker_ui = free_ports(3)
    url, ui = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}"
    spark_class = str(home / "bin" / "spark-class")
    started = time.time()
    processes: list[subprocess.Popen] = []
    try:
        processes.append(_launch([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(port), "--webui-port", str(ui_port)], env, work_dir / "master.log"))
        _wait(lambda: _master_state(ui).get("status") == "ALIVE", processes, "the master to start", work_dir)
        processes.append(_launch([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                  "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui),
                                  "--work-dir", str(work_dir / "worker")], env, work_dir / "worker.log"))
        _wait(lambda: any(w.get("state") == "ALIVE" for w in _master_state(ui).get("workers", [])), processes,
              "the worker to register", work_dir)
        yield Cluster(url, ui, time.time() - started)
    finally:
        for process in reversed(processes):  # the worker first: it ends its executors
            end_process(process, seconds=30)


def _launch(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=die_with_parent())


def _master_state(ui: str) -> dict:
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=5) as response:
            return json.load(response)
    except (OSError, ValueError):
        return {}


def _wait(check, processes: list[subprocess.Popen], what: str, work_dir: Path) -> None:
    deadline = time.time() + START_SECONDS
    while time.time() < deadline:
        if check():
            return
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[1]} exited (status {process.returncode}) waiting for {what}; "
                                   f"logs in {work_dir}")
        time.sleep(0.5)
    raise RuntimeError(f"Timed out after {START_SECONDS} s waiting for {what}; logs in {work_dir}")
