"""Apply the rules to a text: find which lines hold a trigger, run only their rules, then the shape checks.

Speed matters: every line the desk shows goes through here. Each rule names literal triggers (lower case) and runs
only on the lines that hold one of them, so a clean line costs one RE2 search (all triggers in one DFA); a line
that holds a trigger is tested trigger by trigger, and a trigger that contains another (``sshpass`` holds
``pass``) is only looked for where the shorter one was found. The work is on UTF-8 bytes: the text is encoded
once, its ASCII letters lowered (which keeps every offset), and folded rules run on the lowered line while their
replacements read the original. Redacting a block of lines finds its lines with triggers in one pass, then works
on those lines; callers with many lines should pass them as one block.
"""

from __future__ import annotations

import bisect
from itertools import accumulate

from incident_desk.core.linear import LinearPattern, escape
from incident_desk.core.redaction.entropy import mask_random_runs
from incident_desk.core.redaction.keys import mask_key_blocks, mask_key_material, mask_key_material_in_block
from incident_desk.core.redaction.multiline import mask_dangling_values
from incident_desk.core.redaction.rules import RULES
from incident_desk.core.redaction.shapes import Rule

_Node = tuple[bytes, tuple[int, ...], list[bytes]]  # a trigger, the rules it triggers, the longer triggers holding it


def _trigger_tree() -> tuple[list[_Node], dict[bytes, _Node]]:
    """The top-level triggers, and every trigger's node: longer triggers are looked for only under a shorter one."""
    rules_of: dict[bytes, list[int]] = {}
    for index, rule in enumerate(RULES):
        for trigger in rule.triggers:
            rules_of.setdefault(trigger.encode(), []).append(index)
    nodes: dict[bytes, _Node] = {trigger: (trigger, tuple(rules), []) for trigger, rules in rules_of.items()}
    order = {trigger: index for index, trigger in enumerate(nodes)}
    top: list[_Node] = []
    for word, node in nodes.items():
        # Each of the word's own pieces looked up, not every trigger tested against it: the start loads this.
        pieces = {word[start:stop] for start in range(len(word)) for stop in range(start + 1, len(word) + 1)}
        parents = [other for other in pieces if other != word and other in nodes]
        if parents:
            nodes[min(parents, key=lambda other: (len(other), order[other]))][2].append(word)
        else:
            top.append(node)
    return top, nodes


_TOP_TRIGGERS, _NODES = _trigger_tree()
# The bytes of the top-level triggers. In a large block, one memchr-fast test per byte rules out every trigger
# holding a byte the block lacks, before the slower substring searches.
_TRIGGER_BYTES = frozenset(bytes([byte]) for node in _TOP_TRIGGERS for byte in node[0])
_BYTES_OF = {node[0]: frozenset(bytes([byte]) for byte in node[0]) for node in _TOP_TRIGGERS}
_CHAR_GATE_LENGTH = 16 * 1024

# Every top-level trigger in one RE2 pattern (a DFA: one pass, whatever the number of triggers), in any ASCII case:
# most text holds none, and one search says so far cheaper than a substring test per trigger.
_ANY_TOP_TRIGGER = LinearPattern(b"(?i)" + b"|".join(escape(node[0]) for node in _TOP_TRIGGERS))


def _candidate_sources() -> list[bytes]:
    """What finds a block's candidate lines: each top-level trigger, or, when every rule it triggers has a
    narrower pattern, those patterns and the trigger's longer triggers (whose rules still need the literal)."""
    sources: list[bytes] = []
    for trigger, rules, children in _TOP_TRIGGERS:
        narrows = [RULES[index].narrow for index in rules]
        if not all(narrows):
            sources.append(escape(trigger))
            continue
        sources += [narrow.source for narrow in narrows if narrow is not None]
        pending = list(children)
        while pending:
            child = pending.pop()
            sources.append(escape(child))
            pending += _NODES[child][2]
    return sources


_ANY_TRIGGER_LOWERED = LinearPattern(b"|".join(f"(?:{source.decode()})".encode() for source in _candidate_sources()))


