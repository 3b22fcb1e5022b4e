"""The render budget of a chat template: CPU time, string, list and integer sizes, memory held.

jinja2's sandbox keeps a template away from Python's internals but not from the process's time
and memory: nested loops that do nothing, a string doubled in a loop, `'a'.center(10**9)` or
`[1] | batch(10**9, 'x')` hang the process or fill its memory before any output limit sees it.
Here every render runs under a `RenderBudget`, checked inside the process (no subprocess, no
signal, so other threads are untouched):

- time: a deadline on the rendering thread's CPU time (`time.thread_time`), checked at every
  loop iteration, sandboxed call, intercepted operator, filter, test, comparison, `~` and
  output. The clock is read every few dozen checks (and at once after a big value), because
  reading it costs more than the rest of a check;
- size: every value an operator, `~`, call, filter, slice or block builds is measured, and
  the arguments that multiply (a width, a count, a repetition, a precision, an indent, a
  separator times the items) are checked *before* the call, so nothing past
  `max_chars` characters, `max_items` items or `max_int_bits` bits is ever allocated;
- memory held: what those values add up to is charged; once the charges pass a window the
  process's resident memory is read, and a render whose memory grew past `max_bytes` stops
  (this catches a list of many distinct big strings, each one within its bounds);
- depth: recursion through macros or recursive loops ends in Python's RecursionError.

What runs past a bound raises `BudgetExceeded` naming it; `onebit.text.chat.render` reports it
as a `ChatTemplateError`.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import sys
import threading
import time
import tracemalloc
from dataclasses import dataclass
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter, SecurityError
from jinja2.utils import Namespace

# the clock is read every _EVERY checks; a value of n characters counts n >> _WEIGHT checks, so
# the clock is read right after any step that touched a big value
_EVERY = 32
_WEIGHT = 12
# the memory a render holds is read once its charges pass this, then at every quarter of
# max_bytes: a render of ordinary size never pays for the read
_FIRST_WINDOW = 1 << 20


@dataclass(frozen=True)
class RenderBudget:
    """What one render of a chat template may spend.

    seconds: CPU time of the rendering thread; max_chars: the longest string (and the rendered
    text may be as long, see MAX_RENDERED_CHARS); max_items: the longest list, tuple, dict or
    range; max_int_bits: the largest integer an operator may build; max_bytes: how much the
    process's memory may grow while the template builds values.
    """

    seconds: float = 2.0
    max_chars: int = 10_000_000
    max_items: int = 1_000_000
    max_int_bits: int = 1 << 16
    max_bytes: int = 128 << 20

    def __post_init__(self) -> None:
        # a budget is the caller's, not the template's: a bad one is a ValueError naming it
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, int | float) \
                or not 0 < self.seconds < float("inf"):
            raise ValueError(f"RenderBudget.seconds must be a positive number of seconds, "
                             f"got {self.seconds!r}")
        for name in ("max_chars", "max_items", "max_int_bits", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"RenderBudget.{name} must be a positive int, got {value!r}")


DEFAULT_BUDGET = RenderBudget()


class BudgetExceeded(Exception):
    """A render went past its budget; the message names what was refused. Not a ValueError or
    TypeError on purpose: jinja2's filters catch those, and this must reach `render`."""


def _rss() -> int | None:
    """The process's resident memory in bytes, or None where it cannot be read. While
    tracemalloc traces, its count of live Python memory instead: exact, where resident memory
    misses what the process had freed earlier and now reuses."""
    if tracemalloc.is_tracing():
        return tracemalloc.get_traced_memory()[0]
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource  # the peak, not the current size: it over-counts, never under
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
    except (ImportError, OSError, ValueError):
        return None


