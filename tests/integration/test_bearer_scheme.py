"""The bearer-token check of a real env server on loopback accepts the ``Bearer`` scheme in any
case (RFC 7235 section 2.1: the auth-scheme is case-insensitive; one or more spaces before the
credentials), and still only the exact token. The ``authorization`` metadata is written by hand
on a plain channel, as a client in another language would send it."""

from __future__ import annotations

import grpc
import pytest
from pydantic import SecretStr

from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc
from moria.security import ServerSecurity, bearer_credentials
from tests.support.servers import env_server

TOKEN = "sk-test-SECRET-1234"


async def _get_info(target: str, authorization: str) -> grpc.StatusCode:
    """The status of one GetInfo call carrying ``authorization`` metadata."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = env_service_pb2_grpc.EnvServiceStub(channel)
        try:
            await stub.GetInfo(env_pb.GetInfoRequest(), timeout=10,
                               metadata=(("authorization", authorization),))
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
async def test_the_scheme_is_case_insensitive(scheme: str) -> None:
    async with env_server(security=ServerSecurity(token=SecretStr(TOKEN))) as srv:
        assert await _get_info(srv.target, f"{scheme} {TOKEN}") == grpc.StatusCode.OK
        assert await _get_info(srv.target, f"{scheme}  {TOKEN}") == grpc.StatusCode.OK
        assert await _get_info(srv.target, f"{scheme} {TOKEN.lower()}") == (
            grpc.StatusCode.UNAUTHENTICATED)  # the token itself is case-sensitive


@pytest.mark.parametrize("authorization", [
    TOKEN, f"Basic {TOKEN}", f"Bearer{TOKEN}", f"Bearers {TOKEN}", f"bearer {TOKEN}x",
    f"bearer {TOKEN[:-1]}", "bearer ", "bearer"])
async def test_anything_else_is_refused(authorization: str) -> None:
    async with env_server(security=ServerSecurity(token=SecretStr(TOKEN))) as srv:
        assert await _get_info(srv.target, authorization) == grpc.StatusCode.UNAUTHENTICATED


def test_bearer_credentials_parses_rfc_7235_credentials() -> None:
    assert bearer_credentials(b"Bearer abc") == b"abc"
    assert bearer_credentials(b"bearer   abc") == b"abc"
    assert bearer_credentials(b"BEARER abc") == b"abc"
    assert bearer_credentials(b"Basic abc") is None
    assert bearer_credentials(b"abc") is None
