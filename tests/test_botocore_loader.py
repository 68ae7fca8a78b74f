"""One botocore data loader per process: Beam's s3:// makes a boto3 session per file operation,
and each used to parse botocore's S3 model again (about 0.4 s each)."""

from __future__ import annotations

import boto3
import botocore.session
from trajforge.schemas import storage  # noqa: F401  (importing it shares the loader)
from trajforge.schemas.botocore_loader import share_botocore_loader


def _loader(session: boto3.session.Session):
    return session._session.get_component("data_loader")


def test_every_session_gets_the_one_loader_and_clients_still_build():
    first, second = boto3.session.Session(), boto3.session.Session()
    assert _loader(first) is _loader(second)
    share_botocore_loader()  # again: still the one cached factory, not a cache of a cache
    assert _loader(boto3.session.Session()) is _loader(first)
    assert not hasattr(botocore.session.create_loader.__wrapped__, "cache_info")
    client = second.client(
        "s3", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s",
        endpoint_url="http://127.0.0.1:9",
    )  # fmt: skip
    assert client.meta.service_model.service_name == "s3"
    assert "PutObject" in client.meta.service_model.operation_names
    # A different data path is a loader of its own: the cache is keyed by it.
    other = botocore.session.create_loader("/nonexistent-data-path")
    assert other is not _loader(first)
    assert other is botocore.session.create_loader("/nonexistent-data-path")
