"""Every public route's success status, headers and JSON shape, as Kafka Connect answers."""

from __future__ import annotations

import logging
from urllib.parse import quote

import pytest
from fake_herder import PLUGIN_VERSION, SEQUENCE_CLASS, WORKER_ID, FakeHerder
from rest_checks import AppClient, assert_connect_error

from connect_runtime.cluster.herder_api import HealthInfo

CONFIG = {"connector.class": SEQUENCE_CLASS, "tasks.max": "1", "topic": "out"}


# -- root ---------------------------------------------------------------------------


def test_root_reports_version_commit_and_cluster(client: AppClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "version": "0.1.0",
        "commit": "abc123",
        "kafka_cluster_id": "cluster-id-1",
    }


@pytest.mark.parametrize(("status", "code"), [("healthy", 200), ("starting", 503),
                                              ("unhealthy", 500)])
def test_health_status_codes(client: AppClient, herder: FakeHerder, status: str,
                             code: int) -> None:
    herder.health_info = HealthInfo(status, f"worker is {status}")
    response = client.get("/health")
    assert response.status_code == code
    assert response.json() == {"status": status, "message": f"worker is {status}"}


# -- listing ------------------------------------------------------------------------


def test_list_connectors_gives_names(client: AppClient, herder: FakeHerder) -> None:
    herder.add("other")
    response = client.get("/connectors")
    assert response.status_code == 200
    assert response.json() == ["conn", "other"]


def test_expand_status_only(client: AppClient) -> None:
    body = client.get("/connectors", params={"expand": "status"}).json()
    assert list(body) == ["conn"]
    assert list(body["conn"]) == ["status"]
    assert body["conn"]["status"]["connector"] == {"state": "RUNNING", "worker_id": WORKER_ID,
                                                   "version": PLUGIN_VERSION}
    assert [t["id"] for t in body["conn"]["status"]["tasks"]] == [0, 1]


def test_expand_info_only(client: AppClient) -> None:
    body = client.get("/connectors?expand=info").json()
    assert list(body["conn"]) == ["info"]
    assert body["conn"]["info"]["name"] == "conn"
    assert body["conn"]["info"]["tasks"] == [{"connector": "conn", "task": 0},
                                             {"connector": "conn", "task": 1}]
    assert body["conn"]["info"]["type"] == "source"


def test_expand_status_and_info(client: AppClient) -> None:
    body = client.get("/connectors?expand=status&expand=info").json()
    assert set(body["conn"]) == {"status", "info"}


def test_unknown_expansion_still_gives_the_map_form(client: AppClient) -> None:
    assert client.get("/connectors?expand=bogus").json() == {"conn": {}}


def test_a_flood_of_expansions_is_one_lookup_each_and_one_escaped_log_line(
        client: AppClient, herder: FakeHerder, caplog: pytest.LogCaptureFixture) -> None:
    """Before, 5,000 repeats gave 150,000 INFO lines for one request (here 2,000:
    httpx's longest URL), and
    ``%0A[...] ERROR FORGED`` wrote a line of the client's choosing."""
    query = "&".join(["expand=x%0A[2026-12-07 00:00:00,000] ERROR FORGED"]
                     + ["expand=status"] * 2000 + [f"expand=bogus{i}" for i in range(2000)])
    with caplog.at_level(logging.DEBUG):
        body = client.get(f"/connectors?{query}").json()
    assert list(body["conn"]) == ["status"]
    assert sum(call[0] == "connector_status" for call in herder.calls) == 1
    lines = [r.getMessage() for r in caplog.records if "expansion" in r.getMessage()]
    assert len(lines) == 1 and "and 1996 more" in lines[0], lines
    assert "ERROR FORGED" in lines[0] and "\n" not in lines[0], lines


def test_expand_skips_connectors_that_vanish_mid_listing(client: AppClient,
                                                         herder: FakeHerder) -> None:
    herder.ghosts.add("deleted-meanwhile")
    body = client.get("/connectors?expand=status").json()
    assert list(body) == ["conn"]