def _top_triggers_in(lowered: bytes) -> list[_Node]:
    """The top-level trigger nodes that occur in ``lowered``."""
    candidates = _TOP_TRIGGERS
    if len(lowered) >= _CHAR_GATE_LENGTH:
        if not _ANY_TOP_TRIGGER.contains(lowered):
            return []
        absent = {byte for byte in _TRIGGER_BYTES if lowered.find(byte) < 0}
        candidates = [node for node in _TOP_TRIGGERS if absent.isdisjoint(_BYTES_OF[node[0]])]
    # find, not "in": bytes.__contains__ first tries the needle as an int, and that failure costs more than a find.
    return [node for node in candidates if lowered.find(node[0]) >= 0]


def _triggered(lowered: bytes) -> list[int]:
    """Indexes of the rules whose triggers occur in ``lowered``, in rule order."""
    found: set[int] = set()
    pending = _top_triggers_in(lowered)
    while pending:
        _trigger, rules, children = pending.pop()
        found.update(rules)
        pending.extend(_NODES[child] for child in children if lowered.find(child) >= 0)
    return sorted(found)


# The top-level triggers as text, for one line given as text: "in" on str is the cheapest test there is (on bytes,
# "in" first tries the needle as an int, and find is a method call), and most lines hold no trigger at all. They
# come in groups, each behind one RE2 search of the line: a group none of whose triggers the line holds (most
# groups, for most lines) costs that one search instead of a substring test per trigger.
_GROUP_SIZE = 24
_TEXT_TRIGGERS = [(node[0].decode(), node) for node in _TOP_TRIGGERS]
_TOP_TEXT_TRIGGERS = [
    (LinearPattern(b"|".join(escape(node[0]) for _text, node in group)), group)
    for group in (_TEXT_TRIGGERS[at : at + _GROUP_SIZE] for at in range(0, len(_TEXT_TRIGGERS), _GROUP_SIZE))
]
# Each trigger's longer triggers, with their text.
_TEXT_CHILDREN = {trigger: [(child, child.decode()) for child in node[2]] for trigger, node in _NODES.items()}


def holds_trigger(data: bytes) -> bool:
    """Whether ``data`` holds any trigger, in any ASCII case: one RE2 search, cheaper for one line than testing
    each trigger."""
    return _ANY_TOP_TRIGGER.contains(data)


def rules_for_line(lowered: str) -> list[int]:
    """Indexes of the rules whose triggers occur in one line, lower-cased as text (a superset of its bytes' rules:
    a few non-ASCII letters lower to ASCII ones)."""
    data = lowered.encode("utf-8", "surrogatepass")
    pending = [
        node
        for any_of, group in _TOP_TEXT_TRIGGERS
        if any_of.contains(data)
        for trigger, node in group
        if trigger in lowered
    ]
    found: set[int] = set()
    while pending:
        trigger, rules, _children = pending.pop()
        found.update(rules)
        pending.extend(_NODES[child] for child, text in _TEXT_CHILDREN[trigger] if text in lowered)
    return sorted(found)


def redact_line_bytes(line: bytes, rules: list[int]) -> bytes:
    """One line (no newline) with ``rules`` applied, then the shape checks (key material, random runs)."""
    lowered = line.lower()
    for index in rules:
        line, lowered = _apply(RULES[index], line, lowered)
    return mask_random_runs(mask_key_material(line))


def redact_bytes(data: bytes) -> bytes:
    """``data`` (UTF-8) with every recognised secret replaced by the mask; the same object if nothing changed."""
    lowered = data.lower()
    if b"\n" not in data:
        return redact_line_bytes(data, _triggered(lowered))
    candidates = _candidate_lines(lowered)
    by_line = lowered.find(b"private") >= 0  # a key block may span lines: work line by line
    redacted = _redact_lines(data, lowered, candidates) if by_line else _redact_spans(data, lowered, candidates)
    if candidates:
        redacted = mask_dangling_values(redacted, lowered, ((start, end) for start, end, _rules in candidates))
    return mask_random_runs(mask_key_material_in_block(redacted))


# When the last _DENSE_AFTER lines with triggers took fewer than _DENSE_LINE_BYTES each, the block is dense.
_DENSE_AFTER = 32
_DENSE_LINE_BYTES = 64


