"""Prompt generators for the three language tasks (paper, Appendix "Language Setup", Table of prompts).

Every example has a clean prompt, a corrupted prompt, an answer word and a distractor word:

* ``ioi`` (indirect object identification, Wang et al. 2023): "Then, A and B went to the garden. B gave a
  drink to" -> (A / B). Corruption replaces every name by fresh random names (ABC-style), keeping the
  answer/distractor pair used by the metric. OOD adds object/place distractor clauses.
* ``ioi_hard``: the same rule with longer prompts ("Then in the morning, ..."), both name orders and a
  longer template; OOD inserts repeated question-and-answer detours between the two names.
* ``greater_than`` (Hanna et al. 2023, EAP form): "... The war lasted from the year Y to the year" ->
  (Y+1 / Y+1+shift). Corruption starts the span at Y+shift so that the distractor becomes the natural
  continuation. OOD inserts a distracting clause right before the answer position.
* ``induction`` (a task whose circuit is known, Olsson et al. 2022): a random word sequence repeated,
  ``s_0 .. s_{T-1} s_0 .. s_k`` -> (s_{k+1} / s_{j+1}); see :func:`sample_induction` for the corruption, which
  routes the whole clean-vs-corrupted difference through previous-token head -> induction head
  K-composition. It is not one of :data:`TASKS` (the embedded model's default training mixture): it is in
  :data:`GENERATED_TASKS` and is trained on alone (``language-train --tasks induction --attn-only``).

Splits ``train`` / ``id_test`` / ``ood_test`` (100 each by default) are drawn from independent seeded
streams; ``train`` and ``id_test`` share the ID templates, ``ood_test`` uses the OOD ones. Model training
(:mod:`certified_circuits.language.train`) draws from a further independent stream of ID prompts.

Words are rendered with plain spaces so that a word-level tokenizer (:mod:`.tokenizer`) and GPT-2's BPE
both work; answers are scored as the next token (`" " + word` for GPT-2).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import re

import numpy as np

from certified_circuits.commands import COMMAND
from certified_circuits.storage.atomic import write_text

TASKS: tuple[str, ...] = ("ioi", "ioi_hard", "greater_than")
#: the task whose circuit is known (previous-token head -> induction head; :mod:`.ground_truth`)
INDUCTION = "induction"
#: tasks whose model can be compiled instead of trained (``language-train --compiled``; language/compiled.py)
COMPILED_TASKS: tuple[str, ...] = (INDUCTION,)
#: next-token losses of ``language-train --loss``: at the answer only (``last``) or at every position (``all``)
TRAINING_LOSSES: tuple[str, ...] = ("last", "all")
#: every task this module generates; a task's seeded stream uses its index here (TASKS' indices unchanged)
GENERATED_TASKS: tuple[str, ...] = TASKS + (INDUCTION,)
#: train = the concept dataset D; validation = held-out ID prompts on which K and the setting are chosen;
#: id_test / ood_test = where results are reported. Each split has its own seeded stream (its index).
SPLITS: tuple[str, ...] = ("train", "id_test", "ood_test", "validation")
# Stream index of the model-training distribution (never one of SPLITS' streams).
TRAIN_MODEL_STREAM = 7

NAMES: tuple[str, ...] = (
    "Michael", "Christopher", "Jessica", "Matthew", "Ashley", "Jennifer", "Joshua", "Amanda", "Daniel",
    "David", "James", "Robert", "John", "Joseph", "Andrew", "Ryan", "Brandon", "Jason", "Justin", "Sarah",
    "William", "Jonathan", "Stephanie", "Brian", "Nicole", "Nicholas", "Anthony", "Heather", "Eric",
    "Elizabeth", "Adam", "Megan", "Melissa", "Kevin", "Steven", "Thomas", "Timothy", "Christina", "Kyle",
    "Rachel", "Laura", "Lauren", "Amber", "Richard", "Kimberly", "Emily", "Katherine", "Allison",
)
PLACES: tuple[str, ...] = (
    "garden", "school", "store", "restaurant", "office", "station", "hospital", "park", "house", "library",
)
OBJECTS: tuple[str, ...] = (
    "drink", "ring", "snack", "necklace", "basketball", "book", "bone", "apple", "computer", "kiss",
)
EVENTS: tuple[str, ...] = ("war", "expedition", "famine", "reign", "journey", "drought")
# Greater-Than: start years are drawn from [YEAR_START_MIN, YEAR_START_MAX]; the distractor is
# answer + GT_SHIFT and the corrupted span starts at start + GT_SHIFT (paper: 1799 -> 1800 / 1840).
YEAR_START_MIN = 1700
YEAR_START_MAX = 1899
GT_SHIFT = 40
#: Induction (:func:`sample_induction`): the words of the random sequences (single words of the default vocabulary,
#: so that the word-level tokenizer is unchanged) and the first half's length T in ID splits and in ood_test.
INDUCTION_SYMBOLS: tuple[str, ...] = NAMES + OBJECTS + PLACES
INDUCTION_HALF: tuple[int, int] = (6, 14)
INDUCTION_OOD_HALF: tuple[int, int] = (18, 22)


@dataclass(frozen=True)
class Example:
    """One task prompt pair (paper: clean prompt, corrupted prompt, answer, distractor)."""

    id: str
    task: str
    split: str
    clean: str
    corrupted: str
    answer: str
    distractor: str


def year_vocabulary(start_min: int = YEAR_START_MIN, start_max: int = YEAR_START_MAX) -> list[str]:
    """Every year string a Greater-Than prompt, answer or distractor can contain."""
    return [str(y) for y in range(start_min, start_max + GT_SHIFT + 2)]


def template_words() -> list[str]:
    """Every non-name, non-number word of every template (for the word-level vocabulary)."""
    texts = [
        _ioi_id("A", "B", "B", "garden", "drink", first_a=True),
        _ioi_ood("A", "B", "B", "A", "B", "garden", "drink", "book", first_a=True),
        _hard_id("A", "B", "B", "garden", "drink", first_a=True, template=0),
        _hard_id("A", "B", "B", "garden", "drink", first_a=True, template=1),
        _hard_ood("A", "B", "A", "B", "garden", "drink", n_detours=2, first_a=True),
        _gt_prompt("0", "garden", "drink", "war", "1700", ood_place=None, ood_obj=None),
        _gt_prompt("0", "garden", "drink", "war", "1700", ood_place="garden", ood_obj="drink"),
    ]
    words: set[str] = set()
    for t in texts:
        words.update(w for w in split_words(t) if not w.isdigit() and w not in ("A", "B"))
    return sorted(words)


_WORD_RE = re.compile(r"\d+|\w+|[^\w\s]")


def split_words(text: str) -> list[str]:
    """Split a prompt into words and punctuation marks (the word-level tokenizer's pre-tokenisation)."""
    return _WORD_RE.findall(text)


# ---------------------------------------------------------------------------------------------- templates
def _ioi_id(a: str, b: str, s: str, place: str, obj: str, *, first_a: bool) -> str:
    n1, n2 = (a, b) if first_a else (b, a)
    return f"Then, {n1} and {n2} went to the {place}. {s} gave a {obj} to"


def _ioi_ood(a: str, b: str, s: str, a2: str, b2: str, place: str, obj: str, obj2: str, *,
             first_a: bool) -> str:
    n1, n2 = (a, b) if first_a else (b, a)
    return (f"Then in the morning, {n1} and {n2} went to the {place}. While {b2} looked around the {place}, "
            f"{a2} talked about the {obj2}, and after a while {s} gave a {obj} to")


def _hard_id(a: str, b: str, s: str, place: str, obj: str, *, first_a: bool, template: int) -> str:
    n1, n2 = (a, b) if first_a else (b, a)
    if template == 0:
        return f"Then in the morning, {n1} and {n2} went to the {place}. {s} gave a {obj} to"
    return (f"Then in the morning, {n1} and {n2} went to the {place} together, and after a long day at "
            f"the {place}, {s} gave a {obj} to")


def _hard_ood(a: str, b: str, a_rep: str, b_rep: str, place: str, obj: str, *, n_detours: int,
              first_a: bool, s: str | None = None) -> str:
    n1, n2 = (a, b) if first_a else (b, a)
    subject = b_rep if s is None else s
    detours = " ".join(f"and {b_rep} answered {a_rep} about the {obj}, then {a_rep} asked {b_rep} again,"
                       for _ in range(n_detours))
    return (f"Then in the morning, {n1} and {n2} went to the {place}. {a_rep} repeatedly asked {b_rep} "
            f"about the {obj}, {detours} and resumed the discussion of the {obj}, {subject} gave a {obj} to")


def _gt_prompt(scenario: str, place: str, obj: str, event: str, start: str, *, ood_place: str | None,
               ood_obj: str | None) -> str:
    text = f"In scenario {scenario} at the {place} with the {obj}, The {event} lasted from the year {start} to the year"
    if ood_place is not None:
        text += (f" after a long and distracting discussion at the {ood_place} about the {ood_obj}, "
                 f"followed by more unrelated details,")
    return text


# ---------------------------------------------------------------------------------------------- sampling
def _pick(rng: np.random.Generator, pool: Sequence[str], k: int, exclude: Iterable[str] = ()) -> list[str]:
    excl = set(exclude)
    cand = [p for p in pool if p not in excl]
    idx = rng.choice(len(cand), size=k, replace=False)
    return [cand[i] for i in idx]


def _sample_ioi(rng: np.random.Generator, ood: bool, names: Sequence[str]) -> tuple[str, str, str, str]:
    a, b = _pick(rng, names, 2)
    c, d, e, f = _pick(rng, names, 4, exclude=(a, b))
    place = _pick(rng, PLACES, 1)[0]
    obj, obj2 = _pick(rng, OBJECTS, 2)
    first_a = bool(rng.integers(2))
    if not ood:
        clean = _ioi_id(a, b, b, place, obj, first_a=first_a)
        corr = _ioi_id(c, d, e, place, obj, first_a=first_a)
    else:
        clean = _ioi_ood(a, b, b, a, b, place, obj, obj2, first_a=first_a)
        corr = _ioi_ood(c, d, e, f, e, place, obj, obj2, first_a=first_a)
    return clean, corr, a, b


def _sample_ioi_hard(rng: np.random.Generator, ood: bool, names: Sequence[str]) -> tuple[str, str, str, str]:
    a, b = _pick(rng, names, 2)
    c, d, e, f = _pick(rng, names, 4, exclude=(a, b))
    place = _pick(rng, PLACES, 1)[0]
    obj = _pick(rng, OBJECTS, 1)[0]
    first_a = bool(rng.integers(2))
    if not ood:
        template = int(rng.integers(2))
        clean = _hard_id(a, b, b, place, obj, first_a=first_a, template=template)
        corr = _hard_id(c, d, e, place, obj, first_a=first_a, template=template)
    else:
        n_det = int(rng.integers(1, 4))
        clean = _hard_ood(a, b, a, b, place, obj, n_detours=n_det, first_a=first_a)
        corr = _hard_ood(c, d, f, e, place, obj, n_detours=n_det, first_a=first_a, s=e)
    return clean, corr, a, b


def _sample_greater_than(rng: np.random.Generator, ood: bool, year_range: tuple[int, int]
                         ) -> tuple[str, str, str, str]:
    start = int(rng.integers(year_range[0], year_range[1] + 1))
    scenario = str(int(rng.integers(100000, 1000000)))
    place, place2 = _pick(rng, PLACES, 2)
    obj, obj2 = _pick(rng, OBJECTS, 2)
    event = _pick(rng, EVENTS, 1)[0]
    kw = dict(ood_place=place2, ood_obj=obj2) if ood else dict(ood_place=None, ood_obj=None)
    clean = _gt_prompt(scenario, place, obj, event, str(start), **kw)
    corr = _gt_prompt(scenario, place, obj, event, str(start + GT_SHIFT), **kw)
    return clean, corr, str(start + 1), str(start + 1 + GT_SHIFT)


def sample_induction(rng: np.random.Generator, ood: bool, symbols: Sequence[str] = INDUCTION_SYMBOLS
                     ) -> tuple[str, str, str, str]:
    """One induction prompt pair (clean, corrupted, answer, distractor).

    Clean: a first half ``s_0 .. s_{T-1}`` of words drawn uniformly *with replacement* from ``symbols``, then the
    repeat ``s_m .. s_k``, which ends on the query ``s_k``; answer ``s_{k+1}``, k uniform in ``[1, T-2]``. ID splits
    (train, validation, id_test): T uniform in :data:`INDUCTION_HALF` and the repeat starts anywhere before the
    query (m uniform in ``[0, k-1]``), so the distance ``T - m`` between the query's two occurrences varies widely
    and no fixed-offset (positional) rule predicts the answer. ood_test: longer first halves (T in
    :data:`INDUCTION_OOD_HALF`) repeated from the start (m = 0): every distance is longer than any ID one.
    Repeats inside the first half make some prompts genuinely ambiguous (the query ``s_k`` also occurs at another
    position r, followed by ``s_{r+1}``), so accuracy stays below the ceiling.

    Corrupted: the first half with ``s_k`` and ``s_j`` swapped, j uniform in ``[0, T-2]`` minus ``{k-1, k, k+1}``;
    the second half is unchanged. So the query ``s_k`` now stands before ``d = s_{j+1}`` (the distractor) and no
    longer before the answer. Only positions k and j change; the tokens at k+1 and j+1 (the answer and the
    distractor, the values an induction head copies) and the query are the same in both runs. The
    clean-vs-corrupted difference therefore reaches the logits only through *which* position the induction head
    attends to, i.e. through its keys at k+1 and j+1, which hold "the previous token was s_k" only via a
    previous-token head reading position k / j: input -> previous-token head <v> -> induction head <k> ->
    logits (K-composition). j is redrawn (then the sequence) until ``s_j != s_k`` and ``d`` differs from
    the answer and the query.

    Args:
        rng: the seeded generator.
        ood: draw the ood_test shift (longer first half, repeated from its start).
        symbols: the word pool.

    Returns:
        (clean, corrupted, answer, distractor) as space-separated words.
    """
    lo, hi = INDUCTION_OOD_HALF if ood else INDUCTION_HALF
    while True:
        t = int(rng.integers(lo, hi + 1))
        seq = rng.integers(len(symbols), size=t)
        k = int(rng.integers(1, t - 1))
        m = 0 if ood else int(rng.integers(0, k))
        cand = np.array([j for j in range(t - 1) if abs(j - k) > 1])
        for j in rng.permutation(cand):
            if seq[j] != seq[k] and seq[j + 1] != seq[k + 1] and seq[j + 1] != seq[k]:
                break
        else:
            continue
        corr = seq.copy()
        corr[[j, k]] = seq[[k, j]]
        words = [symbols[i] for i in seq]
        clean = " ".join(words + words[m: k + 1])
        corrupted = " ".join([symbols[i] for i in corr] + words[m: k + 1])
        return clean, corrupted, symbols[seq[k + 1]], symbols[seq[j + 1]]


def generate_examples(task: str, split: str, n: int, seed: int, *, stream: int | None = None,
                      names: Sequence[str] = NAMES,
                      year_range: tuple[int, int] = (YEAR_START_MIN, YEAR_START_MAX),
                      length_check: Callable[[Example], bool] | None = None,
                      max_tries: int = 50) -> list[Example]:
    """Draw ``n`` examples of ``task`` for ``split`` from the seeded stream (seed, task, split/stream).

    ``split`` picks the template family (``ood_test`` -> OOD, otherwise ID; ``validation`` is ID). ``length_check`` (e.g. the
    GPT-2 equal-length test) rejects and redraws an example; after ``max_tries`` failures in a row it
    raises, naming the example.
    """
    if task not in GENERATED_TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(GENERATED_TASKS)}")
    if split not in SPLITS and split != "model_train":
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    s_idx = stream if stream is not None else (SPLITS.index(split) if split in SPLITS else TRAIN_MODEL_STREAM)
    rng = np.random.default_rng([int(seed), GENERATED_TASKS.index(task), int(s_idx)])
    ood = split == "ood_test"
    out: list[Example] = []
    while len(out) < n:
        for _ in range(max_tries):
            if task == "ioi":
                clean, corr, ans, dis = _sample_ioi(rng, ood, names)
            elif task == "ioi_hard":
                clean, corr, ans, dis = _sample_ioi_hard(rng, ood, names)
            elif task == INDUCTION:
                clean, corr, ans, dis = sample_induction(rng, ood)
            else:
                clean, corr, ans, dis = _sample_greater_than(rng, ood, year_range)
            ex = Example(f"{task}-{split}-{len(out):05d}", task, split, clean, corr, ans, dis)
            if length_check is None or length_check(ex):
                out.append(ex)
                break
        else:
            raise ValueError(f"{task}/{split}: {max_tries} draws in a row failed the tokenizer check "
                             f"(last: {ex.clean!r} vs {ex.corrupted!r}); the name/year lists do not fit "
                             f"this tokenizer: restrict them to single-token entries")
    return out


def generate_splits(task: str, seed: int, n_per_split: int = 100, **kw) -> dict[str, list[Example]]:
    """The paper's three splits of one task (100 train, 100 ID test, 100 OOD test by default)."""
    return {s: generate_examples(task, s, n_per_split, seed, **kw) for s in SPLITS}


# ---------------------------------------------------------------------------------------------- files
def write_jsonl(path: str | os.PathLike, examples: Sequence[Example]) -> Path:
    """Write examples as JSON lines atomically."""
    return write_text(path, "".join(json.dumps(asdict(ex)) + "\n" for ex in examples))


def read_jsonl(path: str | os.PathLike) -> list[Example]:
    """Read examples written by :func:`write_jsonl` (clear error when missing or malformed)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task file {path} does not exist; create it with "
                                f"`{COMMAND} language-tasks --task TASK --out-dir {path.parent}`")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte {err.start}: {err.reason}): write task files as UTF-8 "
                         f"(`{COMMAND} language-tasks` does)") from None
    out = []
    for i, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")):  # as open() reads lines
        if not line.strip():
            continue
        try:
            out.append(Example(**json.loads(line)))
        except (TypeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}:{i + 1}: not a task example ({err})") from err
    return out
