"""The generated reference pages, read from the code itself: the command lines (from their
argparse parsers), every setting and environment variable (from ``Config`` and the modules
that read the environment) and every Redis key (from ``cogworker.keys.Keys``).

docs/hooks.py hands them to MkDocs as pages at build time, so they can't drift from the
code; tests/test_docs_reference.py checks what they list against the code too.

    python3 docs/refgen.py cli|settings|keys   # prints one page's Markdown
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cogworker"
ENV_RE = re.compile(r"[\"']((?:COGWORKER_[A-Z_]+)|REDIS_URL|WEB_CONCURRENCY)[\"']")

# -- the command lines --------------------------------------------------------------------------


ARCH_RE = re.compile(r"docs/architecture\.md#([a-z0-9-]+)")


def _cell(text: str | None) -> str:
    """One table cell: pipes escaped, and the design's anchors cited in comments made links."""
    text = (text or "").replace("|", "\\|").replace("\n", " ")
    return ARCH_RE.sub(r"[design: \1](../architecture.md#\1)", text)


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | what it does | default |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += f" {action.metavar or action.dest.upper()}"
        else:
            name = str(action.metavar or action.dest)
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
        help_text = (action.help or "") % {"default": default} if action.help else ""
        rows.append(f"| `{name}` | {_cell(help_text)} | {shown} |")
    return rows


def _parser_section(title: str, parser: argparse.ArgumentParser, level: str = "##") -> list[str]:
    lines = [f"{level} `{title}`", ""]
    if parser.description:
        lines += [parser.description, ""]
    lines += ["```", parser.format_usage().removeprefix("usage: ").rstrip(), "```", ""]
    lines += _options_table(parser)
    if parser.epilog:
        lines += ["", parser.epilog]
    return lines + [""]


def cli_page() -> str:
    from cogworker.cli.parser import build_parser as cli_parser
    from cogworker.prefork.cli import build_parser as prefork_parser
    from cogworker.worker.runner import build_parser as worker_parser

    lines = [
        "# Command line",
        "",
        "Generated from the commands' own argparse parsers when the site is built, so it lists",
        "exactly what they accept. The [CLI guide](../guides/cli.md) shows them at work.",
        "",
    ]
    lines += _parser_section("cogworker-prefork", prefork_parser())
    lines += _parser_section("cogworker worker", worker_parser("cogworker worker"))
    top = cli_parser()
    lines += _parser_section("cogworker", top)
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name == "worker":  # its own section above: the runner's parser reads its options
                    continue
                sub.description = sub.description or helps.get(name)
                lines += _parser_section(f"cogworker {name}", sub, level="###")
    return "\n".join(lines)


# -- settings and the environment ---------------------------------------------------------------


def _comments_above(source_lines: list[str], lineno: int) -> str:
    """The ``#`` comment lines right above line ``lineno`` (1-based), joined."""
    found: list[str] = []
    index = lineno - 2
    while index >= 0 and source_lines[index].strip().startswith("#"):
        found.insert(0, source_lines[index].strip().lstrip("#").strip())
        index -= 1
    return " ".join(found)


def _functions(paths: list[Path]) -> dict[str, ast.FunctionDef]:
    found: dict[str, ast.FunctionDef] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                found.setdefault(node.name, node)
    return found


def _env_of(function: ast.FunctionDef, functions: dict[str, ast.FunctionDef], seen: set[str]) -> list[str]:
    """The environment variables a default factory reads, following the calls it makes."""
    names = ENV_RE.findall(ast.unparse(function))
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in functions and callee not in seen:
                seen.add(callee)
                names += _env_of(functions[callee], functions, seen)
    return list(dict.fromkeys(names))


