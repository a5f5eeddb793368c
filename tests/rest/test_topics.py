"""``/connectors/<name>/topics`` and ``/topics/reset`` (KIP-558), with Connect 4.1.1's codes.

Every expectation here was measured on a Connect 4.1.1 worker (see
``connect_runtime.rest.routes.topics``).
"""

from __future__ import annotations

from fake_herder import FakeHerder
from rest_checks import AppClient, assert_connect_error

from connect_runtime.cluster.herder_api import TopicTracking
from connect_runtime.errors import KafkaTimeoutError


def test_get_answers_connects_shape(client: AppClient, herder: FakeHerder) -> None:
    herder.active_topics["conn"] = {"orders", "audit"}
    response = client.get("/connectors/conn/topics")
    assert response.status_code == 200
    assert response.json() == {"conn": {"topics": ["audit", "orders"]}}


def test_unknown_connector_has_no_topics_not_a_404(client: AppClient) -> None:
    response = client.get("/connectors/nope/topics")
    assert response.status_code == 200
    assert response.json() == {"nope": {"topics": []}}


def test_reset_is_202_without_body(client: AppClient, herder: FakeHerder) -> None:
    herder.active_topics["conn"] = {"orders"}
    response = client.put("/connectors/conn/topics/reset")
    assert response.status_code == 202
    assert response.content == b""
    assert ("reset_connector_active_topics", ("conn",)) in herder.calls
    assert client.get("/connectors/conn/topics").json() == {"conn": {"topics": []}}


def test_reset_of_unknown_connector_is_202(client: AppClient) -> None:
    assert client.put("/connectors/nope/topics/reset").status_code == 202


def test_any_worker_serves_both(herder: FakeHerder, client: AppClient) -> None:
    """Connect does not forward these to the leader: they read and write the status topic."""
    herder.is_leader, herder.leader_url = False, "http://leader:8083"
    herder.active_topics["conn"] = {"orders"}
    assert client.get("/connectors/conn/topics").json() == {"conn": {"topics": ["orders"]}}
    assert client.put("/connectors/conn/topics/reset").status_code == 202


def test_tracking_disabled_is_403(client: AppClient, herder: FakeHerder) -> None:
    herder.tracking = TopicTracking(enabled=False, allow_reset=True)
    for response in (client.get("/connectors/conn/topics"),
                     client.put("/connectors/conn/topics/reset")):
        assert_connect_error(response, 403)
        assert response.json()["message"] == "Topic tracking is disabled."
    assert not any(m in ("connector_active_topics", "reset_connector_active_topics")
                   for m, _ in herder.calls)


def test_reset_disallowed_is_403_but_get_works(client: AppClient, herder: FakeHerder) -> None:
    herder.tracking = TopicTracking(enabled=True, allow_reset=False)
    herder.active_topics["conn"] = {"orders"}
    response = client.put("/connectors/conn/topics/reset")
    assert_connect_error(response, 403)
    assert response.json()["message"] == "Topic tracking reset is disabled."
    assert herder.active_topics["conn"] == {"orders"}
    assert client.get("/connectors/conn/topics").status_code == 200


def test_wrong_methods_and_media_types(client: AppClient) -> None:
    assert_connect_error(client.delete("/connectors/conn/topics"), 405,
                         "HTTP 405 Method Not Allowed")
    assert_connect_error(client.get("/connectors/conn/topics/reset"), 405,
                         "HTTP 405 Method Not Allowed")
    assert_connect_error(client.post("/connectors/conn/topics/reset"), 405)
    text = {"content-type": "text/plain"}
    assert_connect_error(client.get("/connectors/conn/topics", headers=text), 415)
    assert_connect_error(client.put("/connectors/conn/topics/reset", headers=text), 415)


def test_trailing_slash_is_the_same_route(client: AppClient, herder: FakeHerder) -> None:
    herder.active_topics["conn"] = {"orders"}
    assert client.get("/connectors/conn/topics/").json() == {"conn": {"topics": ["orders"]}}


def test_herder_error_keeps_connects_body(client: AppClient, herder: FakeHerder) -> None:
    herder.fail["reset_connector_active_topics"] = KafkaTimeoutError("status write timed out")
    assert_connect_error(client.put("/connectors/conn/topics/reset"), 500,
                         "status write timed out")


def test_openapi_documents_the_routes(client: AppClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/connectors/{name}/topics"]) == {"get"}
    assert set(paths["/connectors/{name}/topics/reset"]) == {"put"}
    reset = paths["/connectors/{name}/topics/reset"]["put"]
    assert set(reset["responses"]) == {"202", "400", "403", "415"}
