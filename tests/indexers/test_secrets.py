"""Secret redaction: every planted credential is taken out, lines and spans stay put, and
ordinary code is left alone."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexers import _secrets, chunk_file, redact, secret_kinds
from indexers._secrets import _get, _slug
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


def _reference_scan(path: str, line: str) -> list[tuple[str, str]]:
    """detect-secrets' own line scan with every plugin, as redaction ran it before."""
    from detect_secrets.core.scan import _process_line_based_plugins

    detector = _get()
    with detector.lock:
        found = list(_process_line_based_plugins([(1, line)], path or "text"))
    indirect = any(s.type == "Secret Keyword" for s in found) and detector.indirect(line)
    return [(s.type, s.secret_value or "") for s in found
            if not (indirect and s.type == "Secret Keyword")]  # fmt: skip


def test_the_plugins_skipped_on_a_line_could_not_have_found_anything_there() -> None:
    """Running only the plugins whose patterns a line matches finds exactly what running
    all of them finds: on every line of the planted corpus and on keyword, quoted and
    entropy lines, read as code, as free text and as configuration."""
    files, _ = corpus()
    lines = {line for text in files.values() for line in text.split("\n")}
    lines |= {"password=x", "password = 'Xk29fjQ8zLp3Qa'", 'db_pass: "hunter2hunter2"',
              "token = 'deadbeefcafe0123456789abcdef'", "api_key=AKIAQ7WZ4XK2PLM3N8VB",
              "secret: true", "my_password == 'abc'", "x = 'Zq8vR2mN5kL9pX3wT7yZ1aB4cD6eF0g'"}
    detector = _get()
    for path in ("", "a.py", "text.ini", "conf.yaml", "main.go", "Dockerfile"):
        for line in sorted(lines):
            expected = sorted((_slug(t), v) for t, v in _reference_scan(path, line))
            assert sorted(detector.scan(path, line)) == expected, (path, line)


def test_keyword_dense_text_is_scanned_once_per_distinct_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """70,000 lines of `password=x` took 36 s: every line ran every detect-secrets plugin,
    twice. A line's findings depend on its text alone, so a repeated line is scanned once,
    and a plugin runs only where its patterns match."""
    import detect_secrets.core.scan as ds_scan

    runs = Counter[str]()
    real = ds_scan._scan_line

    def counted(**kwargs: Any) -> Any:
        runs[type(kwargs["plugin"]).__name__] += 1
        return real(**kwargs)

    monkeypatch.setattr(ds_scan, "_scan_line", counted)
    assert redact("password=x\n" * 2000).redactions == ()
    assert sum(runs.values()) <= 4, runs
    runs.clear()
    got = redact("".join(f"password=x{i}\npassword=Xk29fjQ8{i:04d}\n" for i in range(200)))
    assert len(got.redactions) == 200 and "Xk29fjQ8" not in got.text
    assert runs.keys() == {"KeywordDetector"} and sum(runs.values()) <= 5 * 400, runs


def test_many_distinct_secrets_are_replaced_in_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each value found was replaced by its own pass over every line: 20,000 distinct
    secrets meant 400 million substring checks. One pass replaces them all."""
    values = [f"Xk29fjQ8{i:07d}" for i in range(20_000)]
    text = "".join(f"password={v}\n" for v in values)
    found = {f"password={v}": [("secret-keyword", v)] for v in values}
    monkeypatch.setattr(_secrets, "_findings", lambda _d, _p, line: found.get(line, []))
    started = time.perf_counter()
    got = redact(text)
    assert time.perf_counter() - started < 5  # ~0.2 s; the old loop took minutes
    assert got.text == "password=[REDACTED:secret-keyword]\n" * 20_000


def _covered(text: str, values: dict[str, str]) -> str:
    """The plain reference: every occurrence found by trying each value at each position;
    occurrences that overlap one another, directly or through others, make one group,
    written as one marker named for its longest (the leftmost of equals)."""
    found = sorted((i, i + len(v), v) for v in values for i in range(len(text))
                   if text.startswith(v, i))  # fmt: skip
    groups: list[list[tuple[int, int, str]]] = []
    for hit in found:
        if groups and any(hit[0] < end for _, end, _ in groups[-1]):
            groups[-1].append(hit)
        else:
            groups.append([hit])
    out, at = [], 0
    for group in groups:
        best = max(group, key=lambda h: (len(h[2]), -h[0]))[2]
        out += [text[at : group[0][0]], f"[REDACTED:{values[best]}]"]
        at = max(end for _, end, _ in group)
    return "".join(out) + text[at:]


@given(st.text("abc\n", max_size=40), st.lists(st.text("abc", min_size=1, max_size=5), max_size=6))
def test_every_occurrence_of_every_value_is_covered(text: str, found: list[str]) -> None:
    """Every character of every occurrence of every value is covered, overlapping
    occurrences by one marker named for the longest, as a plain scan does it."""
    values = {v: f"k{len(v)}" for v in found}
    got = _secrets._replace_values(text, values)
    assert got == _covered(text, values)
    assert not any(v in got for v in values)


def test_overlapping_values_leave_no_part_of_either() -> None:
    """A short value found first must not leave the tail of a longer one it overlaps."""
    got = _secrets._replace_values("key=XYZ123456789;", {"key=XYZ": "a", "XYZ123456789": "b"})
    assert got == "[REDACTED:b];"