# -- create -------------------------------------------------------------------------


def test_create_answers_201_with_location_and_info(client: AppClient,
                                                   herder: FakeHerder) -> None:
    response = client.post("/connectors", json={"name": "new", "config": CONFIG})
    assert response.status_code == 201
    assert response.headers["location"] == "/connectors/new"
    assert response.json() == {
        "name": "new",
        "config": {**CONFIG, "name": "new"},
        "tasks": [{"connector": "new", "task": 0}],
        "type": "source",
    }
    assert herder.calls[-1] == ("create_connector",
                                ("new", {**CONFIG, "name": "new"}, None, None))


def test_create_location_url_encodes_the_name(client: AppClient) -> None:
    response = client.post("/connectors", json={"name": "my conn%1?", "config": CONFIG})
    assert response.status_code == 201
    assert response.headers["location"] == "/connectors/my%20conn%251%3F"


@pytest.mark.parametrize("name", ["a/b", "../etc", "a/../b", "/", "x/"])
def test_a_name_with_a_slash_is_refused_since_no_path_could_address_it(
        client: AppClient, herder: FakeHerder, name: str) -> None:
    """Before, "a/b" was created (201, Location /connectors/a%2Fb), and then GET,
    DELETE, PUT config, stop and status all answered 404."""
    message = "Connector name may not contain '/'"
    assert_connect_error(client.post("/connectors", json={"name": name, "config": CONFIG}),
                         400, message)
    # PUT: the %2F is a '/' again once decoded, so no route matches: 404.
    assert_connect_error(client.put(f"/connectors/{quote(name, safe='')}/config",
                                    json=CONFIG), 404)
    assert not any(call[0] in {"create_connector", "put_connector_config"}
                   for call in herder.calls)


def test_create_trims_the_name_like_java(client: AppClient, herder: FakeHerder) -> None:
    response = client.post("/connectors", json={"name": "  padded\t", "config": CONFIG})
    assert response.status_code == 201
    assert response.json()["name"] == "padded"
    assert herder.calls[-1][1][0] == "padded"


def test_create_accepts_matching_name_in_config(client: AppClient) -> None:
    response = client.post("/connectors",
                           json={"name": "same", "config": {**CONFIG, "name": "same"}})
    assert response.status_code == 201


@pytest.mark.parametrize(("given", "passed"), [("PAUSED", "PAUSED"), ("stopped", "STOPPED"),
                                               ("Running", "RUNNING"), (None, None)])
def test_create_passes_initial_state(client: AppClient, herder: FakeHerder, given: str | None,
                                     passed: str | None) -> None:
    response = client.post("/connectors",
                           json={"name": "s", "config": CONFIG, "initial_state": given})
    assert response.status_code == 201
    assert herder.calls[-1][1][2] == passed


def test_create_coerces_scalar_config_values_like_jackson(client: AppClient,
                                                          herder: FakeHerder) -> None:
    body = ('{"name": "n", "config": {"connector.class": "' + SEQUENCE_CLASS + '",'
            ' "tasks.max": 3, "ratio": 1e3, "precise": 0.10000000000000001,'
            ' "flag": true, "off": false}}')
    response = client.post("/connectors", content=body,
                           headers={"content-type": "application/json"})
    assert response.status_code == 201
    config = response.json()["config"]
    assert config["tasks.max"] == "3"
    assert config["ratio"] == "1e3"  # the JSON text, as Jackson gives it
    assert config["precise"] == "0.10000000000000001"
    assert (config["flag"], config["off"]) == ("true", "false")
    assert all(type(v) is str for v in herder.calls[-1][1][1].values())


# -- read, reconfigure, delete --------------------------------------------------------


def test_get_connector_info(client: AppClient) -> None:
    response = client.get("/connectors/conn")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "conn"
    assert body["config"]["name"] == "conn"
    assert body["type"] == "source"


