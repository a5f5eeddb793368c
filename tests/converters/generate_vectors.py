"""Regenerate tests/converters/vectors/*.json with Kafka Connect's own converters.

    .venv/bin/python tests/converters/generate_vectors.py [--java PATH/TO/java]

Runs every case of ``vector_cases.py`` through Kafka Connect 4.1.1's converter of the
same class name (``java/ConverterVectors.java``, compiled with ``javac`` against
the jars ``tests/support/java_connect.py`` fetches with Maven into ``.cache/``) and
writes each case with the bytes Connect wrote, or the exception it threw.
``test_connect_vectors.py`` asserts our converters write the same bytes.

The JVM runs with ``-Duser.timezone=UTC``: Connect formats dates in text (the
StringConverter's ``Date.toString``, SimpleHeaderConverter) in the JVM's zone,
and ours in UTC. Double and float text follows the JVM's ``Double.toString``,
which JDK 19 made the shortest representation (JDK-4511638); use a JDK >= 19,
as Kafka's images do (``--java``, else ``$JAVA_HOME/bin/java``, else ``java``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))

import vector_cases as cases  # noqa: E402
from support import java_connect  # noqa: E402


def _java_binary(given: str | None) -> str:
    if given:
        return given
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _java_version(java: str) -> str:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=True)
    return out.stderr.splitlines()[0].strip()


def _requests() -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """(requests for Java, (group, vector without its answer) in the same order)."""
    requests: list[dict[str, Any]] = []
    vectors: list[tuple[str, dict[str, Any]]] = []
    for group, make in cases.GROUPS.items():
        for case in make():
            for config in case["configs"]:
                vector = {"name": case["name"], "class": case["class"], "kind": case["kind"],
                          "config": config, "schema": case["schema"], "value": case["value"]}
                if case["kind"] == "header":
                    vector["header_key"] = case["header_key"]
                if case["deviation"]:
                    vector["deviation"] = case["deviation"]
                requests.append({"id": len(requests), "header_key": case["header_key"],
                                 **vector})
                vectors.append((group, vector))
    return requests, vectors


def _run_java(java: str, requests: list[dict[str, Any]], work: Path) -> list[dict[str, Any]]:
    libs = java_connect.fetch()
    classpath = f"{libs}/*"
    classes = work / "classes"
    subprocess.run(["javac", "--release", "17", "-encoding", "UTF-8", "-cp", classpath,
                    "-d", str(classes), str(HERE / "java" / "ConverterVectors.java")],
                   check=True)
    (work / "requests.json").write_text(json.dumps(requests), encoding="utf-8")
    subprocess.run([java, "-Duser.timezone=UTC", "-cp", f"{classes}:{classpath}",
                    "ConverterVectors", str(work / "requests.json"), str(work / "answers.json")],
                   check=True)
    answers: list[dict[str, Any]] = json.loads((work / "answers.json").read_text("utf-8"))
    return answers


def _expected(answer: dict[str, Any]) -> dict[str, Any]:
    if "error" in answer:
        return {"error": answer["error"]}
    encoded = answer["base64"]
    if encoded is None:
        return {"base64": None}
    raw = base64.b64decode(encoded)
    try:
        return {"base64": encoded, "text": raw.decode("utf-8")}  # for reading the diff
    except UnicodeDecodeError:
        return {"base64": encoded}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--java", help="the java binary to run Kafka Connect with")
    args = parser.parse_args()
    java = _java_binary(args.java)
    requests, vectors = _requests()
    with tempfile.TemporaryDirectory() as tmp:
        answers = _run_java(java, requests, Path(tmp))
    by_group: dict[str, list[dict[str, Any]]] = {group: [] for group in cases.GROUPS}
    for (group, vector), answer in zip(vectors, answers, strict=True):
        by_group[group].append({**vector, "expected": _expected(answer)})
    out_dir = HERE / "vectors"
    out_dir.mkdir(exist_ok=True)
    about = {"kafka_connect": java_connect.VERSION, "java": _java_version(java),
             "regenerate": "python tests/converters/generate_vectors.py"}
    for group, found in by_group.items():
        path = out_dir / f"{group}.json"
        path.write_text(json.dumps({"generated_by": about, "vectors": found}, indent=1,
                                   ensure_ascii=True) + "\n", encoding="utf-8")
        errors = sum("error" in v["expected"] for v in found)
        print(f"{path.relative_to(REPO)}: {len(found)} vectors ({errors} where Connect "
              "throws)")


if __name__ == "__main__":
    main()
