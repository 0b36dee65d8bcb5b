"""The log read by the JVM: Spark's JDBC source over a PostgreSQL store.

Reading through Python workers costs every row a trip through `read_all`
and Arrow (31k-51k events/s on 2 cores); the JDBC source reads rows into
the JVM directly, one position range per task. The driver is Debian's
`libpostgresql-jdbc-java` (`scripts/ensure-jdbc.sh`), added to the
session's `spark.jars` by `spark_session`; nothing is downloaded.

The high-water mark the driver fixed is written into the query itself:
Spark's `lowerBound`/`upperBound` only cut the stride between tasks, and
the first and last tasks read without bound on their open side.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from eventcraft.eventstore import postgres_log_subquery
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

POSTGRES_JAR = os.environ.get("EVENTCRAFT_POSTGRES_JDBC", "/usr/share/java/postgresql.jar")
"""Debian's PostgreSQL JDBC driver (`apt-get install libpostgresql-jdbc-java`)."""
DRIVER = "org.postgresql.Driver"
_FETCH_SIZE = "10000"
_PASSED_ON = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout")
"""libpq parameters of a store URL that the JDBC driver takes under the same name."""

PYTHON = "python"
"""A read path: Python workers, each reading a position range with `read_all`."""
JDBC = "jdbc"
"""A read path: Spark's JDBC source, rows straight into the JVM."""
MOST_KEYED_TASKS = 8
"""The most tasks `read_jdbc_by_key` is taken for.

Each task scans the whole position range; the shuffle it saves writes and
reads every event once more. Measured on 10M events of about 230 bytes of
data (PostgreSQL 15, Spark in local mode): a scan costs PostgreSQL 1.5-2
CPU seconds, the shuffle Spark about 14; past some eight tasks the scans
cost more than the shuffle."""


def jars() -> list[str]:
    """The JDBC drivers on this machine, for `spark.jars`."""
    return [POSTGRES_JAR] if os.path.isfile(POSTGRES_JAR) else []


def read_path(spark: SparkSession, url: str) -> str:
    """`JDBC` for a PostgreSQL store over TCP when the session can load the driver."""
    if not url.lower().startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return PYTHON
    if not urlsplit(url).hostname:
        return PYTHON  # a Unix socket: the JDBC driver speaks TCP only
    return JDBC if _driver_loads(spark) else PYTHON


def _driver_loads(spark: SparkSession) -> bool:
    jvm: Any = spark._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(DRIVER, False, loader)
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException
        return False
    return True


def jdbc_options(url: str) -> dict[str, str]:
    """The JDBC URL and connection properties of a store URL (the password stays out of the URL)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    port = f":{parts.port}" if parts.port else ""
    # libpq's defaults where the URL is silent, as the store's own connections get them.
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    options = {
        "url": f"jdbc:postgresql://{host}{port}{parts.path or '/'}",
        "driver": DRIVER,
        "user": user or os.environ.get("PGUSER") or getpass.getuser(),
        "ApplicationName": "eventcraft-spark",
    }
    password = password if password is not None else os.environ.get("PGPASSWORD")
    if password is not None:
        options["password"] = password
    if query.get("schema"):
        options["currentSchema"] = query["schema"]  # checked by the store as it opened
    options.update({key: query[key] for key in _PASSED_ON if key in query})
    return options


def read_jdbc(
    spark: SparkSession,
    url: str,
    *,
    after: int,
    upto: int,
    partitions: int,
    categories: Sequence[str] | None,
    types: Sequence[str] | None,
) -> DataFrame:
    """Events with `after < position <= upto` through the JDBC source, `partitions` tasks."""
    after, upto = int(after), int(upto)  # they are written into the query: integers only
    reader = spark.read.format("jdbc").options(**jdbc_options(url))
    frame = (
        reader.option("dbtable", postgres_log_subquery(after, upto))
        .option("fetchsize", _FETCH_SIZE)
        .option("partitionColumn", "position")
        .option("lowerBound", str(after + 1))
        .option("upperBound", str(upto + 1))
        .option("numPartitions", str(max(1, min(partitions, upto - after))))
        .load()
    )
    return _filtered(frame, categories, types)


def read_jdbc_by_key(
    spark: SparkSession,
    url: str,
    *,
    after: int,
    upto: int,
    tasks: int,
    prefix: str,
    categories: Sequence[str] | None,
    types: Sequence[str] | None,
) -> DataFrame:
    """Events with `after < position <= upto` through the JDBC source, each of `tasks`
    tasks reading all the events of the keys that hash to it, the key being
    `StreamKey(prefix)`'s: a fold keyed so needs no shuffle, only a sort in each task.

    Every task scans the whole range and keeps its share, so this pays for a
    few tasks only (`MOST_KEYED_TASKS`).
    """
    after, upto, tasks = int(after), int(upto), int(tasks)  # written into the query
    options = jdbc_options(url)
    # Spark lower-cases the names of the properties given with predicates, and the
    # driver's are case-sensitive (currentSchema): all but the credentials go in the URL.
    credentials = ("driver", "user", "password")
    in_url = {name: value for name, value in options.items() if name not in ("url", *credentials)}
    properties = {name: options[name] for name in credentials if name in options}
    properties["fetchsize"] = _FETCH_SIZE
    # The key's hash as PostgreSQL computes it, made non-negative: each key to one task.
    share = f"(hashtext({key_sql(prefix)}) & 2147483647) % {tasks}"
    frame = spark.read.jdbc(
        f"{options['url']}?{urlencode(in_url)}",
        postgres_log_subquery(after, upto),
        predicates=[f"{share} = {task}" for task in range(tasks)],
        properties=properties,
    )
    return _filtered(frame, categories, types)


def key_sql(prefix: str) -> str:
    """`StreamKey(prefix)` in SQL: `stream_id`, without `prefix` where it starts with it.

    The prefix comes as hexadecimal digits, so nothing in it can end the literal;
    `left` and `substr` count characters, as Python's slicing does.
    """
    if not prefix:
        return "stream_id"
    text = f"convert_from(decode('{prefix.encode().hex()}', 'hex'), 'UTF8')"
    return (
        f"CASE WHEN left(stream_id, {len(prefix)}) = {text} "
        f"THEN substr(stream_id, {len(prefix) + 1}) ELSE stream_id END"
    )


def _filtered(
    frame: DataFrame, categories: Sequence[str] | None, types: Sequence[str] | None
) -> DataFrame:
    # Spark pushes these filters into each task's query, its literals quoted by the dialect.
    if categories is not None:
        frame = frame.where(F.col("category").isin(list(categories)))
    if types is not None:
        frame = frame.where(F.col("type").isin(list(types)))
    return frame.drop("category")
