"""TLS settings in a Redis URL (docs/architecture.md#redis-errors): what a plain URL does
with TLS options, and the one hint for a certificate that can't be verified.

redis-py hands a URL's ``ssl_*`` options to the connection class, and a plain
(``redis://``, ``unix://``) one takes none: ``redis://host?ssl_cert_reqs=none`` raised a
TypeError from deep inside the first command. Such options only mean something to a
``rediss://`` URL, so on any other they are left out, with one warning (the caller's).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def without_tls_options(url: str) -> tuple[str, list[str]]:
    """``url`` minus its TLS options if it isn't a ``rediss://`` URL, and their names
    (none: ``url`` itself)."""
    parts = urlsplit(url)
    if parts.scheme in ("rediss", "rediss+sentinel") or not parts.query:
        return url, []
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    dropped = [name for name, _ in pairs if name.startswith("ssl")]
    if not dropped:
        return url, []
    kept = urlencode([(name, value) for name, value in pairs if not name.startswith("ssl")])
    return urlunsplit(parts._replace(query=kept)), dropped


def certificate_hint(exc: BaseException) -> str | None:
    """For an error that says the server's certificate failed verification: one line that
    names the URL parameters to use; else None. Every command gives the same."""
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" not in text and "certificate verify failed" not in text:
        return None
    reason = text.split("certificate verify failed:", 1)[-1].split("(_ssl", 1)[0].strip(" .")
    if "certificate verify failed" not in text:
        reason = ""
    return (
        f"Redis's TLS certificate can't be verified ({reason or 'certificate verify failed'}): for a "
        "self-signed certificate such as Heroku Redis's, add ?ssl_cert_reqs=none to the rediss:// URL "
        "(encrypted, but the server unverified), or give its CA with ?ssl_ca_certs=/path/to/ca.pem"
    )
