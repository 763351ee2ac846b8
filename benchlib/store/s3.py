"""What the workbook asks of an S3 endpoint (its own store, or the user's): a client from
the usual AWS variables, uploads, listings with sizes, signed URLs for readers without an
S3 client of their own, and the check a row runs before it reads: endpoint reachable,
keys accepted, bucket and prefix there, every shard the size its index says. Each failure
is one line naming the parameter and what was tried (exit 2, no record)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from benchlib.errors import ConfigError, UsageError

INDEX = "shards.json"  # written beside every folder of shards (benchlib.shards.write)


def parse_url(url: str) -> tuple[str, str]:
    """s3://BUCKET/PREFIX -> (bucket, prefix without slashes at its ends)."""
    if not url.startswith("s3://") or not url[5:].split("/")[0]:
        raise ConfigError("store_url", f"{url!r} is not s3://BUCKET/PREFIX")
    bucket, _, prefix = url[5:].partition("/")
    return bucket, prefix.strip("/")


def client(env: dict[str, str] | None = None, timeout_s: float = 10.0) -> Any:
    """A boto3 S3 client for the endpoint and keys in `env` (else the process's AWS_*)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UsageError("store: S3 needs boto3: pip install 'benchlib[streaming]'") from None
    env = {**os.environ, **(env or {})}
    return boto3.client(
        "s3", endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
        region_name=env.get("AWS_DEFAULT_REGION", "us-east-1"),
        config=Config(signature_version="s3v4", connect_timeout=timeout_s, read_timeout=timeout_s,
                      retries={"max_attempts": 1}, s3={"addressing_style": "path"}))


def _refusal(e: Exception, url: str, endpoint: str, key: str,
             tried: str = "listing") -> ConfigError:
    """The one line for what the endpoint said when `tried` (listing, uploading to) `url`."""
    from botocore.exceptions import ClientError, EndpointConnectionError

    if isinstance(e, EndpointConnectionError) or not isinstance(e, ClientError):
        return ConfigError("store_endpoint", f"{endpoint} does not answer (tried {tried} {url}: "
                           f"{type(e).__name__}); start it (python -m benchlib store start) "
                           "or give one that runs")
    code = e.response.get("Error", {}).get("Code", "")
    if code in ("SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "403"):
        return ConfigError("store_endpoint", f"{endpoint} refused the keys in AWS_ACCESS_KEY_ID"
                           f"/AWS_SECRET_ACCESS_KEY (key {key!r}; tried {tried} {url}: {code})")
    if code in ("NoSuchBucket", "404"):
        return ConfigError("store_url", f"{url}: bucket {parse_url(url)[0]!r} does not exist "
                           f"at {endpoint}")
    return ConfigError("store_url", f"{url} at {endpoint}: {code or e}")


def listing(url: str, env: dict[str, str] | None = None) -> dict[str, int]:
    """Every object under `url` (s3://BUCKET/PREFIX), name relative to it -> size in bytes."""
    bucket, prefix = parse_url(url)
    env = {**os.environ, **(env or {})}
    endpoint = env.get("AWS_ENDPOINT_URL", "AWS's default endpoint")
    s3 = client(env)
    found: dict[str, int] = {}
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                 Prefix=prefix + "/"):
            for obj in page.get("Contents", []):
                found[obj["Key"][len(prefix) + 1:]] = obj["Size"]
    except Exception as e:  # noqa: BLE001 - botocore's errors, named by _refusal
        raise _refusal(e, url, endpoint, env.get("AWS_ACCESS_KEY_ID", "")) from None
    return found


def check_shards(url: str, env: dict[str, str] | None = None) -> dict:
    """The shards under `url` as their index says (its `files`: name -> bytes), each there
    and whole: one line naming `store_url` for a prefix with nothing, no index, or a
    shard missing or truncated."""
    found = listing(url, env)
    endpoint = {**os.environ, **(env or {})}.get("AWS_ENDPOINT_URL", "AWS")
    if not found:
        raise ConfigError("store_url", f"{url} holds no objects at {endpoint}; `benchlib data "
                          "--shards FORMAT --store s3` uploads them")
    if INDEX not in found:
        raise ConfigError("store_url", f"{url} has no {INDEX} at {endpoint}: not a folder of "
                          "shards written by `benchlib data --shards`")
    bucket, prefix = parse_url(url)
    body = client(env).get_object(Bucket=bucket, Key=f"{prefix}/{INDEX}")["Body"].read()
    index = json.loads(body)
    check_sizes(index, found, url)
    return index


def check_sizes(index: dict, found: dict[str, int], where: str) -> None:
    """Every shard the index lists is in `found` with the size it was written with."""
    for name, size in index["files"].items():
        if name not in found:
            raise ConfigError("store_url" if where.startswith("s3://") else "path",
                              f"{where}/{name} is missing ({INDEX} lists {len(index['files'])} "
                              "shards); write them again with `benchlib data --shards`")
        if found[name] != size:
            raise ConfigError("store_url" if where.startswith("s3://") else "path",
                              f"{where}/{name} is {found[name]:,} bytes, {size:,} written: a "
                              "truncated shard; write them again with `benchlib data --shards`")


def upload(folder: Path, url: str, env: dict[str, str] | None = None) -> int:
    """Every file of `folder` to `url`, the index last (a reader that finds it finds every
    shard); the bytes sent."""
    bucket, prefix = parse_url(url)
    s3 = client(env, timeout_s=60)
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != INDEX)
    sent = 0
    try:
        for p in [*files, folder / INDEX]:
            s3.upload_file(str(p), bucket, f"{prefix}/{p.name}")
            sent += p.stat().st_size
    except Exception as e:  # noqa: BLE001 - botocore's errors, named by _refusal
        env = {**os.environ, **(env or {})}
        raise _refusal(e, url, env.get("AWS_ENDPOINT_URL", "AWS"),
                       env.get("AWS_ACCESS_KEY_ID", ""), "uploading to") from None
    return sent


def signed_urls(url: str, names: list[str], env: dict[str, str] | None = None,
                expires_s: int = 6 * 3600) -> list[str]:
    """Presigned GET URLs (SigV4) of `names` under `url`: plain HTTP for any reader."""
    bucket, prefix = parse_url(url)
    s3 = client(env)
    return [s3.generate_presigned_url("get_object", Params={"Bucket": bucket,
                                                           "Key": f"{prefix}/{n}"},
                                      ExpiresIn=expires_s) for n in names]
