"""Keep secrets out of every output, and control characters out of terminals and pages.

A secret is recognised three ways: credentials in URLs; the shapes of known tokens (GitHub, Hugging Face,
OpenAI-style, AWS, Slack, JWT); and by value: the values of variables a package's `env` table sets and of
environment variables whose names look secret (TOKEN, SECRET, KEY, PASS, PAT, AUTH, ... as whole words of
the name split on `_`), wherever they appear. A value shorter than MIN_VALUE_CHARS characters, or one such as
`true` or `none`, is not redacted by value: it would hide every occurrence of a common word.

Imported by the pytest plugin too: nothing here imports more than the standard library's `re` and `os`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

MASK = "***"
MIN_VALUE_CHARS = 4
# A known secret cut short (pytest's truncated repr keeps its head and tail, a diff its tail) is still that secret:
# a run of at least this many characters from either end of a longer value is hidden too. Shorter runs would hide
# ordinary words that a value happens to begin or end with.
MIN_FRAGMENT_CHARS = 8
# The names of the variables a package's `env` table sets, passed to its pytest processes (comma-separated).
PACKAGE_ENV_NAMES = "PROMOTE_PACKAGE_ENV_NAMES"

# Whole words of a variable's name (split on `_`) that secret scanners treat as secret.
SECRET_WORDS = frozenset(
    {
        "TOKEN", "TOKENS", "SECRET", "SECRETS", "KEY", "KEYS", "APIKEY", "PASS", "PASSWORD", "PASSWD", "PASSPHRASE",
        "PWORD", "PAT", "AUTH", "CREDENTIAL", "CREDENTIALS", "CREDS", "PRIVATE", "API", "SESSION", "COOKIE",
        "SIGNATURE", "CERT", "BEARER", "OAUTH", "DSN",
    }
)  # fmt: skip
# Words that end a secret name when written as one word (GITHUBTOKEN, DBPASSWORD, HFTOKEN).
_SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")
# Well-known variables whose names contain such a word but whose values are not secret (and are short words
# or paths that redacting everywhere would garble output with).
_NOT_SECRET = re.compile(
    r"XDG_.*|SSH_AUTH_SOCK|DBUS_SESSION_BUS_ADDRESS|SESSION_MANAGER|DESKTOP_SESSION|GPG_AGENT_INFO|.*_ASKPASS"
)
_NUMBER = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")
_WORD = re.compile(r"[a-z]{1,12}")
_TOO_COMMON = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off"})

# scheme://user:secret@host or scheme://token@host: everything between "//" and "@" is secret.
_USERINFO = r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@"
_TOKENS = (
    # A token shape cut by a repr (`'ghp_A1b2C3d4...2M3n4O5p6Q7r8'`): its prefix, some of it, `...` and the rest.
    r"(?:gh[pousr]_|github_pat_|hf_|sk-|xox[abposr]-)[A-Za-z0-9_-]{4,}\.\.\.[A-Za-z0-9_-]*",
    r"gh[pousr]_[A-Za-z0-9]{20,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"hf_[A-Za-z0-9]{20,}",
    r"sk-[A-Za-z0-9_-]{20,}",
    r"(?:AKIA|ASIA)[A-Z0-9]{16}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
)
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(_TOKENS) + r")(?![A-Za-z0-9])")
_TOKEN_PREFIXES = ("ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "hf_", "sk-", "AKIA", "ASIA", "xox", "eyJ")
_USERINFO_RE = re.compile(_USERINFO)
# The query and fragment of a URL (`https://host/x.git?private_token=...`, `...#access_token=...`), and in them
# one parameter at a time; a parameter whose name looks secret (secret_name, or SIG, PWD) has its value hidden.
_URL_QUERY_RE = re.compile(r"://[^\s'\"<>`?#]*[?#][^\s'\"<>`]*")
_PARAM_RE = re.compile(r"(?<=[?&#;])(?P<name>[^=&#;]+)=(?P<value>[^&#;]+)")
_SECRET_PARAMS = frozenset({"SIG", "PWD", "PW"})

# C0 and C1 control characters (and DEL), except newline and tab: shown, never sent raw to a terminal or page.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_char(m: re.Match[str]) -> str:
    """A matched character as a visible `\\xNN` escape."""
    return f"\\x{ord(m.group()):02x}"


def printable(text: str) -> str:
    """`text` with every control character but newline and tab shown as `\\xNN`."""
    return CONTROL.sub(escape_char, text) if CONTROL.search(text) else text


@lru_cache(maxsize=1024)
def secret_name(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret."""
    upper = name.upper()
    if _NOT_SECRET.fullmatch(upper):
        return False
    words = [w for w in re.split(r"[^A-Z0-9]+", upper) if w]
    return any(w in SECRET_WORDS or w.endswith(_SECRET_SUFFIXES) for w in words)


