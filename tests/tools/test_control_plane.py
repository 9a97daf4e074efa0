"""tools/control_plane.py without binaries: a control plane started again on its kept work dir
(`make up`) keeps its CA, service-account key and port, so etcd's objects and the kubeconfigs
handed out stay valid."""

from __future__ import annotations

import datetime
import socket

from cryptography.hazmat.primitives import serialization

from tools.control_plane import CertAuthority, _service_account_keypair, kept_port


def test_a_kept_ca_is_loaded_not_replaced(tmp_path):
    first = CertAuthority(tmp_path)
    again = CertAuthority(tmp_path)

    assert again.cert == first.cert
    client_cert, _ = again.client_cert("admin", ["system:masters"])
    assert client_cert.is_file()   # leaves are signed by the kept key


def test_a_ca_about_to_expire_is_replaced(tmp_path):
    first = CertAuthority(tmp_path)
    first._now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=2)
    old = first._builder(first.cert.subject, first.cert.subject, first.key.public_key()).sign(first.key, first.cert.signature_hash_algorithm)
    first.cert_path.write_bytes(old.public_bytes(serialization.Encoding.PEM))   # valid for 5 more minutes

    assert CertAuthority(tmp_path).cert != old


def test_the_service_account_key_is_kept(tmp_path):
    key, _ = _service_account_keypair(tmp_path)
    before = key.read_bytes()

    assert _service_account_keypair(tmp_path)[0].read_bytes() == before


def test_the_port_is_kept_while_free_and_replaced_when_taken(tmp_path):
    port = kept_port(tmp_path / "port")
    assert kept_port(tmp_path / "port") == port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        other = kept_port(tmp_path / "port")
    assert other != port and (tmp_path / "port").read_text() == f"{other}\n"
