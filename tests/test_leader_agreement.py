"""The one leader agreement of the test support package (``support.cluster``).

Every suite that needs "the leader" (the e2e ``Cluster``, the partition
suite's ``Lab``, the Kubernetes tests) decides through ``agreed_leader``; a
wrong answer there makes a fault test kill or cut the wrong worker.
"""

from __future__ import annotations

from support.cluster import LeaderView, agreed_leader

A, B, C = "http://10.0.0.1:8083", "http://10.0.0.2:8083", "http://10.0.0.3:8083"


def test_every_worker_naming_one_leader_that_says_it_leads_is_agreed() -> None:
    views = {A: LeaderView(B, False), B: LeaderView(B, True), C: LeaderView(B, False)}
    assert agreed_leader(views) == B


def test_a_cut_off_worker_that_still_says_it_leads_is_refused() -> None:
    # A was cut off from the broker: it has not heard that the group moved on,
    # and still says it leads. B and C elected B.
    views = {A: LeaderView(A, True), B: LeaderView(B, True), C: LeaderView(B, False)}
    assert agreed_leader(views) is None
    # Asked without the cut-off worker, the rest agree on B.
    assert agreed_leader({B: views[B], C: views[C]}) == B
    # A worker named by the others but not asked is not agreed: only its own
    # answer says whether it still leads.
    assert agreed_leader({C: LeaderView(A, False)}) is None


def test_a_leader_named_by_all_but_not_leading_itself_is_not_agreed() -> None:
    # The followers still name the old leader, which has stepped down.
    views = {A: LeaderView(A, False), B: LeaderView(A, False), C: LeaderView(A, False)}
    assert agreed_leader(views) is None


def test_a_worker_that_does_not_answer_or_knows_no_leader_blocks_agreement() -> None:
    assert agreed_leader({A: LeaderView(A, True), B: None}) is None
    assert agreed_leader({A: LeaderView(None, False), B: LeaderView(None, False)}) is None
    assert agreed_leader({}) is None
