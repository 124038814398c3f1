"""Which of etcd's refusals void the auth token a request carried (a new one is asked for,
once), and which are about the request or the user (no new token helps: the call fails)."""

from __future__ import annotations

import pytest

from resource_extend.ledger.etcd.kept import token_refused


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("unauthenticated", "etcdserver: invalid auth token"),
        ("invalid_argument", "etcdserver: revision of auth store is old"),  # 3.4, a JWT
        ("invalid_argument", "auth: revision in header is old"),  # 3.5
        ("invalid_argument", "etcdserver: user name is empty"),
    ],
)
def test_a_token_etcd_voided_is_asked_for_again(code: str, message: str) -> None:
    assert token_refused(code, message)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("invalid_argument", "etcdserver: authentication failed, invalid user ID or password"),
        ("permission_denied", "etcdserver: permission denied"),
        ("invalid_argument", "etcdserver: duplicate key given in txn request"),
        ("failed_precondition", "etcdserver: authentication is not enabled"),
    ],
)
def test_a_refusal_of_the_user_or_the_request_is_not_a_token_s(code: str, message: str) -> None:
    """A wrong password, a role without the prefix: asking again would only ask again."""
    assert not token_refused(code, message)
