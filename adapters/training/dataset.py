"""Questions for training: a JSON Lines reader, a deterministic cursor, and answer checking.

A dataset file holds one JSON object per line, ``{"question": str, "answer": str | number (optional)}``
(and optionally ``"kind"``, a string label that training ignores); lines end in ``\n`` (or ``\r\n``), and
a UTF-8 byte order mark at the start is skipped; blank lines are skipped; any other line, or any other
key, is an error naming its line number. Batches come from a
seeded shuffle per epoch: batch ``b`` of size ``B`` is positions ``[bB, (b+1)B)`` of the infinite stream
``order(0) ++ order(1) ++ …``, where ``order(e)`` (:func:`epoch_order`) is the permutation of
``np.random.default_rng((seed, e))``: a function of (dataset size, seed, epoch) alone, so epoch ``e``'s
order is the same whether the run got there in one go or resumed on the way. The cursor ``(epoch,
position)`` therefore fixes everything that follows, and is what a checkpoint stores. A run of
``num_epochs = k`` is :func:`epoch_steps` batches long: every question is played k times, the last batch
completed from epoch k's order when ``B`` does not divide ``kQ``.

Held out for evaluation (:func:`split_questions`, config key ``eval_split``): the questions whose
BLAKE2b-64 digests of their UTF-8 text are the smallest, a fixed share of the set, whatever the seed and
the order of the lines; or another set (``eval_dataset``).

Correctness (the ``correctness_weight`` reward and ``eval/correct``) is :mod:`adapters.answers`'.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from adapters import data
from adapters.answers import answer_key
from kernel.checks import check_type, did_you_mean

__all__ = [
    "FIELDS",
    "SAMPLE_QUESTIONS",
    "SHIPPED",
    "Cursor",
    "DatasetError",
    "Question",
    "Split",
    "batch_at",
    "cursor_at",
    "epoch_order",
    "epoch_steps",
    "load_questions",
    "load_split",
    "parse_questions",
    "split_questions",
]

FIELDS = ("question", "answer", "kind")
"""The keys a dataset line may hold (``kind``: a label of the question's kind, not used by training)."""
SAMPLE_QUESTIONS = "questions.jsonl"
"""The shipped question set (arithmetic with exact answers) in :mod:`adapters.data`."""
SHIPPED: dict[str, str] = {
    "sample": SAMPLE_QUESTIONS,
    "arithmetic": "arithmetic.jsonl",
    "parity": "parity.jsonl",
    "repeat": "repeat.jsonl",
    "sign": "sign.jsonl",
    "yesno": "yesno.jsonl",
}
"""Dataset names that read a shipped file of :mod:`adapters.data`: ``sample`` (64 word problems),
``arithmetic`` (700 short checked questions of seven kinds), ``parity`` (400 "Is N even or odd?"),
``repeat`` (160 "Which digit is repeated in 777…7?": the answer is the one digit of the question),
``sign`` (400 "Is -395 positive or negative?", half of each answer: the local preset's task, a quarter
held out) and ``yesno`` (eight fixed yes/no questions)."""


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the file and line."""


class Question(NamedTuple):
    """One question and its reference answer (None when the file gives none)."""

    question: str
    answer: str | None = None


class Cursor(NamedTuple):
    """Where the next batch starts: ``epoch`` and ``position`` within that epoch's shuffled order."""

    epoch: int = 0
    position: int = 0


def parse_questions(text: str, *, source: str = "<questions>") -> tuple[Question, ...]:
    """Reads JSON Lines text into questions.

    Lines end at ``\n`` (a ``\r`` before it is dropped); other line separators, such as U+2028 in a
    question, are text. A byte order mark at the start is skipped.

    Raises:
      DatasetError: a line that is not JSON, not an object, with a key other than :data:`FIELDS`, or
        without a string ``question`` (the message gives ``source:line``), or no question at all.

    Examples:
      >>> parse_questions('{"question": "1 + 1?", "answer": 2}\\n\\n{"question": "Why?"}')
      (Question(question='1 + 1?', answer='2'), Question(question='Why?', answer=None))
      >>> parse_questions('{"question": "a"}\\nnot json')
      Traceback (most recent call last):
      adapters.training.dataset.DatasetError: <questions>:2: not JSON (Expecting value at column 1)
    """
    check_type(text, str, "text")
    out: list[Question] = []
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            out.append(_parse_line(line, f"{source}:{number}"))
    if not out:
        raise DatasetError(f"{source}: no questions")
    return tuple(out)


def _parse_line(line: str, where: str) -> Question:
    """One non-blank dataset line as a question; ``where`` (``source:line``) starts every error."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{where}: not JSON ({e.msg} at column {e.colno})") from None
    except ValueError as e:  # the one other error: an integer of more digits than int() reads
        raise DatasetError(f"{where}: a number too long to read ({e}); write it as a string") from None
    except RecursionError:
        raise DatasetError(f"{where}: nested too deeply to read") from None
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected an object, got {type(record).__name__}")
    for key in record:
        if key not in FIELDS:
            raise DatasetError(
                f"{where}: unknown key {key!r}{did_you_mean(key, FIELDS)}; a line holds "
                f"{', '.join(repr(f) for f in FIELDS)}"
            )
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise DatasetError(f'{where}: "question" must be a non-empty string')
    if record.get("kind") is not None and not isinstance(record["kind"], str):
        raise DatasetError(f'{where}: "kind" must be a string')
    return Question(question, _answer_text(record.get("answer"), where))


def _answer_text(answer: object, where: str) -> str | None:
    """A line's ``answer`` as text (None when it has none)."""
    if answer is None:
        return None
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise DatasetError(f'{where}: "answer" must be a string or a number')
    return str(answer)


def load_questions(path: str | Path) -> tuple[Question, ...]:
    """Questions from a JSON Lines file, or a shipped set by name (:data:`SHIPPED`: ``"sample"``,
    ``"arithmetic"``, ``"parity"``, ``"repeat"``, ``"yesno"``).

    Raises:
      DatasetError: as :func:`parse_questions`, the name is empty, or the file cannot be read.

    Examples:
      >>> sample = load_questions("sample")
      >>> len(sample), sample[0].answer
      (64, '178')
      >>> import tempfile
      >>> tmp = tempfile.TemporaryDirectory()
      >>> path = Path(tmp.name, "questions.jsonl")
      >>> _ = path.write_text('{"question": "2 + 3?", "answer": 5}\\n{"question": "Why?"}\\n')
      >>> load_questions(path)
      (Question(question='2 + 3?', answer='5'), Question(question='Why?', answer=None))
      >>> tmp.cleanup()
    """
    if not str(path):
        raise DatasetError(
            f"the dataset name is empty: name a JSON Lines file or one of {', '.join(SHIPPED)}"
        )
    if str(path) in SHIPPED:
        name = SHIPPED[str(path)]
        return parse_questions(data.read_text(name), source=name)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as e:
        raise DatasetError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return parse_questions(text, source=str(path))


def epoch_order(num_questions: int, seed: int, epoch: int) -> np.ndarray:
    """The order of epoch ``epoch``: a permutation of ``range(num_questions)`` that depends on
    ``(num_questions, seed, epoch)`` alone (``np.random.default_rng((seed, epoch))``).

    Examples:
      >>> sorted(epoch_order(5, seed=0, epoch=3).tolist())
      [0, 1, 2, 3, 4]
      >>> same = epoch_order(50, seed=0, epoch=1).tolist() == epoch_order(50, seed=0, epoch=1).tolist()
      >>> same, epoch_order(50, seed=0, epoch=0).tolist() == epoch_order(50, seed=0, epoch=1).tolist()
      (True, False)
    """
    if num_questions < 1 or seed < 0 or epoch < 0:
        raise ValueError(
            f"num_questions must be >= 1, seed and epoch >= 0; got {num_questions}, {seed}, {epoch}"
        )
    order: np.ndarray = np.random.default_rng((seed, epoch)).permutation(num_questions)
    return order


_order = epoch_order


def epoch_steps(num_epochs: int, num_questions: int, batch_size: int) -> int:
    """The batches of a run that plays every question ``num_epochs`` times: ⌈num_epochs·Q / B⌉ (the last
    one completed from the next epoch's order when B does not divide num_epochs·Q).

    Examples:
      >>> epoch_steps(2, 64, 16), epoch_steps(1, 10, 4), epoch_steps(3, 10, 4)
      (8, 3, 8)
    """
    for name, value in (
        ("num_epochs", num_epochs),
        ("num_questions", num_questions),
        ("batch_size", batch_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return -(-num_epochs * num_questions // batch_size)


def batch_at(cursor: Cursor, batch_size: int, num_questions: int, *, seed: int) -> tuple[list[int], Cursor]:
    """The question indices of the batch starting at ``cursor``, and the cursor after it.

    A batch that runs past the end of an epoch continues with the next epoch's order.

    Examples:
      >>> idx, nxt = batch_at(Cursor(0, 0), 3, 4, seed=0)
      >>> len(idx), nxt
      (3, Cursor(epoch=0, position=3))
      >>> batch_at(nxt, 3, 4, seed=0)[1]
      Cursor(epoch=1, position=2)
    """
    if num_questions < 1 or batch_size < 1:
        raise ValueError(f"num_questions and batch_size must be >= 1, got {num_questions}, {batch_size}")
    epoch, position = cursor
    out: list[int] = []
    order = _order(num_questions, seed, epoch)
    while len(out) < batch_size:
        if position == num_questions:
            epoch, position = epoch + 1, 0
            order = _order(num_questions, seed, epoch)
        take = min(batch_size - len(out), num_questions - position)
        out.extend(int(i) for i in order[position : position + take])
        position += take
    if position == num_questions:
        epoch, position = epoch + 1, 0
    return out, Cursor(epoch, position)


def cursor_at(batch_index: int, batch_size: int, num_questions: int) -> Cursor:
    """The cursor at the start of batch ``batch_index`` (batches are contiguous in the stream).

    Examples:
      >>> cursor_at(0, 3, 4), cursor_at(2, 3, 4)  # batch 2 starts at stream position 2 × 3 = 6 = 1 × 4 + 2
      (Cursor(epoch=0, position=0), Cursor(epoch=1, position=2))
    """
    start = batch_index * batch_size
    return Cursor(start // num_questions, start % num_questions)


class Split(NamedTuple):
    """A run's questions: ``train`` (what the warm start and RL draw batches from) and ``eval`` (what the
    evaluations play, the first ``eval_questions`` of them)."""

    train: tuple[Question, ...]
    eval: tuple[Question, ...]


def _digest(question: Question) -> bytes:
    return hashlib.blake2b(question.question.encode("utf-8"), digest_size=8).digest()


def split_questions(questions: tuple[Question, ...], share: float) -> Split:
    """Holds out ``k = ⌈share · n⌉`` of ``n`` questions for evaluation, deterministically.

    The questions are ranked by the BLAKE2b-64 digest of their UTF-8 text (ties, i.e. repeated texts, by
    line); the first ``k`` are held out, with any later repeats of the last one's text, so that no text
    is on both sides. ``eval`` is in digest order interleaved by answer (the first of each answer, in the
    order the answers first occur there, then the second of each, …): its first ``eval_questions`` are a
    pseudo-random pick, whatever the file's order, holding the answers as evenly as the held-out set
    allows (so that a constant answer scores the same on them as on the held-out set). ``train`` is in
    file order. The split depends on the texts only: not on
    the seed, nor on the lines' order. ``share = 0`` holds out nothing and evaluates on the training set.

    Raises:
      ValueError: ``share`` not in [0, 1), or a split that leaves no training question.

    Examples:
      >>> qs = tuple(Question(f"q{i}", str(i % 2)) for i in range(8))
      >>> split = split_questions(qs, 0.25)
      >>> len(split.train), len(split.eval), sorted(split.train + split.eval) == sorted(qs)
      (6, 2, True)
      >>> split_questions(qs[::-1], 0.25).eval == split.eval  # the lines' order does not matter
      True
      >>> split_questions(qs, 0.0) == Split(qs, qs)
      True
    """
    if not (isinstance(share, int | float) and 0 <= share < 1):
        raise ValueError(f"share must be a number in [0, 1), got {share!r}")
    if share == 0:
        return Split(questions, questions)
    ranked = sorted(range(len(questions)), key=lambda i: (_digest(questions[i]), i))
    k = math.ceil(share * len(questions))
    while 0 < k < len(ranked) and questions[ranked[k]].question == questions[ranked[k - 1]].question:
        k += 1
    held = set(ranked[:k])
    if len(held) == len(questions):
        raise ValueError(
            f"holding out {share} of {len(questions)} questions leaves none to train on: "
            "lower the share, or add questions"
        )
    return Split(
        tuple(q for i, q in enumerate(questions) if i not in held),
        _interleaved([questions[i] for i in ranked[:k]]),
    )


def _interleaved(questions: list[Question]) -> tuple[Question, ...]:
    """``questions`` round-robin by answer (:func:`adapters.answers.answer_key`), each answer's in order."""
    by_answer: dict[str | None, list[Question]] = {}
    for q in questions:
        by_answer.setdefault(answer_key(q.answer) if q.answer is not None else None, []).append(q)
    queues = list(by_answer.values())
    return tuple(
        queue[i] for i in range(max(map(len, queues), default=0)) for queue in queues if i < len(queue)
    )


def load_split(dataset: str, *, eval_split: float = 0.0, eval_dataset: str = "") -> Split:
    """A run's training and evaluation questions (config keys ``dataset``, ``eval_split``,
    ``eval_dataset``): ``eval_dataset`` set → all of ``dataset`` trains and ``eval_dataset`` is evaluated;
    else :func:`split_questions` of ``dataset`` by ``eval_split``.

    Raises:
      DatasetError: as :func:`load_questions`, for either set; both ``eval_split`` and ``eval_dataset``
        given; a split that leaves no training question.

    Examples:
      >>> split = load_split("sign", eval_split=0.25)
      >>> len(split.train), len(split.eval)
      (300, 100)
      >>> {q.question for q in split.train} & {q.question for q in split.eval}
      set()
    """
    questions = load_questions(dataset)
    if eval_dataset:
        if eval_split:
            raise DatasetError(
                f"config keys eval_split ({eval_split}) and eval_dataset ({eval_dataset!r}) both choose the "
                "evaluation questions: set one of them"
            )
        return Split(questions, load_questions(eval_dataset))
    try:
        return split_questions(questions, eval_split)
    except ValueError as e:
        raise DatasetError(f"{dataset}: config key eval_split: {e}") from None