def secret_param(name: str) -> bool:
    """Whether a URL query parameter's name looks like it carries a secret (`token`, `private_token`, `sig`...)."""
    return secret_name(name) or any(w in _SECRET_PARAMS for w in re.split(r"[^A-Z0-9]+", name.upper()))


def _hide_params(url: re.Match[str]) -> str:
    def one(p: re.Match[str]) -> str:
        return f"{p['name']}={MASK}" if secret_param(p["name"]) else p[0]

    return _PARAM_RE.sub(one, url[0])


def value_forms(value: str) -> set[str]:
    """The forms of a secret value to hide: as written, and as repr() and JSON show it (backslashes and quotes escaped).

    A value of several lines (a PEM key) is hidden line by line too, each line of at least MIN_VALUE_CHARS
    characters: a tool that indents or prefixes each line (pytest's `E   `) never shows the value whole.
    """
    lines = value.splitlines()
    forms: set[str] = set()
    for v in {value, *(ln.strip() for ln in lines if len(lines) > 1)}:
        if worth_redacting(v):
            forms |= {v, repr(v)[1:-1], v.replace("\\", "\\\\").replace('"', '\\"')}
    return forms


def worth_redacting(value: str) -> bool:
    """Whether `value` is long and specific enough to be redacted wherever it appears."""
    return len(value) >= MIN_VALUE_CHARS and value.strip().lower() not in _TOO_COMMON


def plain_setting(value: str) -> bool:
    """Whether a package `env` value is plainly configuration: a number, an absolute path (on one line), or a
    short lower-case word (`idle`, `report`, `metal`).

    Such values stay visible when their variable's name does not look secret: a model directory masked as
    `***` would hide which checkpoint a test needed, above all when it is missing (`'***/target'` says
    nothing of where it was looked for), and no credential is written as an absolute path. A word such as
    `idle`, masked wherever it appears, garbles every other text (`acceleration-***`), and a credential is
    not a short word of lower-case letters alone.
    """
    v = value.strip()
    if _WORD.fullmatch(v) is not None:
        return True
    return _NUMBER.fullmatch(v) is not None or (os.path.isabs(v) and "\n" not in v and " " not in v)


def environ_secrets(env: Mapping[str, str], names: Iterable[str] = ()) -> frozenset[str]:
    """The values in `env` to redact: of secret-looking names, of `names`, and of those PACKAGE_ENV_NAMES lists."""
    chosen = {*names, *(n for n in env.get(PACKAGE_ENV_NAMES, "").split(",") if n)}
    return frozenset(
        v for k, v in env.items() if worth_redacting(v) and (secret_name(k) or (k in chosen and not plain_setting(v)))
    )


