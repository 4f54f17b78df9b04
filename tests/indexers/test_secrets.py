"""Secret redaction: every planted credential is taken out, lines and spans stay put, and
ordinary code is left alone."""

from __future__ import annotations

from collections import Counter

from indexers import chunk_file, redact, secret_kinds
from tests.indexers.secrets_corpus import corpus


def test_every_planted_secret_is_redacted() -> None:
    """85 realistic credentials of 17 kinds in ordinary files: none survives redaction."""
    files, planted = corpus()
    assert len(planted) >= 60 and len({p.kind for p in planted}) >= 12
    cleaned = {path: redact(text, path) for path, text in files.items()}
    missed = [p for p in planted if p.value in cleaned[p.path].text]
    assert not missed, missed
    for path, text in files.items():
        assert cleaned[path].text.count("\n") == text.count("\n"), path  # no line moves
        assert "[REDACTED:" in cleaned[path].text


def test_redaction_keeps_spans_and_counts_kinds() -> None:
    """A chunk keeps its lines; the file says what was taken out, by kind."""
    text = ('import boto3\n\nKEY = "AKIAQ7WZ4XK2PLM3N8VB"\n\n\ndef client():\n'
            "    return boto3.client('s3', aws_access_key_id=KEY)\n")  # fmt: skip
    plain = chunk_file("s3.py", text.replace("AKIAQ7WZ4XK2PLM3N8VB", "x").encode())
    cf = chunk_file("s3.py", text.encode())
    assert [c.span for c in cf.chunks] == [c.span for c in plain.chunks]
    assert all("AKIAQ7WZ4XK2PLM3N8VB" not in c.text for c in cf.chunks)
    assert "AKIAQ7WZ4XK2PLM3N8VB" not in cf.text
    assert Counter(r.kind for r in cf.redactions) == {"aws-access-key": 1}
    assert "aws-access-key" in secret_kinds() and "private-key-block" in secret_kinds()


def test_private_key_blocks_are_blanked_to_their_end() -> None:
    """A PEM block is blanked through its END line; one in JSON (escaped newlines) too."""
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\nqrs123\n-----END RSA PRIVATE KEY-----"
    got = redact(f"key = '''\n{pem}\n'''\nafter = 1\n", "k.py").text
    assert "MIIE" not in got and "qrs123" not in got and "after = 1" in got
    assert got.count("\n") == 7
    one = '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQ\\n-----END PRIVATE KEY-----\\n"}'
    assert "MIIEvQ" not in redact(one, "sa.json").text


def test_ordinary_code_is_left_alone() -> None:
    """Identifiers, URLs without credentials, prose about passwords and alphabet tables
    (high entropy, but a charset) are not secrets."""
    text = (
        "def check_password(user, password):\n"
        '    """Compare the password with the stored hash."""\n'
        "    return verify(user.password_hash, password)\n\n"
        'URL = "https://docs.python.org/3/library/secrets.html"\n'
        "MAX_RETRIES = 3\n"
        "_b32alphabet = b'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'\n"
        'characters = "abcdefghijklmnopqrstuvwxyz0123456789_"\n'
    )
    assert redact(text, "auth.py").text == text
