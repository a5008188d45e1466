"""The checks every task's examples pass against the model's tokenizer, whatever their source: a task file
(:mod:`.task_files`) or MIB's own data (:mod:`.mib_data`), which both import them from here (neither imports the
other for it), and the error they raise.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from certified_circuits.language.tasks import Example
from certified_circuits.language.tokenizer import PromptTokenizer

#: Most offending rows listed in one tokenizer-check error.
MAX_REPORTED_ROWS = 5


class TaskFileError(ValueError):
    """A task file cannot be used (the message names the file, the row and the fix)."""


def check_tokens(examples: Sequence[Example], tokenizer: PromptTokenizer, path: str | os.PathLike, *,
                 rows: Mapping[str, int] | None = None, max_len: int | None = None) -> None:
    """Check the examples of a task file against the model's tokenizer.

    Every answer and distractor must be one token (``tokenizer.answer_id``), different from each other;
    clean and corrupted prompts must have the same number of tokens (``len(tokenizer.encode(...))``) and,
    with ``max_len``, at most ``max_len`` tokens.

    **Unknown words are an error.** A word that the tokenizer maps to its unknown token (``[UNK]``, ``<unk>``;
    a tokenizer with ``unknown_words``, as :class:`~.tokenizer.HFPromptTokenizer`) is reported with its row and
    column: every such word becomes the same token, so the model cannot read it, the clean and corrupted prompts
    may no longer differ where the task says they do, and an ``[UNK]`` answer scores the unknown token. A
    researcher would rather fix the file than certify a circuit of such prompts, so the check refuses it (like
    every other check here) instead of warning. Byte-level BPE tokenizers (GPT-2, Llama-3, Qwen2) have no
    unknown token and never trigger it.

    Args:
        examples: the examples (of any splits).
        tokenizer: the model's prompt tokenizer.
        path: the task file (named in the error).
        rows: ``{example id: line number}`` to name rows by line (else by id).
        max_len: the model's context length, if any.

    Raises:
        TaskFileError: listing up to :data:`MAX_REPORTED_ROWS` offending rows (in file order), each with
            the offending text, the number of offending rows and the fix.
    """
    rows = dict(rows or {})
    ordered = sorted(examples, key=lambda e: (rows.get(e.id, 0), e.id)) if rows else list(examples)
    bad: list[str] = []
    n_bad = 0
    kinds: set[str] = set()
    for ex in ordered:
        problems: list[str] = []
        ids: dict[str, int] = {}
        for col in ("answer", "distractor"):
            word = getattr(ex, col)
            try:
                ids[col] = int(tokenizer.answer_id(word))
            except ValueError as err:
                kinds.add("token")
                problems.append(f"{col} {word!r} is not one token{_space_hint(tokenizer, word)} ({err})")
        unknown_words = getattr(tokenizer, "unknown_words", None)
        for col in (("clean", "corrupted", "answer", "distractor") if unknown_words is not None else ()):
            words = unknown_words(getattr(ex, col))
            if words:
                kinds.add("unknown")
                problems.append(f"the {col} has word(s) the tokenizer maps to its unknown token "
                                f"{getattr(tokenizer, 'unknown_token', None)!r}: {', '.join(map(repr, words))}")
        if len(ids) == 2 and ids["answer"] == ids["distractor"]:
            kinds.add("same")
            problems.append(f"answer {ex.answer!r} and distractor {ex.distractor!r} are the same token")
        lengths: dict[str, int] = {}
        for col in ("clean", "corrupted"):
            try:
                lengths[col] = len(tokenizer.encode(getattr(ex, col)))
            except ValueError as err:
                kinds.add("encode")
                problems.append(f"the {col} prompt cannot be tokenised ({err})")
        if len(lengths) == 2 and lengths["clean"] != lengths["corrupted"]:
            kinds.add("length")
            problems.append(f"clean has {lengths['clean']} tokens but corrupted has {lengths['corrupted']} "
                            f"(clean {ex.clean!r}, corrupted {ex.corrupted!r})")
        if max_len is not None and lengths and max(lengths.values()) > max_len:
            kinds.add("max_len")
            problems.append(f"the prompt has {max(lengths.values())} tokens, more than the model's context "
                            f"of {max_len}")
        if problems:
            n_bad += 1
            if len(bad) < MAX_REPORTED_ROWS:
                where = f"{path}:{rows[ex.id]}" if ex.id in rows else f"{path} (id {ex.id})"
                bad.append(f"  {where}: " + "; ".join(problems))
    if not bad:
        return
    fixes = {
        "token": "answers and distractors are tokenised exactly as written: add or remove the leading space "
                 "(a BPE tokenizer such as GPT-2's has ' Mary', with the space, as one token) or choose a "
                 "single-token word",
        "same": "the metric is the answer-distractor logit difference: give each row a distractor that differs "
                "from its answer",
        "encode": "use words the model's tokenizer knows",
        "unknown": "replace the words the tokenizer does not know (its unknown token stands for every one of them, "
                   "so the model cannot read them) with words in its vocabulary",
        "length": "EAP-IG patches activations position by position, so the corrupted prompt must tokenise to "
                  "as many tokens as the clean one: change the corrupted words to ones of the same token count",
        "max_len": f"shorten the prompts to at most {max_len} tokens",
    }
    shown = f", the first {len(bad)} listed" if n_bad > len(bad) else ""
    raise TaskFileError(f"task file {path}: {n_bad} of {len(ordered)} rows fail the tokenizer check{shown}:\n"
                        + "\n".join(bad) + "\nFix: " + "; ".join(fixes[k] for k in fixes if k in kinds))


def _space_hint(tokenizer: PromptTokenizer, word: str) -> str:
    """'; " Mary" is one token' when toggling the leading space makes ``word`` one token."""
    other = word[1:] if word.startswith(" ") else " " + word
    try:
        tokenizer.answer_id(other)
    except ValueError:
        return ""
    return f"; {other!r} is one token"