def config_settings() -> list[dict[str, str]]:
    """One row per field of ``cogworker.Config``: its name, type, default, the variables
    its default is read from, and the comment above it in cogworker/config.py."""
    import cogworker.config as config_module

    path = PACKAGE / "config.py"
    source = path.read_text()
    lines = source.splitlines()
    functions = _functions([path, PACKAGE / "settings.py", PACKAGE / "urls.py", PACKAGE / "layout.py"])
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    nodes = {n.target.id: n for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    rows: list[dict[str, str]] = []
    for field in dataclasses.fields(config_module.Config):
        if not field.init:
            continue
        node = nodes[field.name]
        about = _comments_above(lines, node.lineno)
        if not about and rows and lines[node.lineno - 2].strip() and not lines[node.lineno - 2].strip().startswith("#"):
            about = f"with `{rows[-1]['group']}`, above"  # one comment above a group of settings
        group = field.name if _comments_above(lines, node.lineno) or not rows else rows[-1]["group"]
        env: list[str] = []
        if field.default is not dataclasses.MISSING:
            default = repr(field.default)
        else:
            factory = field.default_factory  # type: ignore[misc]
            default = repr(factory())  # what it is here, with this process's environment
            factory_name = getattr(factory, "__name__", "")
            if factory_name in functions:
                env = _env_of(functions[factory_name], functions, set())
        rows.append(
            {
                "name": field.name,
                "type": ast.unparse(node.annotation),
                "default": default,
                "env": ", ".join(f"`{name}`" for name in env),
                "about": about,
                "group": group,
            }
        )
    return rows


def environment() -> dict[str, list[str]]:
    """Every environment variable the package reads, and the modules that read it."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in ENV_RE.findall(path.read_text()):
            module = str(path.relative_to(ROOT))
            if module not in found.setdefault(name, []):
                found[name].append(module)
    return dict(sorted(found.items()))


def settings_page() -> str:
    from cogworker.config import Config

    lines = [
        "# Settings and environment variables",
        "",
        "Generated from `cogworker.Config` and the modules that read the environment when the",
        "site is built. Set them with `cogworker.configure(...)` (keywords of the same names),",
        "or with Django's `COGWORKER` setting. A bad value is one `ConfigurationError` line.",
        "",
        "## `cogworker.configure()` settings",
        "",
        "| setting | type | default | from the environment | what it is |",
        "|---|---|---|---|---|",
    ]
    for row in config_settings():
        lines.append(
            f"| `{row['name']}` | `{row['type']}` | `{row['default']}` | {row['env']} | {_cell(row['about'])} |"
        )
    lines += [
        "",
        "The defaults shown for settings read from the environment are the ones with none of",
        "their variables set.",
        "",
        "## Environment variables",
        "",
        "Every variable the package reads, and where (a command-line flag, where there is one,",
        "takes precedence).",
        "",
        "| variable | read by |",
        "|---|---|",
    ]
    for name, modules in environment().items():
        lines.append(f"| `{name}` | {', '.join(f'`{m}`' for m in modules)} |")
    lines += ["", "The `Config` class itself:", "", "::: cogworker.Config", "    options:", "      members: false", ""]
    assert Config  # the directive above renders it: the import proves the name
    return "\n".join(lines)


# -- Redis keys ---------------------------------------------------------------------------------


def key_rows() -> list[tuple[str, str, str]]:
    """(attribute, key for the namespace ``cogworker``, the comment above it in keys.py)."""
    from cogworker.keys import Keys

    path = PACKAGE / "keys.py"
    lines = path.read_text().splitlines()
    keys = Keys("cogworker")
    comments: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self" and target.attr not in comments:
                        comments[target.attr] = _comments_above(lines, node.lineno)
    rows = []
    for attr, value in vars(keys).items():
        if isinstance(value, str) and attr != "namespace" and not attr.startswith("_"):
            shown = value + "…" if attr.endswith("_prefix") else value
            rows.append((attr, shown, comments.get(attr, "")))
    return rows


def keys_page() -> str:
    lines = [
        "# Redis keys",
        "",
        "Every key cogworker writes, generated from `cogworker.keys.Keys` (the one place key names",
        "are built) for the default namespace `cogworker` when the site is built. A name ending",
        "in `…` is a prefix: the rest is a queue name, an identity, a jid or an id. On Redis",
        "Cluster the namespace is a hash tag (`{cogworker}`); with the queue layout each shard's",
        "keys carry their own tag ([Cluster](../operations/cluster.md)).",
        "",
        "| `Keys` attribute | key | what it holds |",
        "|---|---|---|",
    ]
    for attr, key, about in key_rows():
        lines.append(f"| `{attr}` | `{key}` | {_cell(about)} |")
    lines += ["", "The design of each key: [Every Redis key](../internals/redis-keys.md)."]
    return "\n".join(lines) + "\n"


# -- the public API ------------------------------------------------------------------------------

API_MODULES = [
    ("cogworker.api", "The operator's API: read and act on queues, sets, processes, jobs and limits."),
    ("cogworker.testing", "Testing helpers: inline and fake modes, private servers, a real worker."),
    ("cogworker.web", "The web UI as an ASGI app."),
    ("cogworker.django.apps", "Django: the app config (`INSTALLED_APPS`), which finds every app's jobs."),
    ("cogworker.django.commit", "Django: `enqueue_on_commit`."),
    ("cogworker.django.mount", "Django: `admin_urls`, the web UI behind the admin's login."),
    ("cogworker.django.backend", "Django's Tasks framework: the backend."),
]


def api_page() -> str:
    """mkdocstrings directives for every public name: ``cogworker``'s (each from the module
    that defines it, as ``cogworker.__init__`` maps them), then the public modules."""
    import cogworker

    lines = [
        "# Public API",
        "",
        "Generated from the docstrings when the site is built. `import cogworker` gives every name",
        "of this first part (each is defined deeper in the package, and imported on first use);",
        "the guides show them at work.",
        "",
        "## `cogworker`",
        "",
    ]
    homes: dict[str, str] = cogworker._HOMES
    for name in sorted(cogworker.__all__, key=lambda n: (homes.get(n, "~"), n)):
        if name in homes:
            lines += [
                f"::: cogworker.{homes[name]}.{name}",
                "    options:",
                f'      heading: "cogworker.{name}"',
                "      heading_level: 3",
                "",
            ]
    for name in sorted(set(cogworker.__all__) - set(homes)):  # the public modules: hooks, stats
        lines += [f"::: cogworker.{name}", "    options:", f'      heading: "cogworker.{name}"']
        lines += ["      heading_level: 3", ""]
    for module, about in API_MODULES:
        lines += [
            f"## `{module}`",
            "",
            about,
            "",
            f"::: {module}",
            "    options:",
            "      show_root_heading: false",
            "      heading_level: 3",
            "",
        ]
    return "\n".join(lines)


PAGES = {
    "reference/api.md": api_page,
    "reference/cli.md": cli_page,
    "reference/settings.md": settings_page,
    "reference/redis-keys.md": keys_page,
}

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print({"api": api_page, "cli": cli_page, "settings": settings_page, "keys": keys_page}[sys.argv[1]]())
