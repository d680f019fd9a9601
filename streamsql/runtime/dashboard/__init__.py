"""`streamsql ui`: a web dashboard of the catalog's jobs, and their metrics for Prometheus.

It reads the job registry (``<catalog>/_jobs/``, runtime.jobs) and nothing else, so it
shows jobs started from any process and costs a running job nothing but the files the
job writes anyway. Modules:

- ``samples``: what a job records of each micro-batch (called by runtime.jobs' monitor);
- ``plan_graph``: a job's operator plans as graphs (recorded when the job starts) and
  their layout;
- ``snapshot``: the registry read into job views, with the history the server keeps;
- ``metrics``: the Prometheus text of a snapshot (``prometheus_client``);
- ``pages``: the server-rendered HTML (``assets/`` holds the JS and CSS);
- ``access``: who may use the server (loopback, token, Host and Origin checks);
- ``server``: the HTTP server and its routes.
"""
