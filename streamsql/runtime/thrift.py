"""`streamsql serve --thrift`: Spark's Thrift JDBC/ODBC server (HiveServer2 protocol) beside Spark Connect.

PySpark's wheel carries Spark's Thrift server (`spark-hive-thriftserver`, `hive-service`,
`hive-jdbc`, `beeline`). With ``--thrift`` serve launches the Thrift server's main class
instead of the Connect server's, with Spark Connect started in the same application as a
driver plugin: one Spark application, one shared catalog, so the tables serve registers
(through Connect) are the tables every JDBC/ODBC session sees. The catalog is Spark's
in-memory one (no Hive metastore, no Derby files). Its own settings (port, address,
authentication, TLS) are a private hive-site.xml (runtime.server_auth.hive_site).
"""

from __future__ import annotations

from streamsql.plan.objects import DEFAULT_DATABASE

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"


def thrift_conf() -> dict[str, str]:
    """Spark settings of an application that runs the Thrift server and the Connect plugin."""
    return {
        "spark.plugins": CONNECT_PLUGIN,
        "spark.sql.catalogImplementation": "in-memory",
    }


def jdbc_url(host: str, port: int, database: str = DEFAULT_DATABASE) -> str:
    """The JDBC URL; its database is where unqualified table names resolve (Flink's default)."""
    return f"jdbc:hive2://{host}:{port}/{database}"
