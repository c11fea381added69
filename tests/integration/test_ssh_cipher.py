"""The cipher fleet asks a real sshd for: AES-GCM first (cheapest per packet in asyncssh), and
still whatever modern cipher a stricter server allows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fleet.transport.ssh import SSHOptions, SSHTransport
from tests.integration.conftest import ssh_target
from tests.integration.sshd import SshdFarm

pytestmark = pytest.mark.integration


def negotiated_cipher(farm: SshdFarm, name: str, tmp_path: Path) -> str:
    host = ssh_target(farm, name, tmp_path)

    async def connect() -> str:
        transport = SSHTransport(SSHOptions())
        conn = await transport.connect(host)
        try:
            return str(conn.get_extra_info("send_cipher"))
        finally:
            conn.abort()
            await transport.close()

    return asyncio.run(connect())


def test_aes_gcm_is_preferred(farm: SshdFarm, tmp_path: Path) -> None:
    farm.start("cipher-default", "127.0.11.1")
    assert negotiated_cipher(farm, "cipher-default", tmp_path) == "aes128-gcm@openssh.com"


def test_a_server_without_aes_gcm_still_gets_a_modern_cipher(
    farm: SshdFarm, tmp_path: Path
) -> None:
    farm.start("cipher-chacha", "127.0.11.2", Ciphers="chacha20-poly1305@openssh.com")
    assert negotiated_cipher(farm, "cipher-chacha", tmp_path) == "chacha20-poly1305@openssh.com"
