"""``/connectors/<name>/offsets``: GET, PATCH (alter) and DELETE (reset), KIP-875.

Body parsing is the REST layer's job: every malformed body is a 400 naming the
field (Connect answers 500 with Jackson's message), and the herder receives
``(partition, offset)`` pairs with real JSON numbers, not their text.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_herder import FakeHerder
from rest_checks import AppClient, assert_connect_error

JSON = {"content-type": "application/json"}
GOOD = {"offsets": [{"partition": {"file": "a.txt"}, "offset": {"position": 7}},
                    {"partition": {"k": 1, "f": 1.5, "b": True, "n": None}, "offset": None}]}


def stopped(herder: FakeHerder) -> None:
    herder.stop_connector("conn")
    herder.calls.clear()


def test_alter_hands_the_herder_typed_pairs(client: AppClient, herder: FakeHerder) -> None:
    stopped(herder)
    response = client.patch("/connectors/conn/offsets", json=GOOD)
    assert response.status_code == 200
    assert response.json() == {
        "message": "The offsets for this connector have been altered successfully"}
    [(method, (name, pairs))] = herder.calls
    assert (method, name) == ("alter_connector_offsets", "conn")
    assert pairs == [({"file": "a.txt"}, {"position": 7}),
                     ({"k": 1, "f": 1.5, "b": True, "n": None}, None)]
    assert type(pairs[0][1]["position"]) is int and type(pairs[1][0]["f"]) is float


def test_reset(client: AppClient, herder: FakeHerder) -> None:
    stopped(herder)
    response = client.delete("/connectors/conn/offsets")
    assert response.status_code == 200
    assert response.json() == {
        "message": "The offsets for this connector have been reset successfully"}
    assert herder.calls == [("reset_connector_offsets", ("conn",))]


def test_running_connector_is_the_herders_400(client: AppClient) -> None:
    assert_connect_error(client.patch("/connectors/conn/offsets", json=GOOD), 400,
                         "Connector conn is not STOPPED")
    assert_connect_error(client.delete("/connectors/conn/offsets"), 400,
                         "Connector conn is not STOPPED")


def test_unknown_connector_is_404(client: AppClient) -> None:
    assert_connect_error(client.patch("/connectors/nope/offsets", json=GOOD), 404,
                         "Connector nope not found")
    assert_connect_error(client.delete("/connectors/nope/offsets"), 404,
                         "Connector nope not found")


@pytest.mark.parametrize(("body", "message"), [
    ({"offsets": []}, "Partitions / offsets need to be provided for an alter offsets request"),
    ({}, "Partitions / offsets need to be provided for an alter offsets request"),
    ({"offsets": None},
     "Partitions / offsets need to be provided for an alter offsets request"),
    ({"offsets": {"a": 1}}, "Invalid value for field 'offsets': expected an array"),
    ({"offsets": [1]}, "Invalid value for field 'offsets[0]': expected an object"),
    ({"offsets": [{"offset": {"p": 1}}]},
     "Invalid value for field 'offsets[0].partition': expected an object"),
    ({"offsets": [{"partition": None, "offset": {"p": 1}}]},
     "Invalid value for field 'offsets[0].partition': expected an object"),
    ({"offsets": [{"partition": {"a": 1}, "offset": [1]}]},
     "Invalid value for field 'offsets[0].offset': expected an object, or null"),
    ({"offsets": [{"partition": {"a": 1}, "offset": {"p": 1}, "x": 1}]},
     "Unrecognized field(s) 'x' in 'offsets[0]'; expected partition, offset"),
    ({"offsets": [{"partition": {"a": 1}}], "extra": 2},
     "Unrecognized field(s) 'extra' in request body; expected offsets"),
    ([1, 2], "Request body must be a JSON object, got an array"),
])
def test_malformed_bodies_are_400_and_never_reach_the_herder(
        client: AppClient, herder: FakeHerder, body: Any, message: str) -> None:
    stopped(herder)
    text = assert_connect_error(client.patch("/connectors/conn/offsets", json=body), 400)
    assert text.startswith(message), text
    assert herder.calls == []


def test_not_json_is_400(client: AppClient, herder: FakeHerder) -> None:
    stopped(herder)
    response = client.patch("/connectors/conn/offsets", content=b"nope", headers=JSON)
    assert_connect_error(response, 400)
    assert herder.calls == []



# -- POST /connectors with initial_offsets (KIP-995, beyond Connect 4.1) -------------

SEQ_CONFIG = {"connector.class": "SequenceSourceConnector", "topic": "out"}


def test_create_with_initial_offsets_hands_the_herder_typed_pairs(
        client: AppClient, herder: FakeHerder) -> None:
    response = client.post("/connectors", json={
        "name": "new", "config": SEQ_CONFIG, "initial_state": "paused",
        "initial_offsets": GOOD["offsets"]})
    assert response.status_code == 201, response.text
    [(method, (name, config, state, pairs))] = herder.calls
    assert (method, name, config, state) == (
        "create_connector", "new", {**SEQ_CONFIG, "name": "new"}, "PAUSED")
    assert pairs == [({"file": "a.txt"}, {"position": 7}),
                     ({"k": 1, "f": 1.5, "b": True, "n": None}, None)]
    assert type(pairs[0][1]["position"]) is int and type(pairs[1][0]["f"]) is float
    assert client.get("/connectors/new/offsets").json() == {
        "offsets": [{"partition": {"file": "a.txt"}, "offset": {"position": 7}}]}


def test_create_without_initial_offsets_passes_none(client: AppClient,
                                                     herder: FakeHerder) -> None:
    for body in ({"name": "a", "config": SEQ_CONFIG},
                 {"name": "b", "config": SEQ_CONFIG, "initial_offsets": None}):
        assert client.post("/connectors", json=body).status_code == 201
    assert [call[1][3] for call in herder.calls] == [None, None]


@pytest.mark.parametrize(("offsets", "message"), [
    ([], "Invalid value for field 'initial_offsets': expected at least one"),
    ({"a": 1}, "Invalid value for field 'initial_offsets': expected an array"),
    ([1], "Invalid value for field 'initial_offsets[0]': expected an object"),
    ([{"offset": {"p": 1}}],
     "Invalid value for field 'initial_offsets[0].partition': expected an object"),
    ([{"partition": {"a": 1}, "offset": {"p": 1}},
      {"partition": {"a": 2}, "offset": "7"}],
     "Invalid value for field 'initial_offsets[1].offset': expected an object, or null"),
    ([{"partition": {"a": 1}, "offset": {"p": 1}, "position": 3}],
     "Unrecognized field(s) 'position' in 'initial_offsets[0]'; expected partition, offset"),
])
def test_create_with_malformed_initial_offsets_is_400_and_creates_nothing(
        client: AppClient, herder: FakeHerder, offsets: Any, message: str) -> None:
    response = client.post("/connectors", json={"name": "new", "config": SEQ_CONFIG,
                                                "initial_offsets": offsets})
    text = assert_connect_error(response, 400)
    assert text.startswith(message), text
    assert herder.calls == []
    assert_connect_error(client.get("/connectors/new"), 404)


def test_create_with_offsets_the_connector_refuses_is_400_and_creates_nothing(
        client: AppClient) -> None:
    response = client.post("/connectors", json={
        "name": "new", "config": SEQ_CONFIG,
        "initial_offsets": [{"partition": {"refuse": 1}, "offset": {"p": 1}}]})
    text = assert_connect_error(response, 400)
    assert "'initial_offsets'" in text and "refused" in text, text
    assert_connect_error(client.get("/connectors/new"), 404)