class Redactor:
    """Redacts URL credentials, token shapes and the given secret values from text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for v in values:
            forms |= value_forms(v)
        self.values = frozenset(values)
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        self._literal = re.compile("|".join(re.escape(v) for v in self._forms)) if forms else None
        # Not a value that is a path: its head is every other path's head too (`/tmp/pyt...`), and a path cut
        # short gives away nothing a credential would. The whole value is still hidden wherever it appears.
        self._fragments = tuple(v for v in self._forms if len(v) > MIN_FRAGMENT_CHARS and not _path_like(v))

    def search(self, text: str) -> bool:
        """Whether `text` holds anything to redact."""
        # Substring tests first: a regex tried at every position of a large results file costs ~15x more.
        if any(v in text for v in self._forms):
            return True
        if any(v[:MIN_FRAGMENT_CHARS] in text or v[-MIN_FRAGMENT_CHARS:] in text for v in self._fragments):
            return True
        if "://" in text and (_USERINFO_RE.search(text) or _URL_QUERY_RE.sub(_hide_params, text) != text):
            return True
        return any(p in text for p in _TOKEN_PREFIXES) and _TOKEN_RE.search(text) is not None

    def __call__(self, text: str) -> str:
        if self._literal is not None and any(v in text for v in self._forms):
            text = self._literal.sub(MASK, text)
        if self._fragments:
            text = _hide_fragments(text, self._fragments)
        if "://" in text:
            text = _USERINFO_RE.sub(rf"\g<scheme>{MASK}@", text)
            text = _URL_QUERY_RE.sub(_hide_params, text)
        if any(p in text for p in _TOKEN_PREFIXES):
            text = _TOKEN_RE.sub(MASK, text)
        return text

    def data(self, obj: Any) -> Any:
        """`obj` (JSON-like: dicts, lists, tuples, strings) with every string value redacted; keys are kept."""
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {k: self.data(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        return obj


def _path_like(value: str) -> bool:
    return value.startswith(("/", "~", "./", "../")) or (len(value) > 2 and value[1] == ":" and value[2] in "\\/")


def _hide_fragments(text: str, values: tuple[str, ...]) -> str:
    """`text` with each run of MIN_FRAGMENT_CHARS or more characters from the start or the end of a value hidden."""
    n, spans = MIN_FRAGMENT_CHARS, []
    for v in values:
        at = text.find(v[:n])
        while at != -1:  # a head: extended forward as far as the text follows the value
            end = at + n
            while end < len(text) and end - at < len(v) and text[end] == v[end - at]:
                end += 1
            spans.append((at, end))
            at = text.find(v[:n], end)
        at = text.find(v[-n:])
        while at != -1:  # a tail: extended backward likewise
            begin, k = at, len(v) - n
            while begin > 0 and k > 0 and text[begin - 1] == v[k - 1]:
                begin, k = begin - 1, k - 1
            spans.append((begin, at + n))
            at = text.find(v[-n:], at + n)
    if not spans:
        return text
    out, done = [], 0
    for begin, end in sorted(spans):
        if begin >= done:  # a span overlapping the last one only lengthens it
            out += [text[done:begin], MASK]
        done = max(done, end)
    return "".join(out) + text[done:]


_registered: set[str] = set()


def register(env: Iterable[tuple[str, str]]) -> None:
    """Add a package's `env` values to what `redact` hides in this process (plain settings only under secret names)."""
    _registered.update(v for k, v in env if worth_redacting(v) and (secret_name(k) or not plain_setting(v)))


@lru_cache(maxsize=8)
def _redactor(values: frozenset[str]) -> Redactor:
    return Redactor(values)


# The environment last read for its secrets, as os.environ keeps it (encoded), and what was found in it.
_environ_read: tuple[dict[Any, Any] | None, frozenset[str]] = (None, frozenset())


def _environ_now() -> frozenset[str]:
    """The secret values of os.environ now, read again only when the environment changed since the last read.

    The plugin asks for every test id it writes; decoding and classifying every variable each time cost
    about 200 µs a test, where comparing os.environ's own dict with a copy of it costs about one.
    """
    global _environ_read
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return environ_secrets(os.environ)
    seen, values = _environ_read
    if seen is None or seen != data:
        values = environ_secrets(os.environ)
        _environ_read = (data.copy(), values)
    return values


def current() -> Redactor:
    """The redactor for this process: registered values and the secret-looking variables of os.environ now."""
    return _redactor(_environ_now() | _registered)


def redact(text: str, values: Iterable[str] = ()) -> str:
    """`text` with URL credentials, token shapes, this process's secrets and `values` replaced by `***`."""
    extra = frozenset(values)
    return (_redactor(current().values | extra) if extra else current())(text)


def clean(text: str) -> str:
    """What may reach a terminal or a page: redacted, and with control characters shown."""
    return printable(redact(text))


def one_line(text: str) -> str:
    """`clean(text)` kept to one line, its newlines shown as `\\x0a` as every other control character is: for what
    promote prints as one line (an error, a warning, a step) holding text it did not write (a test id, a reason)."""
    return clean(text).replace("\n", "\\x0a")


# A line that begins with `::` (blanks aside: GitHub's runner trims them) is a workflow command in a GitHub Actions
# log (`::error ...`, `::add-mask::...`), whoever printed it. promote's own annotations are printed apart.
_COMMAND_LINE = re.compile(r"(\A|\n)([ \t]*):(?=:)")


def inert_lines(text: str) -> str:
    """`text` (cleaned) with no line beginning a workflow command: promote's own lines never begin with `::`, so
    the newline before such a line came inside untrusted text and is shown as `\\x0a` (at the very start, the
    first colon as `\\x3a`)."""
    return _COMMAND_LINE.sub(lambda m: f"\\x0a{m[2]}:" if m[1] else f"{m[2]}\\x3a", text)
