"""An exactly-once SQL source: rows of database tables (or of one query) as records.

Confluent's JDBC source connector, on SQLAlchemy 2: any SQLAlchemy URL
(SQLite embedded, PostgreSQL tested for real), Confluent's keys, modes and
offsets, and exactly-once delivery (KIP-618) where the mode allows it. The
user's guide is docs/sql-source.md; the modules, by job:

================  ==========================================================
``config``        keys, URL handling (JDBC forms, credentials), checks between keys
``dialect``       engines, the database clock, how timestamps compare (SQLite!)
``tables``        discovering and selecting tables, splitting them over tasks,
                  the background monitor
``reflect``       a table's or the query's columns; the mode's columns checked
``columns``       column types -> Connect schemas, values -> Python values
``offsets``       Confluent's partition and offset shapes (pure)
``queries``       the SELECT of each mode (pure)
``progress``      where a batch may end and each record's offset (pure)
``reader``        one table's reading loop: one bounded step at a time
``task``          the task: its tables in turn, commits at safe points
``validation``    validate's database checks, each on the key to change
``connector``     the connector
================  ==========================================================

Records
    Topic ``topic.prefix`` + the table name (``topic.prefix`` alone for the
    query); no key (as Confluent); value a Struct whose schema comes from the
    column types (``columns.py``), named after the table; source partition
    ``{"protocol": "1", "table": "<schema.table>"}`` or ``{"query": "query"}``;
    offset ``{"incrementing": n}``, ``{"timestamp": ms, "timestamp_nanos": ns}``
    or both (``offsets.py``). Bulk records have neither partition nor offset.

Modes and exactly-once (``SqlSourceConnector.exactly_once_support``)
    * ``incrementing``: ``inc > last``, ordered by inc. SUPPORTED. Only new rows;
      the column must be unique and only grow: a repeated value, a value below
      the previous one, or a null fails the task naming the table and column.
      A row committed late with a *lower* value than one already read (two
      concurrent inserts committing out of order) cannot be seen by any query
      bounded by the offset: use timestamp+incrementing with a delay then.
    * ``timestamp+incrementing``: Confluent's criteria ``E < end AND ((E = t AND
      inc > i) OR E > t)`` ordered by E, inc. SUPPORTED: each row version has a
      unique position ``(E, inc)``. Sees inserts and updates.
    * ``timestamp``: ``E > t AND E < end`` ordered by E. Several rows may share a
      timestamp, so Confluent calls this mode unsafe: resuming after ``t`` skips
      the rest of a group that was cut. Here a record's offset only moves to a
      timestamp once its whole group is emitted, a group cut by
      ``batch.max.rows`` is read whole by its own query, and with
      ``transaction.boundary=connector`` the task commits only where a group ends
      (``progress.py``). SUPPORTED with connector boundaries; at-least-once
      (never loss) otherwise.
    * ``bulk``: the whole table every ``poll.interval.ms``. UNSUPPORTED: a
      snapshot has no position to resume from, so a restart reads it again.

    With ``exactly.once.support=required``, ``validate`` says on that key why
    the mode cannot be exactly once and what to set (``config.exactly_once_obstacle``).

Late rows (``timestamp.delay.interval.ms``)
    ``end`` is the database's clock (``dialect.py``) minus the delay: a row is
    read only once its timestamp is older than that, leaving transactions that
    started earlier time to commit. A row whose timestamp is older than the
    offset when it becomes visible is never read (Confluent's rule too); set
    the delay above your longest write transaction.
"""

from .connector import SqlSourceConnector
from .task import SqlSourceTask

__all__ = ["SqlSourceConnector", "SqlSourceTask"]
