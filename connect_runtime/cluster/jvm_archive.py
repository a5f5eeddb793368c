"""A class-data archive (AppCDS) for the Spark driver's JVM: a faster worker start.

A worker's Spark driver is a JVM that loads some ten thousand classes from
PySpark's jars before the first task can run: on a 2-core machine about 5 s of
the 7 s a worker takes to become healthy. A dynamic class-data-sharing archive
(JDK 13+, ``-XX:ArchiveClassesAtExit``) holds those classes already parsed and
verified; a JVM started with ``-XX:SharedArchiveFile`` maps it instead, and
the driver is up in about 3 s (docs/spark.md has the numbers).

The archive belongs to one JDK build and one set of jars (their paths
included), so it lives with them, in the Python environment's
``share/connect-runtime/jvm/`` (or ``$CONNECT_RUNTIME_JVM_ARCHIVES``), named by a
digest of the java binary and the jars. It is made once
by ``python -m connect_runtime.cluster.jvm_archive`` (``deploy/setup.sh`` runs
it), never by a worker: making one takes a Spark start and a dump at the JVM's
exit, which a worker that is SIGKILLed would leave half-written. It is written
to a temporary name and renamed, so a JVM never maps a partial file. A worker
that finds no archive for its JVM starts as before, only slower; a JVM that
finds the archive unusable (another classpath, say) ignores it, which the JDK
does by itself under the default ``-Xshare:auto``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

# The driver's own log configuration (spark_runner.DRIVER_LOG4J2): WARN and up.
DRIVER_LOG4J2 = Path(__file__).resolve().with_name("spark-driver-log4j2.properties")


def _java() -> Path | None:
    """The java binary ``spark-submit`` runs: ``$JAVA_HOME/bin/java``, else ``java``
    on the PATH; resolved through symlinks (Debian's alternatives)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if found is None or not Path(found).is_file():
        return None
    return Path(found).resolve()


def _jars() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    return jars if jars.is_dir() else None


def archive_path() -> Path | None:
    """Where the archive for this machine's java and PySpark jars is (whether or
    not it exists yet); None if either cannot be found."""
    java, jars = _java(), _jars()
    if java is None or jars is None:
        return None
    # The JVM checks the archive against the jars' paths, sizes and times, and
    # ignores one that does not match: the key changes whenever they do.
    digest = hashlib.sha256()
    for path in (java, jars, *sorted(jars.iterdir())):
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    where = os.environ.get("CONNECT_RUNTIME_JVM_ARCHIVES")
    folder = Path(where) if where else Path(sys.prefix) / "share" / "connect-runtime" / "jvm"
    return folder / f"spark-driver-{digest.hexdigest()[:16]}.jsa"


def java_options() -> str:
    """The driver JVM's option that maps the archive, or "" when there is none."""
    path = archive_path()
    return f'-XX:SharedArchiveFile="{path}"' if path is not None and path.is_file() else ""


def build() -> Path:
    """Make the archive (if missing): start a local SparkContext whose JVM dumps
    the classes it loaded at its exit, run one job, stop it, and wait for the
    JVM to exit. Returns the archive's path."""
    path = archive_path()
    if path is None:
        raise RuntimeError("no java binary or no PySpark jars found: nothing to archive")
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=path.stem + ".", suffix=".partial", dir=path.parent)
    os.close(fd)
    os.unlink(partial)  # the JVM creates it at its exit
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    conf = (SparkConf().setMaster("local[2]").setAppName("connect-runtime-jvm-archive")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.extraJavaOptions",
                 f'-XX:ArchiveClassesAtExit="{partial}" -Xlog:cds=off '
                 f'-Dlog4j2.configurationFile="{DRIVER_LOG4J2}"'))
    try:
        sc = SparkContext(conf=conf)
        try:
            sc.parallelize(range(4), 2).map(lambda x: x + 1).collect()
        finally:
            sc.stop()
        # The driver JVM exits once its stdin closes (PySpark's gateway), dumping then.
        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(120)
        if not Path(partial).is_file():
            raise RuntimeError(f"the JVM exited without writing its class archive {partial}")
        os.replace(partial, path)
    finally:
        Path(partial).unlink(missing_ok=True)
    return path


def main() -> int:
    path = build()
    print(f"jvm_archive: {path} ({path.stat().st_size // 2**20} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