def test_get_connector_config(client: AppClient) -> None:
    response = client.get("/connectors/conn/config")
    assert response.status_code == 200
    assert response.json() == {"connector.class": SEQUENCE_CLASS, "tasks.max": "2",
                               "name": "conn"}


def test_put_config_creates_with_201_and_location(client: AppClient) -> None:
    response = client.put("/connectors/fresh/config", json=CONFIG)
    assert response.status_code == 201
    assert response.headers["location"] == "/connectors/fresh"
    assert response.json()["config"] == {**CONFIG, "name": "fresh"}


def test_put_config_updates_with_200_and_no_location(client: AppClient) -> None:
    response = client.put("/connectors/conn/config", json={**CONFIG, "name": "conn"})
    assert response.status_code == 200
    assert "location" not in response.headers
    assert response.json()["config"]["topic"] == "out"


def test_patch_config_merges_and_null_removes(client: AppClient, herder: FakeHerder) -> None:
    response = client.patch("/connectors/conn/config", json={"topic": "t2", "tasks.max": None})
    assert response.status_code == 200
    assert response.json()["config"] == {"connector.class": SEQUENCE_CLASS, "name": "conn",
                                         "topic": "t2"}
    assert herder.calls[-1] == ("patch_connector_config",
                                ("conn", {"topic": "t2", "tasks.max": None}))


def test_delete_answers_204(client: AppClient, herder: FakeHerder) -> None:
    response = client.delete("/connectors/conn")
    assert response.status_code == 204
    assert response.content == b""
    assert herder.connectors() == []


def test_task_configs(client: AppClient) -> None:
    response = client.get("/connectors/conn/tasks")
    assert response.status_code == 200
    assert response.json() == [
        {"id": {"connector": "conn", "task": 0}, "config": {"task.id": "0"}},
        {"id": {"connector": "conn", "task": 1}, "config": {"task.id": "1"}},
    ]


def test_offsets(client: AppClient) -> None:
    response = client.get("/connectors/conn/offsets")
    assert response.status_code == 200
    assert response.json() == {"offsets": [{"partition": {"task": 0}, "offset": {"seq": 41}}]}


def test_url_encoded_names_reach_the_herder_decoded(client: AppClient,
                                                    herder: FakeHerder) -> None:
    herder.add("with space")
    response = client.get("/connectors/with%20space/config")
    assert response.status_code == 200
    assert response.json()["name"] == "with space"


# -- status and lifecycle -----------------------------------------------------------


def test_connector_status(client: AppClient) -> None:
    response = client.get("/connectors/conn/status")
    assert response.status_code == 200
    assert response.json() == {
        "name": "conn",
        "connector": {"state": "RUNNING", "worker_id": WORKER_ID, "version": PLUGIN_VERSION},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": WORKER_ID,
                   "version": PLUGIN_VERSION},
                  {"id": 1, "state": "RUNNING", "worker_id": WORKER_ID,
                   "version": PLUGIN_VERSION}],
        "type": "source",
    }


def test_task_status(client: AppClient, herder: FakeHerder) -> None:
    response = client.get("/connectors/conn/tasks/1/status")
    assert response.status_code == 200
    assert response.json() == {"id": 1, "state": "RUNNING", "worker_id": WORKER_ID,
                               "version": PLUGIN_VERSION}
    assert herder.calls[-1] == ("task_status", ("conn", 1))


def test_plain_restart_is_legacy_204(client: AppClient, herder: FakeHerder) -> None:
    response = client.post("/connectors/conn/restart")
    assert response.status_code == 204
    assert response.content == b""
    assert herder.calls[-1] == ("restart_connector", ("conn", False, False))


def test_explicit_false_restart_flags_are_still_legacy(client: AppClient) -> None:
    response = client.post("/connectors/conn/restart?includeTasks=false&onlyFailed=false")
    assert response.status_code == 204


