"""Secret redaction: every planted credential is taken out, lines and spans stay put, and
ordinary code is left alone."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from indexers import chunk_file, redact, secret_kinds
from tests.indexers.secrets_corpus import corpus

_TOKEN = "ghp_" + "Q8vR2mN5kL9pX3wT7yZ1aB4cD6eF0gH2jK5m"


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


def test_a_token_passed_to_a_call_is_redacted_everywhere_it_stands() -> None:
    """detect-secrets drops findings on ``x = f(...)`` lines (meant for its keyword
    plugin's ``secret = get_secret()``); a provider's token passed to a call is still
    one, and a token found beside ``NAME=`` is replaced where it stands alone too."""
    gh = "ghp_" + "Q8vR2mN5kL9pX3wT7yZ1aB4cD6eF0gH2jK5m"
    aws = "AKIA" + "Z7QK3M2XW9PLR4TB"
    calls = (f'g = Github("{gh}")\n'
             f"s3 = boto3.client('s3', aws_access_key_id='{aws}')\n"
             'engine = create_engine("postgresql://admin:s3cretPassw0rd@db/app")\n'
             'url = "postgres://admin:pw123@db.example.com/app"\n')  # fmt: skip
    got = redact(calls, "app.py").text
    assert gh not in got and aws not in got and "s3cretPassw0rd" not in got
    assert "pw123" not in got and "admin:[REDACTED:basic-auth-credentials]@" in got
    assert got.startswith('g = Github("[REDACTED:github-token]")')
    twice = redact(f"GITHUB_TOKEN={gh}\n\nclient = Client(\n    {gh!r})\n", "env.sh").text
    assert gh not in twice and twice.startswith("GITHUB_TOKEN=[REDACTED:")  # the name stays
    php = "$cfg = ['api_token' => 'Zq8vR2mN5kL9pX3wT7yZ1aB4cD6eF0g'];"
    assert "Zq8vR2mN5kL9pX3wT7yZ1aB4cD6eF0g" not in redact(php, "cfg.php").text
    for plain in ("secret = get_secret_key()\n", 'password = request.headers["x"]\n',
                  "dist.password = 'xxx'\n"):  # fmt: skip
        assert redact(plain, "a.py").text == plain


def test_ssh2_and_putty_private_keys_are_blanked() -> None:
    """RFC 4716 (SSH2) blocks and PuTTY's .ppk body are private keys as PEM's are."""
    ssh2 = ("---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: \"k\"\nP2/56wAAAi4AAAA3\n"
            "---- END SSH2 ENCRYPTED PRIVATE KEY ----\nafter = 1\n")  # fmt: skip
    got = redact(ssh2, "k.txt").text
    assert "P2/56w" not in got and got.endswith("after = 1\n") and got.count("\n") == 5
    ppk = ("PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nPublic-Lines: 1\nAAAAB3Nza\n"
           "Private-Lines: 1\nAAAAgQCsecretbody\nPrivate-MAC: 0123abcd\nafter = 1\n")  # fmt: skip
    got = redact(ppk, "deploy.txt").text
    assert "secretbody" not in got and "0123abcd" not in got and got.endswith("after = 1\n")


def test_unquoted_assignments_in_free_text_are_redacted() -> None:
    """In a note, a goal, a tool's output (no path) and in docs, shell scripts, env files
    and Dockerfiles, `KEY=value` needs no quotes: such a value is redacted when it looks
    made, each on a line, the rest of the line kept. Code keeps its unquoted names, and
    written words, placeholders and references are no secrets."""
    line = ("export AWS_SECRET_ACCESS_KEY=Zq7vN2pXr9LmT4kW8sYb3HcJ6fDa1GeUoQiR5tVy and "
            "DB_PASSWORD=Xk29fjQ8zLp3Qa, then deploy")  # fmt: skip
    for path in ("", "docs/deploy.md", "deploy.sh", "Dockerfile", ".env.local", "notes.txt"):
        got = redact(line, path).text
        assert got == ("export AWS_SECRET_ACCESS_KEY=[REDACTED:secret-keyword] and "
                       "DB_PASSWORD=[REDACTED:secret-keyword], then deploy"), path  # fmt: skip
    assert redact("password = hunter2hunter2", "").text == "password = [REDACTED:secret-keyword]"
    left = ["the password is stored in vault", "token = self.token", "if password == expected:",
            "password = get_password()", "DB_PASSWORD=changeme", "PASSWORD=${DB_PASSWORD}",
            "password: <your password>", "secret: true"]  # fmt: skip
    for text in left:
        assert redact(text, "").text == text, text
    assert redact("password = hunter2hunter2", "auth.py").text == "password = hunter2hunter2"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
@pytest.mark.parametrize("built", [True, False])
def test_a_fork_while_a_thread_holds_the_detector_lock_leaves_the_child_working(
    built: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process forked while another of its threads is inside ``redact`` (which took the
    detector's lock on every call) gets the lock held forever: its next redact hung. The
    child redacts, whether the detector was built before the fork or not."""
    from indexers import _secrets

    redact("warm up")
    if not built:
        monkeypatch.setattr(_secrets, "_detector", None)
    with _secrets._init:  # as a thread mid-redact holds it when another thread forks
        pid = os.fork()
        if pid == 0:  # the child: exits 0 once redact answers; SIGALRM kills it if it hangs
            signal.alarm(20)
            try:
                os._exit(0 if "[REDACTED" in redact(f"GITHUB_TOKEN={_TOKEN}\n").text else 2)
            finally:
                os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_authorization_header_credentials_are_redacted_and_code_is_not() -> None:
    """GitHub Actions writes its job token into .git/config as ``extraheader =
    AUTHORIZATION: basic <base64>``, which reached search through a symlink (stop 45's
    review): Basic, Token and other schemes' credentials are redacted in any file; code
    that only names the header keeps its text."""
    token = "eC1hY2Nlc3MtdG9rZW46Z2hzXzE2QzdlNDJGMjkyYzY5MTJFNzcxMGM4MzgzNDdBZTE3OEI0YQ=="
    for line, path in ((f"\textraheader = AUTHORIZATION: basic {token}", "config"),
                       ("headers = {'Authorization': 'Token 8f14e45fceea167a5a36dedd4bea2543'}",
                        "client.py"),
                       ('curl -H "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==" https://x',
                        "README.md")):  # fmt: skip
        done = redact(line, path)
        assert "[REDACTED:authorization-header]" in done.text, line
        assert not any(v in done.text for v in (token, "8f14e45fceea", "dXNlcjpw")), done.text
    for code in ('authorization = request.headers.get("Authorization")',
                 'headers["Authorization"] = f"Bearer {token}"', "authorization: Basic",
                 "The Authorization header carries the credentials."):  # fmt: skip
        assert redact(code, "app.py").text == code
    assert "authorization-header" in secret_kinds()