def _candidate_lines(lowered: bytes) -> list[tuple[int, int, list[int]]]:
    """(start, end, rules) of each line of a block that holds a trigger, in order.

    One RE2 search finds the next line holding any trigger (a DFA: one pass, whatever the number of triggers);
    that line alone is then tested trigger by trigger, and the search goes on from the next line. So a block
    costs one pass plus a few microseconds per line that holds a trigger, never a pass per trigger. A dense
    stretch ends the list with one entry for the rest of the block, which may span lines.
    """
    found: list[tuple[int, int, list[int]]] = []
    pos, size = 0, len(lowered)
    search = _ANY_TRIGGER_LOWERED.search
    while pos < size:
        spans = search(lowered, pos)
        if spans is None:
            break
        hit = spans[0][0]
        start = lowered.rfind(b"\n", 0, hit) + 1
        if len(found) >= _DENSE_AFTER and start - found[-_DENSE_AFTER][0] < _DENSE_AFTER * _DENSE_LINE_BYTES:
            # Lines with triggers come thick and short (a crafted log): the per-line work would cost more than
            # the text. The rest of the block is one run of lines, and each rule any of them needs runs on it once.
            rules = rules_for_line(lowered[start:].decode("latin-1"))
            found.append((start, size, rules))
            break
        end = lowered.find(b"\n", hit)
        end = size if end == -1 else end
        rules = rules_for_line(lowered[start:end].decode("latin-1"))
        if rules:
            found.append((start, end, rules))
        pos = end + 1
    return found


def _redact_spans(text: bytes, lowered: bytes, candidates: list[tuple[int, int, list[int]]]) -> bytes:
    """A block with no key block in it: only lines with triggers are cut out, redacted and put back."""
    if not candidates:
        return text
    pieces: list[bytes] = []
    last = 0
    for start, end, rules in candidates:
        line, line_lowered = text[start:end], lowered[start:end]
        for rule in rules:
            line, line_lowered = _apply(RULES[rule], line, line_lowered)
        pieces += [text[last:start], line]
        last = end
    pieces.append(text[last:])
    return b"".join(pieces)


def _redact_lines(text: bytes, lowered: bytes, candidates: list[tuple[int, int, list[int]]]) -> bytes:
    """A block that may hold a private key: line by line."""
    lines = text.split(b"\n")
    lowered_lines = lowered.split(b"\n")
    mask_key_blocks(lines, lowered_lines)
    starts = list(accumulate((len(line) + 1 for line in lowered_lines), initial=0))
    for start, end, rules in candidates:
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, end) - 1  # the same line, unless the entry is a dense run of lines
        text_run, lowered_run = b"\n".join(lines[first : last + 1]), b"\n".join(lowered_lines[first : last + 1])
        for rule in rules:
            text_run, lowered_run = _apply(RULES[rule], text_run, lowered_run)
        lines[first : last + 1] = text_run.split(b"\n")
    return b"\n".join(lines)


def _apply(rule: Rule, line: bytes, lowered: bytes) -> tuple[bytes, bytes]:
    """``rule`` applied to one line (or a run of lines); the new text and its lowered form.

    Linear in the line: each search starts where the last accepted match ended, or one byte after the start of a
    refused one (whose match is bounded: see ``Rule``).
    """
    subject = lowered if rule.folded else line
    search, tail, replace = rule.pattern.search, rule.tail, rule.replace
    pieces: list[bytes] = []
    last = pos = 0
    end_of_line = len(line)
    while pos <= end_of_line:
        spans = search(subject, pos)
        if spans is None:
            break
        start, end = spans[0]
        replacement = replace(line, spans)
        if replacement is None:
            pos = subject.find(b"\n", end) + 1 if rule.first_only else start + 1
            if pos == 0:
                break
            continue
        if tail is not None:
            extended = tail.match(subject, end)
            end = extended[0][1] if extended is not None else end
        pieces += [line[last:start], replacement]
        last = end
        if rule.first_only:  # on to the next line, if the text holds several
            pos = subject.find(b"\n", end) + 1
            if pos == 0:
                break
            continue
        pos = end if end > start else end + 1
    if not pieces:
        return line, lowered
    pieces.append(line[last:])
    result = b"".join(pieces)
    return (result, result.lower()) if result != line else (line, lowered)
