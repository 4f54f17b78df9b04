"""A corpus of realistic credentials placed in ordinary files, generated (seeded) so that no
real secret is ever committed: each value has its provider's shape and random content."""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

__all__ = ["Planted", "corpus"]

_B62 = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Planted:
    """A secret placed in a file: its kind, the file, and the exact value planted."""

    kind: str
    path: str
    value: str


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _pem(rng: random.Random, label: str) -> str:
    body = "\n".join(_r(rng, _B62 + "+/", 64) for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def corpus(seed: int = 7, per_kind: int = 5) -> tuple[dict[str, str], list[Planted]]:
    """Files (path -> text) holding ``per_kind`` secrets of each of 16 kinds, and the
    planted values. Every file also holds ordinary code around the secret."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    planted: list[Planted] = []

    def place(kind: str, path: str, value: str, text: str) -> None:
        files[path] = text
        planted.append(Planted(kind, path, value))

    for i in range(per_kind):
        key_id = "AKIA" + _r(rng, string.ascii_uppercase + string.digits, 16)
        secret = _r(rng, _B62 + "/+", 40)
        place("aws-access-key", f"app{i}/settings.py", key_id,
              f'import os\n\nDEBUG = False\nAWS_ACCESS_KEY_ID = "{key_id}"\n'
              f'AWS_SECRET_ACCESS_KEY = "{secret}"\nBUCKET = "uploads-{i}"\n\n'
              f"def s3_client():\n    return make_client(AWS_ACCESS_KEY_ID)\n")  # fmt: skip
        planted.append(Planted("aws-secret-key", f"app{i}/settings.py", secret))

        token = "ghp_" + _r(rng, _B62, 36)
        place("github-token", f"web{i}/config.js", token,
              f'const api = require("./api");\nmodule.exports = {{\n  owner: "acme",\n'
              f'  token: "{token}",\n  retries: 3,\n}};\n')  # fmt: skip

        glpat = "glpat-" + _r(rng, _B62, 20)
        place("gitlab-token", f"ci{i}/deploy.sh", glpat,
              f'#!/bin/sh\nset -e\nexport CI_TOKEN="{glpat}"\ncurl -H "PRIVATE-TOKEN: $CI_TOKEN" '
              f"https://gitlab.example.com/api/v4/projects\n")  # fmt: skip

        slack = f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-" + _r(
            rng, string.ascii_lowercase + string.digits, 24
        )
        place("slack-token", f"bot{i}/slack.ts", slack,
              f'import {{ WebClient }} from "@slack/web-api";\n\nconst SLACK_BOT_TOKEN = '
              f'"{slack}";\nexport const client = new WebClient(SLACK_BOT_TOKEN);\n')  # fmt: skip

        hook = ("https://hooks.slack.com/services/T" + _r(rng, string.ascii_uppercase, 8)
                + "/B" + _r(rng, string.ascii_uppercase, 8) + "/" + _r(rng, _B62, 24))  # fmt: skip
        place("slack-webhook", f"alerts{i}/notify.go", hook,
              f'package alerts\n\nconst webhookURL = "{hook}"\n\nfunc Notify(msg string) '
              f"error {{\n\treturn post(webhookURL, msg)\n}}\n")  # fmt: skip

        stripe = "sk_live_" + _r(rng, _B62, 24)
        place("stripe-access-key", f"billing{i}/payments.py", stripe,
              f'STRIPE_API_KEY = "{stripe}"\n\n\ndef charge(amount):\n'
              f"    return stripe_call(STRIPE_API_KEY, amount)\n")  # fmt: skip

        sendgrid = "SG." + _r(rng, _B62, 22) + "." + _r(rng, _B62, 43)
        place("sendgrid-api-key", f"mail{i}/mailer.rb", sendgrid,
              f'class Mailer\n  API_KEY = "{sendgrid}"\n  def deliver(msg)\n'
              f"    send_with(API_KEY, msg)\n  end\nend\n")  # fmt: skip

        twilio = "SK" + _r(rng, _HEX, 32)
        place("twilio-api-key", f"sms{i}/twilio.yaml", twilio,
              f"twilio:\n  account: main\n  api_key: {twilio}\n  region: us1\n")  # fmt: skip

        npm = "npm_" + _r(rng, _B62, 36)
        place("npm-token", f"pkg{i}/publish.cfg", npm,
              f"[publish]\nregistry = https://registry.npmjs.org/\n"
              f"//registry.npmjs.org/:_authToken={npm}\nalways-auth = true\n")  # fmt: skip

        sub = _r(rng, string.digits, 10)
        claims = json.dumps({"sub": sub, "name": "demo", "iat": 1700000000 + i})
        jwt = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + _b64url(claims) + "."
               + _r(rng, _B62 + "-_", 43))  # fmt: skip
        place("json-web-token", f"auth{i}/session_test_data.json", jwt,
              f'{{\n  "user": "demo",\n  "session": "{jwt}",\n  "ttl": 3600\n}}\n')  # fmt: skip

        pem = _pem(rng, "RSA PRIVATE KEY" if i % 2 else "OPENSSH PRIVATE KEY")
        body = pem.split("\n")[3]
        place("private-key", f"docs{i}/setup.md", body,
              f"# Setting up the deploy key\n\nPaste this into `~/.ssh/deploy`:\n\n"
              f"```\n{pem}\n```\n\nThen run `make deploy`.\n")  # fmt: skip

        password = _r(rng, _B62, 10) + "!" + _r(rng, _B62, 4)
        place("password", f"db{i}/database.yaml", password,
              f'database:\n  host: db.internal\n  user: app\n  password: "{password}"\n'
              f"  pool: 5\n")  # fmt: skip

        url_pw = _r(rng, _B62, 14)
        url = f"postgres://app:{url_pw}@db{i}.example.com:5432/main"
        place("basic-auth", f"svc{i}/db.py", url_pw,
              f'DATABASE_URL = "{url}"\n\n\ndef connect():\n    return engine(DATABASE_URL)\n')

        sa_key = _pem(rng, "PRIVATE KEY").replace("\n", "\\n")
        sa_body = sa_key.split("\\n")[2]
        sa = (f'{{\n  "type": "service_account",\n  "project_id": "proj-{i}",\n'
              f'  "private_key_id": "{_r(rng, _HEX, 40)}",\n  "private_key": "{sa_key}\\n",\n'
              f'  "client_email": "svc@proj-{i}.iam.gserviceaccount.com"\n}}\n')  # fmt: skip
        place("gcp-service-account", f"gcp{i}/service-account.json", sa_body, sa)

        openai = "sk-" + _r(rng, _B62, 20) + "T3BlbkFJ" + _r(rng, _B62, 20)
        place("openai-token", f"llm{i}/client.py", openai,
              f'OPENAI_KEY = "{openai}"\n\n\ndef complete(prompt):\n'
              f"    return call_model(OPENAI_KEY, prompt)\n")  # fmt: skip

        account_key = _r(rng, _B62 + "+/", 86) + "=="
        azure = (f"DefaultEndpointsProtocol=https;AccountName=store{i};AccountKey={account_key}"
                 ";EndpointSuffix=core.windows.net")  # fmt: skip
        azure_key = azure.split("AccountKey=")[1].split(";")[0]
        place("azure-storage-key", f"storage{i}/appsettings.toml", azure_key,
              f'[storage]\nconnection = "{azure}"\ncontainer = "blobs"\n')
    return files, planted