@pytest.mark.parametrize(("query", "include", "only_failed"), [
    ("includeTasks=true", True, False),
    ("onlyFailed=true", False, True),
    ("includeTasks=TRUE&onlyFailed=true", True, True),
])
def test_restart_with_flags_is_202_with_status(client: AppClient, herder: FakeHerder,
                                               query: str, include: bool,
                                               only_failed: bool) -> None:
    response = client.post(f"/connectors/conn/restart?{query}")
    assert response.status_code == 202
    assert response.json()["name"] == "conn"
    assert herder.calls[-1] == ("restart_connector", ("conn", include, only_failed))


def test_restart_flags_use_java_boolean_parsing(client: AppClient, herder: FakeHerder) -> None:
    # Boolean.valueOf("yes") is false, so this is the legacy call, not a 400 or 422.
    response = client.post("/connectors/conn/restart?includeTasks=yes")
    assert response.status_code == 204
    assert herder.calls[-1] == ("restart_connector", ("conn", False, False))


def test_restart_task_204(client: AppClient, herder: FakeHerder) -> None:
    response = client.post("/connectors/conn/tasks/0/restart")
    assert response.status_code == 204
    assert herder.calls[-1] == ("restart_task", ("conn", 0))


@pytest.mark.parametrize(("action", "code", "state"), [("pause", 202, "PAUSED"),
                                                       ("resume", 202, "RUNNING"),
                                                       ("stop", 204, "STOPPED")])
def test_pause_resume_stop(client: AppClient, action: str, code: int, state: str) -> None:
    response = client.put(f"/connectors/conn/{action}")
    assert response.status_code == code
    assert response.content == b""
    assert client.get("/connectors/conn/status").json()["connector"]["state"] == state


# -- plugins ------------------------------------------------------------------------


def test_list_plugins_defaults_to_connectors_only(client: AppClient) -> None:
    response = client.get("/connector-plugins")
    assert response.status_code == 200
    assert response.json() == [{"class": SEQUENCE_CLASS, "type": "source", "version": "0.1.0"}]


def test_list_all_plugins(client: AppClient) -> None:
    body = client.get("/connector-plugins?connectorsOnly=false").json()
    assert [p["type"] for p in body] == ["source", "transformation"]


def test_plugin_config(client: AppClient) -> None:
    response = client.get("/connector-plugins/SequenceSourceConnector/config")
    assert response.status_code == 200
    assert response.json()[0]["name"] == "topic"


def test_validate_sets_connector_class_when_absent(client: AppClient,
                                                   herder: FakeHerder) -> None:
    response = client.put("/connector-plugins/SequenceSourceConnector/config/validate",
                          json={"topic": "out"})
    assert response.status_code == 200
    assert response.json()["error_count"] == 0
    assert herder.calls[-1] == ("validate_connector_config",
                                ("SequenceSourceConnector",
                                 {"topic": "out", "connector.class": "SequenceSourceConnector"}))


def test_validate_with_errors_is_still_200(client: AppClient) -> None:
    response = client.put("/connector-plugins/SequenceSourceConnector/config/validate",
                          json={"connector.class": SEQUENCE_CLASS})
    assert response.status_code == 200
    assert response.json()["error_count"] == 1


@pytest.mark.parametrize("plugin", ["SequenceSourceConnector", "SequenceSource",
                                    SEQUENCE_CLASS])
def test_validate_accepts_aliases_of_the_included_class(client: AppClient, plugin: str) -> None:
    response = client.put(f"/connector-plugins/{plugin}/config/validate",
                          json={"connector.class": SEQUENCE_CLASS, "topic": "t"})
    assert response.status_code == 200


def test_trailing_slash_routes_like_without_it(client: AppClient) -> None:
    # JAX-RS matches "/connectors/" as "/connectors"; no redirect for clients to follow.
    assert client.get("/connectors/").json() == ["conn"]
    response = client.post("/connectors/", json={"name": "slash", "config": CONFIG})
    assert response.status_code == 201
    assert client.get("/connectors/slash/status/").status_code == 200
