"""A workflow config before its checks: every config file read strictly (YAML syntax and duplicate keys named with
their file and line, :func:`check_config_files`), the cases the schema would report unclearly
(:func:`check_before_schema`), and Snakemake's schema error condensed to the violation, its key and the allowed forms
(:func:`condense_schema_error`). ``pipeline.config.check_workflow_config`` runs them in order.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from certified_circuits.pipeline.config_errors import ConfigError


def _strict_loader():
    """A PyYAML SafeLoader that refuses duplicate keys (PyYAML keeps the last one silently)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key] + 1}); a config key may appear once",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return StrictLoader


def check_config_files(paths) -> None:
    """Read every config file strictly: a YAML syntax error or a duplicate key is named with its file and
    line, before Snakemake or the schema sees the config.

    Raises:
        ConfigError: the first problem, as ``FILE:LINE:COLUMN: what is wrong; the fix``.
    """
    import yaml

    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found")
        try:
            yaml.load(path.read_text(), Loader=_strict_loader())
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
            problem = exc.problem or exc.context or "invalid YAML"
            raise ConfigError(f"{where}: {problem}. Fix the YAML there (indent with spaces, one value per key)") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from None


def check_before_schema(config: dict[str, Any], schema_keys) -> None:
    """What the schema would report unclearly: an unknown top-level key (the schema's message prints the
    whole schema) and the old ``[tau, p_del]`` pair form of ``language.settings``."""
    unknown = sorted(set(config) - set(schema_keys))
    if unknown:
        raise ConfigError(f"unknown top-level config key(s) {unknown}: the keys are {sorted(schema_keys)} "
                          "(docs/configuration.md)")
    settings = (config.get("language") or {}).get("settings") or {}
    if isinstance(settings, dict):
        for task, items in settings.items():
            for index, item in enumerate(items if isinstance(items, list) else []):
                if isinstance(item, (list, tuple)):
                    shown = ", ".join(str(v) for v in item)
                    pair = (f"{{tau: {item[0]}, p_del: {item[1]}}}" if len(item) == 2 else "{tau: ..., p_del: ...}")
                    raise ConfigError(f"language.settings.{task}[{index}]: [{shown}] is the old (tau, p_del) pair "
                                      f"form; write {pair}")


def condense_schema_error(text: str, schema_file: str | os.PathLike | None = None) -> str:
    """Snakemake's schema error without the schema dump: the violation and where it is. A value that fits none
    of a ``oneOf`` / ``anyOf`` (jsonschema's "is not valid under any of the given schemas") is told the allowed
    values and forms instead, read from the failing part of the schema (``$ref`` resolved in ``schema_file``,
    the checkout's config.schema.yaml by default).

    Args:
        text: Snakemake's WorkflowError text (jsonschema's message, the failing schema part and the instance).
        schema_file: the schema whose ``definitions`` resolve ``$ref`` (default :data:`SCHEMA_FILE`).

    Returns:
        ``"config is invalid: <problem> (at <key>)"``, or ``text`` when it holds no ValidationError.
    """
    lines = [line.strip() for line in text.splitlines()]
    problem = next((line.split("ValidationError:", 1)[1].strip() for line in lines if "ValidationError:" in line), "")
    where = next((line[len("On instance"):].rstrip(":") for line in lines if line.startswith("On instance")), "")
    keys = ".".join(part.strip("'\"") for part in where.replace("][", "|").strip("[]").split("|") if part)
    if not problem:
        return text
    if problem.endswith(ANY_OF_PROBLEM):
        allowed = _allowed_forms(text, schema_file)
        if allowed:
            problem = f"{problem[: -len(ANY_OF_PROBLEM)]}is not allowed here: use {allowed}"
    return f"config is invalid: {problem}" + (f" (at {keys})" if keys else "")


#: jsonschema's message for a value that fits no alternative of a oneOf / anyOf
ANY_OF_PROBLEM = "is not valid under any of the given schemas"

#: the checkout's schema (the Snakefile's); ``$ref`` of a failing oneOf / anyOf is resolved in it
SCHEMA_FILE = Path(__file__).resolve().parents[3] / "config.schema.yaml"


def _allowed_forms(text: str, schema_file: str | os.PathLike | None) -> str:
    """The alternatives of the oneOf / anyOf that failed, in words ("" when the error text does not show them)."""
    import ast
    import textwrap

    found = re.search(r"Failed validating '(oneOf|anyOf)' in schema[^\n]*:\n((?:[ \t]+[^\n]*\n?)+)", text)
    if not found:
        return ""
    try:
        node = ast.literal_eval(textwrap.dedent(found.group(2)).strip())
    except (ValueError, SyntaxError):
        return ""
    definitions: dict[str, Any] = {}
    path = Path(schema_file) if schema_file is not None else SCHEMA_FILE
    try:
        import yaml

        definitions = yaml.safe_load(path.read_text()).get("definitions", {})
    except (OSError, ValueError, AttributeError):
        pass
    forms = [_describe(alternative, definitions) for alternative in node.get(found.group(1), [])]
    return "; or ".join(form for form in forms if form)


def _describe(schema: dict[str, Any], definitions: dict[str, Any]) -> str:
    """One alternative of a schema in words: its enum, type, bounds, pattern or description."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        resolved = definitions.get(name)
        return _describe({**resolved, **{k: v for k, v in schema.items() if k != "$ref"}}, definitions) if resolved \
            else f"a {name}"
    if "enum" in schema:
        return " or ".join(repr(v) if isinstance(v, str) else str(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return "null (unset)"
    if kind == "integer" or kind == "number":
        bounds = [f">= {schema['minimum']}" if "minimum" in schema else "",
                  f"> {schema['exclusiveMinimum']}" if "exclusiveMinimum" in schema else "",
                  f"<= {schema['maximum']}" if "maximum" in schema else "",
                  f"< {schema['exclusiveMaximum']}" if "exclusiveMaximum" in schema else ""]
        bounds = [b for b in bounds if b]
        return f"{'an integer' if kind == 'integer' else 'a number'}" + (f" {' and '.join(bounds)}" if bounds else "")
    if kind == "array":
        items = _describe(schema.get("items", {}), definitions) if schema.get("items") else "a value"
        size = "a non-empty list" if schema.get("minItems") == 1 else "a list"
        return f"{size}, each {items}" + (", no repeats" if schema.get("uniqueItems") else "")
    if kind == "string":
        if schema.get("description"):
            return str(schema["description"]).strip()
        if schema.get("pattern"):
            return f"a string matching {schema['pattern']}"
        return "a string"
    if schema.get("description"):
        return str(schema["description"]).strip()
    return str(kind or "")