class Meter:
    """One render's account: the deadline, the clock countdown, the memory charged."""

    __slots__ = ("budget", "deadline", "countdown", "charged", "next_check", "rss0")

    def __init__(self, budget: RenderBudget) -> None:
        self.budget = budget
        self.deadline = time.thread_time() + budget.seconds
        self.countdown = _EVERY
        self.charged = 0
        self.next_check = _FIRST_WINDOW
        self.rss0: int | None = None

    def tick(self, weight: int = 1) -> None:
        self.countdown -= weight
        if self.countdown <= 0:
            self.countdown = _EVERY
            if time.thread_time() > self.deadline:
                raise BudgetExceeded(f"the template ran past its {self.budget.seconds} s "
                                     "budget (CPU time)")

    # -- sizes --------------------------------------------------------------------------
    def chars(self, n: int, where: str) -> None:
        """Refuse a string of `n` characters before or after building it."""
        if n > self.budget.max_chars:
            raise BudgetExceeded(f"a string of {n} characters (bound {self.budget.max_chars}) "
                                 f"from {where}")

    def items(self, n: int, where: str) -> None:
        if n > self.budget.max_items:
            raise BudgetExceeded(f"a sequence of {n} items (bound {self.budget.max_items}) "
                                 f"from {where}")

    def width(self, n, where: str) -> None:
        """Refuse a width, count or precision that would pad or repeat past max_chars."""
        if isinstance(n, int) and n > self.budget.max_chars:
            raise BudgetExceeded(f"a width of {n} (bound {self.budget.max_chars}) in {where}")

    def bits(self, n: int, where: str) -> None:
        if n > self.budget.max_int_bits:
            raise BudgetExceeded(f"an integer of {n} bits (bound {self.budget.max_int_bits}) "
                                 f"from {where}")

    def admit(self, value, where: str):
        """`value`, built by `where`, measured against the bounds and charged; an iterator
        comes back wrapped so that each item it yields is counted."""
        if type(value) is str and len(value) <= 4096:
            self.charged += len(value)
            if self.charged > self.next_check:
                self.charge(0)
            return value
        if isinstance(value, str):
            n = len(value)
            if n > self.budget.max_chars:
                self.chars(n, where)
            self.charge(n if value.isascii() else 4 * n)
        elif isinstance(value, list | tuple | dict | set | frozenset):
            n = len(value)
            if n > self.budget.max_items:
                self.items(n, where)
            self.charge(8 * n + 56)
        elif isinstance(value, bytes | bytearray):
            self.chars(len(value), where)
            self.charge(len(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > 64:
                self.bits(value.bit_length(), where)
                self.charge(value.bit_length() >> 3)
        elif _is_iterator(value):
            return self.counted(value, where)
        return value

    def charge(self, size: int) -> None:
        self.charged += size
        if size >> _WEIGHT:
            self.tick(size >> _WEIGHT)
        if self.charged > self.next_check:
            self._check_memory()

    def _check_memory(self) -> None:
        """Past a window of charges: has the process's memory grown past max_bytes since the
        render built its first MiB? (The charges count what was built, most of it freed
        again; resident memory counts what is still held. Where it cannot be read, the
        charges stand in for it.)"""
        rss, limit = _rss(), self.budget.max_bytes
        if self.next_check == _FIRST_WINDOW:
            self.rss0 = rss
        else:
            grown = rss - self.rss0 if rss is not None and self.rss0 is not None \
                else self.charged
            if grown > limit:
                raise BudgetExceeded(f"the template held {grown >> 20} MiB of values (bound "
                                     f"{limit >> 20} MiB)")
        self.next_check = self.charged + max(limit // 4, 1)

    def counted(self, iterable, where: str):
        """The items of `iterable`, each one a check; more than max_items is refused."""
        bound = self.budget.max_items
        for n, item in enumerate(iterable, 1):
            if n > bound:
                self.items(n, where)
            self.tick()
            yield item

    def looped(self, iterable):
        """A for loop's iterable, one check per iteration (loops that do nothing but iterate
        still spend the budget)."""
        for item in iterable:
            self.countdown -= 1
            if self.countdown <= 0:
                self.tick(0)
            yield item


def _is_iterator(value) -> bool:
    return hasattr(type(value), "__next__") and hasattr(type(value), "__iter__")


class _Local(threading.local):
    meter: Meter | None = None


_local = _Local()


def metered(budget: RenderBudget):
    """Context manager: the calling thread's renders spend `budget` until it exits."""
    return _Metering(budget)


class _Metering:
    def __init__(self, budget: RenderBudget) -> None:
        self.meter = Meter(budget)

    def __enter__(self) -> Meter:
        self.outer = _local.meter
        _local.meter = self.meter
        return self.meter

    def __exit__(self, *exc) -> None:
        _local.meter = self.outer


# -- how big a value's text is, before str() or json.dumps() builds it ---------------------

def text_size(value, meter: Meter, cap: int | None = None) -> tuple[int, int, int]:
    """(characters, nodes, depth) of `value` as text, walked without building it. The walk
    stops once the characters and nodes pass `cap` (max_chars by default), so it costs at most
    about that many steps even for a list of a million references to one big list; nesting
    past _MAX_DEPTH (only a cycle gets there) counts as past the cap."""
    cap = meter.budget.max_chars if cap is None else cap
    size = count = depth = 0
    stack = [(iter((value,)), 1)]
    while stack:
        it, level = stack[-1]
        item = next(it, _END)
        if item is _END:
            stack.pop()
            continue
        count += 1
        if level > depth:
            depth = level
            if depth > _MAX_DEPTH:
                return cap + 1, count, depth
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, bytes | bytearray):
            size += 4 * len(item) + 3
        elif isinstance(item, bool) or item is None:
            size += 5
        elif isinstance(item, int):
            size += item.bit_length() // 3 + 2
        elif isinstance(item, float):
            size += 24
        elif isinstance(item, dict):
            size += 2 + 4 * len(item)
            stack.append((itertools.chain.from_iterable(item.items()), level + 1))
        elif isinstance(item, list | tuple | set | frozenset):
            size += 2 + 2 * len(item)
            stack.append((iter(item), level + 1))
        elif isinstance(item, Namespace):
            size += 13
            stack.append((iter((object.__getattribute__(item, "_Namespace__attrs"),)),
                          level + 1))
        elif not isinstance(item, jinja2.Undefined):
            size += 100  # an object's repr: `<jinja2.utils.Cycler object at 0x...>`
        if size + count > cap:
            break
        if count & 1023 == 0:
            meter.tick(32)
    return size, count, depth


_END = object()
_MAX_DEPTH = 1000


def _check_text(meter: Meter, value, where: str, factor: int = 1) -> None:
    if isinstance(value, str):
        meter.chars(len(value) * factor, where)
        return
    size, _, _ = text_size(value, meter)
    meter.chars(size * factor, where)


# -- what the sandbox checks before a call --------------------------------------------------

_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?.")
_FORMAT_SPEC_NUMBERS = re.compile(r"\d+")
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _check_printf(meter: Meter, fmt, args, where: str) -> None:
    """`fmt % args`: the widths and precisions of its conversions, and its arguments as text,
    must fit max_chars before Python pads them."""
    stars = [a for a in (args if isinstance(args, tuple) else (args,))
             if isinstance(a, int) and not isinstance(a, bool)]
    star = max((abs(a) for a in stars), default=0)
    total = len(fmt)
    for conv in _PRINTF.finditer(fmt):
        for number in conv.groups():
            if number == "*":
                total += star
            elif number:
                total += int(number)
        meter.width(total, where)
    size, _, _ = text_size(args, meter)
    meter.chars(total + size, where)


def _replace_size(s, old, new, count=-1) -> int:
    if not isinstance(old, str | bytes) or not isinstance(new, str | bytes):
        return len(s)
    found = len(s) + 1 if not old else s.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * (len(new) - len(old))


def _check_str_method(meter: Meter, name: str, s, args, kwargs) -> dict | None:
    """Checks on `s.name(*args, **kwargs)` for str and bytes methods that pad, repeat or split;
    may return new keyword arguments (a split capped at max_items + 1 parts)."""
    where = f"'{name}'"
    if name in ("center", "ljust", "rjust", "zfill"):
        width = args[0] if args else kwargs.get("width")
        meter.width(width, where)
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            meter.chars(len(s) + s.count("\t" if isinstance(s, str) else b"\t") * size, where)
    elif name == "replace":
        meter.chars(_replace_size(s, *args[:3], **kwargs), where)
    elif name == "join":
        items = list(meter.counted(args[0], where)) if args else []
        sep = len(s) * max(len(items) - 1, 0)
        meter.chars(sep + sum(len(x) for x in items if isinstance(x, str | bytes)), where)
        return {"__args__": (items,)}
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        meter.chars(len(s) * longest, where)
    elif name in ("split", "rsplit"):
        # cap the split itself: ('a ' * 5_000_000).split() would build 5 million strings
        bound = meter.budget.max_items
        sep = args[0] if args else kwargs.get("sep")
        maxsplit = args[1] if len(args) > 1 else kwargs.get("maxsplit", -1)
        if isinstance(maxsplit, int) and (maxsplit < 0 or maxsplit > bound) \
                and len(s) > bound:
            return {"__split__": (sep, bound)}
    elif name == "splitlines" and len(s) > meter.budget.max_items and isinstance(s, str):
        meter.items(sum(s.count(c) for c in _LINE_BREAKS) + 1, where)
    return None


class _BoundedFormatter(SandboxedFormatter):
    """`str.format` in the sandbox, with each field's width and the total text bounded."""

    def __init__(self, env, meter: Meter) -> None:
        super().__init__(env)
        self.meter = meter
        self.total = 0

    def convert_field(self, value, conversion):
        if conversion is not None:  # `{!r}` builds the repr before format_field sees it
            _check_text(self.meter, value, "'format'")
        return super().convert_field(value, conversion)

    def format_field(self, value, format_spec: str):
        meter = self.meter
        meter.tick()
        widths = sum(int(n) for n in _FORMAT_SPEC_NUMBERS.findall(format_spec))
        meter.width(widths, "'format'")
        size = len(value) if isinstance(value, str) else text_size(value, meter)[0]
        self.total += max(widths, size)
        meter.chars(self.total, "'format'")
        return super().format_field(value, format_spec)


# -- filters -------------------------------------------------------------------------------

def _check_center(m, value, width=80):
    m.width(width, "'center'")


def _check_indent(m, s, width=4, first=False, blank=False):
    pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    if isinstance(s, str):
        m.chars(len(s) + (s.count("\n") + 1) * pad, "'indent'")
    else:
        m.width(pad, "'indent'")


def _check_wordwrap(m, s, width=79, break_long_words=True, wrapstring=None,
                    break_on_hyphens=True):
    if isinstance(s, str):
        wrap = len(wrapstring) if isinstance(wrapstring, str) else 1
        words = s.count(" ") + s.count("\n") + 1  # a long word is a line of its own
        lines = len(s) // width + words if isinstance(width, int) and width > 0 else len(s)
        m.chars(len(s) + min(lines, len(s) + 1) * wrap, "'wordwrap'")


def _check_truncate(m, s, length=255, killwords=False, end="...", leeway=None):
    if isinstance(s, str) and isinstance(end, str):
        m.chars(len(s) + len(end), "'truncate'")


def _check_format(m, value, *args, **kwargs):
    if isinstance(value, str):
        _check_printf(m, value, kwargs or args, "'format'")


def _check_replace(m, s, old, new, count=None):
    if isinstance(s, str):
        m.chars(_replace_size(s, old, new, -1 if count is None else count), "'replace'")


def _check_batch(m, value, linecount, fill_with=None):
    if isinstance(linecount, int):
        m.items(linecount, "'batch'")


def _check_slice(m, value, slices, fill_with=None):
    if isinstance(slices, int):
        m.items(slices, "'slice'")


def _check_sized(name):
    def check(m, value, *args, **kwargs):
        if hasattr(value, "__len__"):
            m.items(len(value), f"'{name}'")
    return check


def _check_text_filter(name, factor=1):
    def check(m, value, *args, **kwargs):
        _check_text(m, value, f"'{name}'", factor)
    return check


@jinja2.pass_environment
def _sum(environment, iterable, attribute=None, start=0):
    """jinja2's sum; of lists, one `+` at a time: C's sum() of lists is quadratic and cannot
    be stopped once it runs."""
    meter = _local.meter
    if meter is None or not isinstance(start, list | tuple):
        return jinja2.filters.do_sum(environment, iterable, attribute, start)
    if attribute is not None:
        iterable = map(jinja2.filters.make_attrgetter(environment, attribute), iterable)
    total = start
    for item in meter.counted(iterable, "'sum'"):
        _check_binop(meter, "+", total, item)
        total = meter.admit(total + item, "'sum'")
    return total


def _check_pprint(m, value):
    size, count, depth = text_size(value, m)
    m.chars(size + count * depth, "'pprint'")


def _check_tojson(m, value, ensure_ascii=False, indent=None, separators=None,
                  sort_keys=False):
    size, count, depth = text_size(value, m)
    pad = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    m.chars(size + count * (max(pad, 0) * depth + 1), "'tojson'")


FILTER_CHECKS = {
    "center": _check_center, "indent": _check_indent, "wordwrap": _check_wordwrap,
    "truncate": _check_truncate, "format": _check_format, "replace": _check_replace,
    "batch": _check_batch, "slice": _check_slice, "list": _check_sized("list"),
    "string": _check_text_filter("string"), "join": None,  # join: see _join
    "e": _check_text_filter("escape", 6), "escape": _check_text_filter("escape", 6),
    "forceescape": _check_text_filter("forceescape", 6),
    "urlencode": _check_text_filter("urlencode", 9), "urlize": _check_text_filter("urlize", 12),
    "xmlattr": _check_text_filter("xmlattr", 6), "safe": _check_text_filter("safe"),
    "pprint": _check_pprint, "tojson": _check_tojson,
}


def _join(eval_ctx, value, d="", attribute=None):
    """jinja2's join, with the items taken one by one (each a check) and the joined text
    measured before it is built."""
    meter = _local.meter
    items = list(value) if meter is None else list(meter.counted(value, "'join'"))
    if meter is not None:
        total = len(str(d)) * max(len(items) - 1, 0) if isinstance(d, str) else 0
        for item in items:
            total += len(item) if isinstance(item, str) else text_size(item, meter)[0]
            meter.chars(total, "'join'")
    return jinja2.filters.do_join(eval_ctx, items, d, attribute)


_join = jinja2.pass_eval_context(_join)


_PassArg = jinja2.utils._PassArg


def _guard_filter(name, fn, check):
    """`fn` with a check per call, `check` on its arguments first, and its result measured.

    The guard takes the context whatever `fn` takes: jinja2 folds a filter of constants at
    compile time unless it takes the context, and there no render's budget would stand."""
    kind = _PassArg.from_obj(fn)

    @functools.wraps(fn)
    def guarded(context, *args, **kwargs):
        lead = () if kind is None else (context,) if kind is _PassArg.context \
            else (context.eval_ctx,) if kind is _PassArg.eval_context \
            else (context.environment,)
        meter = _local.meter
        if meter is None:
            return fn(*lead, *args, **kwargs)
        meter.tick()
        if check is not None:
            check(meter, *args, **kwargs)
        return meter.admit(fn(*lead, *args, **kwargs), f"'{name}'")

    return jinja2.pass_context(guarded)


def _guard_test(fn):
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        meter = _local.meter
        if meter is not None:
            meter.tick()
        return fn(*args, **kwargs)

    return guarded


# -- globals -------------------------------------------------------------------------------

class TemplateRaised(Exception):
    """What `raise_exception(...)` in a template raises; caught and reported as the
    template's."""


def raise_exception(message):
    raise TemplateRaised(str(message)[:300])


def strftime_now(fmt):
    fmt = str(fmt)
    meter = _local.meter
    if meter is not None:  # '%c' is 24 characters of output for 2 of input
        meter.chars(len(fmt) + 64 * fmt.count("%"), "'strftime_now'")
    return datetime.now().strftime(fmt)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # templates print tool schemas with this; jinja2's own tojson escapes HTML, which changes
    # the text the model was trained on (transformers' tojson does the same)
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _range(*args):
    rng = range(*args)
    meter = _local.meter
    if meter is not None:
        try:
            n = len(rng)
        except OverflowError:
            n = meter.budget.max_items + 1 if rng else 0
            n = max(n, abs(rng.stop - rng.start) // max(abs(rng.step), 1))
        meter.items(n, "range")
    return rng


def _lipsum(n=5, html=True, min=20, max=100):
    meter = _local.meter
    if meter is not None:
        for value, what in ((n, "paragraphs"), (min, "words"), (max, "words")):
            if isinstance(value, int) and not isinstance(value, bool) and value > 1000:
                raise BudgetExceeded(f"lipsum of {value} {what} (bound 1000)")
        if isinstance(n, int) and isinstance(max, int):
            meter.chars(n * max * 16, "lipsum")
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)


class TemplateNamespace(Namespace):
    """A namespace that takes no underscore-prefixed attribute (as transformers' does): such
    names are how a sandbox escape would reach a namespace's internals."""

    def __init__(*args, **kwargs):  # noqa: N805 - jinja2's signature trick, `namespace(self=1)`
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        TemplateNamespace._check_name(name)
        Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"a namespace cannot hold the underscore attribute {name!r}")


class _Dict:
    """`dict(...)` without `dict`'s class attributes (`dict.fromkeys` stays, as transformers
    gives it)."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, keys, value=None):
        meter = _local.meter
        if meter is not None and hasattr(keys, "__len__"):
            meter.items(len(keys), "'dict.fromkeys'")
        return dict.fromkeys(keys, value)


class GenerationExtension(Extension):
    """`{% generation %}...{% endgeneration %}`, which transformers' templates use to mark the
    assistant's text for training masks; rendering keeps the text as it is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


class _MeteredParse(Extension):
    """One check per token parsed: compiling a template is part of its first render, and a
    template of a million characters takes seconds to compile."""

    def filter_stream(self, stream):
        for token in stream:
            meter = _local.meter
            if meter is not None:
                meter.tick()
            yield token


class _MeteredCodeGenerator(CodeGenerator):
    """jinja2's code generator with one check per node it visits."""

    def visit(self, node, *args, **kwargs):
        meter = _local.meter
        if meter is not None:
            meter.tick()
        return super().visit(node, *args, **kwargs)


# -- the environment -----------------------------------------------------------------------

class BudgetSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every seam it offers metered: calls, the operators that
    build (`+`, `*`, `**`, `%`, `//`), attribute and item access that builds (slices), output,
    the joins of blocks and macros, filters, tests, and (through `instrument`) for loops,
    comparisons and `~`."""

    intercepted_binops = frozenset(["+", "*", "**", "%", "//"])
    code_generator_class = _MeteredCodeGenerator

    def __init__(self) -> None:
        # the default Undefined, not StrictUndefined: templates test `{% if tools %}` for
        # variables a caller may not pass; calling or indexing an undefined still fails
        super().__init__(trim_blocks=True, lstrip_blocks=True, finalize=_finalize,
                         extensions=["jinja2.ext.loopcontrols", GenerationExtension,
                                     _MeteredParse])
        self.filters["tojson"] = tojson
        self.filters["join"] = _join
        self.filters["sum"] = _sum
        self.filters = {name: _guard_filter(name, fn, FILTER_CHECKS.get(name))
                        for name, fn in self.filters.items()}
        # internal filters the AST rewrite calls: names no template can spell
        self.filters[_LOOP] = _looped
        self.filters[_TICK] = _ticked
        self.filters[_CONCAT] = _concat
        self.filters[_SLICE] = _sliced
        self.tests = {name: _guard_test(fn) for name, fn in self.tests.items()}
        self.globals.update(range=_range, lipsum=_lipsum, raise_exception=raise_exception,
                            strftime_now=strftime_now, namespace=TemplateNamespace,
                            dict=_Dict())

    # block, macro and caller bodies are joined with `environment.concat`: measure the parts
    # first, so `{% set s %}{{ x }}{{ x }}{% endset %}` in a loop cannot double past the bound
    @staticmethod
    def concat(parts) -> str:
        meter = _local.meter
        if meter is not None:
            if not isinstance(parts, list):
                parts = list(parts)
            meter.chars(sum(map(len, parts)), "a block's text")
        text = "".join(parts)
        if meter is not None:
            meter.admit(text, "a block's text")
        return text

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja2's signature
        meter = _local.meter
        if meter is None:
            return super().call(__context, __obj, *args, **kwargs)
        meter.tick()
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str | bytes | bytearray):
            name = getattr(__obj, "__name__", "")
            changed = _check_str_method(meter, name, owner, args, _callers_kwargs(kwargs))
            if changed is not None:
                if "__args__" in changed:
                    args = changed["__args__"]
                else:
                    return _capped_split(meter, owner, name, *changed["__split__"])
        return meter.admit(super().call(__context, __obj, *args, **kwargs),
                           f"'{getattr(__obj, '__name__', 'a call')}'")

    def call_binop(self, context, operator, left, right):
        meter = _local.meter
        if meter is None:
            return self.binop_table[operator](left, right)
        if operator == "+" and type(left) is str and type(right) is str:
            # the common case of real templates ('<|im_start|>' + role + ...), inlined: the
            # general path below would make them a third slower
            n = len(left) + len(right)
            if n > 4096:
                meter.chars(n, "'+'")
            meter.countdown -= 1
            if meter.countdown <= 0:
                meter.tick(0)
            meter.charged += n
            if meter.charged > meter.next_check:
                meter.charge(0)
            return left + right
        meter.tick()
        _check_binop(meter, operator, left, right)
        return meter.admit(self.binop_table[operator](left, right), f"'{operator}'")

    def wrap_str_format(self, value):
        """jinja2's `str.format` wrapper, with a formatter that bounds widths and the text."""
        wrapped = super().wrap_str_format(value)
        meter = _local.meter
        if wrapped is None or meter is None:
            return wrapped
        f_self, is_map = value.__self__, value.__name__ == "format_map"
        env = self

        def bounded(*args, **kwargs):
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one positional argument")
                args, kwargs = (), args[0]
            formatter = _BoundedFormatter(env, meter)
            return meter.admit(type(f_self)(formatter.vformat(f_self, args, kwargs)),
                               "'format'")

        return functools.update_wrapper(bounded, value)


# what jinja2 adds to a call made inside a loop or block, for `Context.call` to take out again
_JINJA_CALL_KWARGS = ("_loop_vars", "_block_vars")


def _callers_kwargs(kwargs: dict) -> dict:
    """The keyword arguments the template wrote: `s.replace('a', 'b')` inside a for loop comes
    to `call` with jinja2's `_loop_vars` beside them, which no str method takes."""
    if not kwargs:
        return kwargs
    return {k: v for k, v in kwargs.items() if k not in _JINJA_CALL_KWARGS}


def _check_binop(meter: Meter, operator: str, left, right) -> None:
    """Refuse, before it runs, an operator whose result would pass a bound."""
    if operator == "+":
        if isinstance(left, str) and isinstance(right, str):
            n = len(left) + len(right)
            if n > 4096:
                meter.chars(n, "'+'")
        elif isinstance(left, list | tuple) and isinstance(right, list | tuple):
            meter.items(len(left) + len(right), "'+'")
    elif operator == "*":
        sized, count = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(count, int) and not isinstance(count, bool):
            if isinstance(sized, str | bytes):
                meter.chars(len(sized) * count, "'*'")
            elif isinstance(sized, list | tuple):
                meter.items(len(sized) * count, "'*'")
            elif isinstance(sized, int) and not isinstance(sized, bool):
                meter.bits(sized.bit_length() + count.bit_length(), "'*'")
    elif operator == "**":
        if isinstance(right, int) and isinstance(left, int) and not isinstance(left, bool):
            if abs(right) > 64 and abs(left) > 1:
                raise BudgetExceeded(f"the power {right} (bound 64) from '**'")
            if right > 0:
                meter.bits(max(left.bit_length(), 1) * right, "'**'")
    elif operator == "%" and isinstance(left, str):
        _check_printf(meter, left, right, "'%'")


def _capped_split(meter: Meter, s, name: str, sep, bound: int):
    parts = getattr(s, name)(sep, bound)
    if len(parts) > bound:
        meter.items(len(parts) + 1, f"'{name}'")
    return meter.admit(parts, f"'{name}'")


def _finalize(value):
    """Every `{{ }}` value, measured before it becomes text (a list of a million references to
    one big string prints as terabytes)."""
    meter = _local.meter
    if meter is not None:
        meter.tick()
        if not isinstance(value, str):
            _check_text(meter, value, "'{{ }}'")
    return value


_LOOP, _TICK, _CONCAT, _SLICE = "onebit loop", "onebit tick", "onebit ~", "onebit slice"


@jinja2.pass_context
def _looped(context, value):
    meter = _local.meter
    return value if meter is None or isinstance(value, jinja2.Undefined) \
        else meter.looped(value)


@jinja2.pass_context
def _ticked(context, value):
    meter = _local.meter
    if meter is not None:
        meter.countdown -= 1
        if meter.countdown <= 0:
            meter.tick(0)
    return value


@jinja2.pass_context
def _concat(context, values):
    """`a ~ b ~ c`: the operands' text measured before it is joined."""
    meter = _local.meter
    if meter is None:
        return "".join(map(str, values))
    meter.tick()
    total = 0
    for value in values:
        total += len(value) if isinstance(value, str) else text_size(value, meter)[0]
    meter.chars(total, "'~'")
    return meter.admit("".join(map(str, values)), "'~'")


@jinja2.pass_context
def _sliced(context, value):
    meter = _local.meter
    return value if meter is None else meter.admit(value, "a slice")


def instrument(tree: nodes.Template, env: jinja2.Environment) -> nodes.Template:
    """The parsed template with the seams the sandbox lacks put in: each for loop's iterable,
    each comparison, each `~` and each slice goes through an internal filter."""

    def wrap(node, name):
        return nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)

    for loop in tree.find_all(nodes.For):
        loop.iter = wrap(loop.iter, _LOOP)
    meter = _local.meter
    for parent in list(tree.find_all(nodes.Node)):
        if meter is not None:
            meter.tick()
        for field in parent.fields:
            child = getattr(parent, field, None)
            if isinstance(child, nodes.Node):
                setattr(parent, field, _rewrite(child, wrap))
            elif isinstance(child, list):
                setattr(parent, field, [_rewrite(c, wrap) if isinstance(c, nodes.Node) else c
                                        for c in child])
    tree.set_environment(env)
    return tree


def _rewrite(node, wrap):
    if isinstance(node, nodes.Concat):
        return wrap(nodes.Tuple(node.nodes, "load", lineno=node.lineno), _CONCAT)
    if isinstance(node, nodes.Compare | nodes.Test):
        return wrap(node, _TICK)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return wrap(node, _SLICE)
    return node


def compile_template(source: str) -> jinja2.Template:
    env = BudgetSandbox()
    return env.from_string(instrument(env.parse(source), env))
