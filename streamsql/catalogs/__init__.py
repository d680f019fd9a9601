"""Catalogs beside the default one: Flink's ``CREATE CATALOG c WITH ('type' = ...)``.

The default catalog (``default_catalog``) is streamsql's directory of DDL files
(``streamsql.catalog``). Another catalog is named by a ``CREATE CATALOG`` statement, kept
as that statement in ``<catalog directory>/_catalogs/<name>.sql`` (as Flink's file catalog
store keeps catalogs), and opened when first used:

- ``'type' = 'jdbc'``: a PostgreSQL server's tables, as Flink's JdbcCatalog shows them
  (``catalogs.postgres``): its databases are the server's, its tables ``schema.table``
  (``public``'s also by their bare name), each read, looked up and written by the ``jdbc``
  connector.
- ``'type' = 'iceberg'``: an Iceberg catalog (``catalogs.iceberg``): its namespaces are
  databases, its tables Iceberg tables read and written by the ``iceberg`` connector;
  ``CREATE TABLE`` in it creates an Iceberg table.
- ``'type' = 'hive'``: a Hive metastore, Spark's session catalog (``catalogs.hive``): its
  tables as the connector that reads their files declares them (``delta``, or
  ``filesystem`` for Parquet, JSON, CSV and Hive text tables); read through the Engine's
  Spark (``Catalogs.session``), the one catalog whose metadata needs the JVM.
- ``'type' = 'generic_in_memory'``: Flink's in-memory catalog, gone with the session.

A table of such a catalog is a ``TableDef`` like any other (its name carries the catalog):
the catalog writes the Flink DDL that declares it, with the columns mapped from the
catalog's own types, and the planner and runtime see no difference.
"""
