"""A hostile chat template cannot hang the process or fill its memory: each class of attack
ends in one ChatTemplateError naming what was refused, within the budget plus a margin, with
the memory it allocated (tracemalloc's peak) bounded. (What the budget costs real templates
is timed by tests/text/test_real_templates.py run as a script.)
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
import tracemalloc

import pytest

from onebit.text import ChatTemplateError, template_budget
from onebit.text.chat import render
from onebit.text.template_budget import RenderBudget

# a low CPU budget keeps the suite fast; the bounds on sizes are the defaults but for memory
# held, which is lowered so that its test allocates little
BUDGET = RenderBudget(seconds=0.2, max_bytes=48 << 20)
# The tests of a size, count or depth bound run under a CPU budget ten times larger: those
# bounds fire before the value is built, so the test costs no more, but on a loaded two-core
# machine under tracemalloc the work up to the bound (ten 1 MB strings) can pass 0.2 s of CPU,
# and then the CPU bound fired first and the test failed on which bound it named.
SIZE_BUDGET = dataclasses.replace(BUDGET, seconds=2.0)
# wall time on a shared two-core machine, with tracemalloc slowing every allocation
MARGIN_S = 2.0
MESSAGES = [{"role": "user", "content": "hi"}]


def refused(template: str, says: str, *, peak_mib: int = 64, budget=BUDGET) -> str:
    """Render `template`; assert a one-line ChatTemplateError matching `says`, within the budget
    plus MARGIN_S of wall time, with at most `peak_mib` MiB allocated at the peak."""
    # A full collection of a long-lived xdist worker's heap can take more CPU than the 0.2 s
    # budget, and it lands on whichever allocation triggers it: none during the render, so the
    # bound that fires is the template's, not the collector's. (Not a collection first either:
    # on a worker's heap, after the models and vocabularies other files load, each took about
    # 0.3 s, three times the test; with the collector off nothing can land in the render.)
    gc.disable()
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ChatTemplateError, match=says) as info:
            render(template, MESSAGES, budget=budget)
        wall = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] >> 20
    finally:
        tracemalloc.stop()
        gc.enable()
    message = str(info.value)
    assert "\n" not in message
    assert wall < budget.seconds + MARGIN_S, f"{wall:.2f} s for {message}"
    assert peak <= peak_mib, f"{peak} MiB allocated for {message}"
    return message


@pytest.mark.parametrize("template", [
    "{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}",
    # the iterables built once, outside: nothing in the loops but the iteration itself
    "{% set r = range(10**5) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}",
    "{% set r = 'x' * 1000 %}{% for i in r %}{% for j in r %}{% for k in r %}{% endfor %}"
    "{% endfor %}{% endfor %}",
    # loops over a list of messages, not a range: each iteration is checked wherever from
    "{% for a in messages * 1000 %}{% for b in messages * 1000 %}{% for c in messages * 1000 %}"
    "{% endfor %}{% endfor %}{% endfor %}",
    "{% for a in 'x' * 100000 %}{% for b in 'x' * 100000 %}{% endfor %}{% endfor %}",
    # a loop's items filtered by a condition that is never true
    "{% for i in range(10**5) %}{% for j in range(10**5) if j < 0 %}{% endfor %}{% endfor %}",
    # comparisons of big strings in straight-line code, no loop at all
    "{% set s = 'x' * 5000000 %}{% set t = 'x' * 5000000 %}" + "{% if s == t %}{% endif %}" * 400,
    # sum() of lists, quadratic
    "{{ ([[1] * 1000] * 100000) | sum(start=[]) | length }}",
])
def test_loops_that_do_nothing_stop_at_the_budget(template):
    """Loops that only iterate (nested ranges, nested loops over lists or strings, loops whose
    filter is never true), straight-line comparisons and a quadratic sum end at the CPU-time
    budget with a message naming it."""
    refused(template, r"ran past its 0\.2 s budget \(CPU time\)")


def test_compiling_a_huge_template_is_within_the_budget():
    """A template that takes seconds to compile (610 000 characters of ifs) is stopped during
    the compile: compiling is part of the first render's budget."""
    template = "{% if messages[0]['role'] == 'x' %}{{ 'a' ~ 'b' }}{% endif %}" * 10000
    refused(template, "ran past its 0.2 s budget", peak_mib=400)


@pytest.mark.parametrize("template, says", [
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursed too deep"),
    ("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "recursed too deep"),
    ("{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}"
     "{% endcall %}{% endmacro %}{{ g() }}", "recursed too deep"),
])
def test_recursion_is_bounded(template, says):
    """Recursion through a macro, a recursive loop or a call block ends in a ChatTemplateError
    saying it recursed too deep (Python's RecursionError, caught)."""
    refused(template, says, budget=SIZE_BUDGET)


@pytest.mark.parametrize("template, says", [
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
     "{% endfor %}", r"a string of 16777216 characters \(bound 10000000\) from '~'"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
     "{% endfor %}", r"a string of 16777216 characters \(bound 10000000\) from '\+'"),
    ("{% set ns = namespace(s=[1]) %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
     "{% endfor %}", r"a sequence of 1048576 items \(bound 1000000\) from '\+'"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set s %}{{ ns.s }}{{ ns.s }}"
     "{% endset %}{% set ns.s = s %}{% endfor %}", "a string of 16777216 characters .* block"),
    ("{% set s = 'x' * 1000000 %}{% set t %}{% for i in range(100000) %}{{ s }}{% endfor %}"
     "{% endset %}", r"a string of \d+ characters \(bound 10000000\) from a block"),
    ("{% macro m(s) %}{{ s }}{{ s }}{% endmacro %}{% set ns = namespace(s='x') %}"
     "{% for i in range(64) %}{% set ns.s = m(ns.s) %}{% endfor %}", "a string of .* block"),
    ("{{ 'a' * 10**9 }}", r"a string of 1000000000 characters .* from '\*'"),
    ("{{ (['x' * 100000] * 100000) | string }}", "from 'string'"),
    ("{{ ['x' * 100000] * 100000 }}", r"from '\{\{ \}\}'"),
    ("{{ '{!r}'.format(['x' * 100000] * 100000) }}", "from 'format'"),
    ("{{ ('x' * 100000)[1:] ~ ('x' * 9999999) }}", "from '~'"),
])
def test_doubling_stops_at_the_string_and_list_bounds(template, says):
    """A string or list doubled through `~`, `+`, a namespace, a block set or a macro, and a
    list of references to one big string printed whole, stop at max_chars / max_items, before
    the value is built, with the operator named."""
    refused(template, says, budget=SIZE_BUDGET)


@pytest.mark.parametrize("template, says", [
    ("{{ 'a' | center(10**9) }}", r"a width of 1000000000 \(bound 10000000\) in 'center'"),
    ("{{ ('a\n' * 100000) | indent(1000) }}", "from 'indent'"),
    ("{{ ('a\n' * 100000) | indent('x' * 1000) }}", "from 'indent'"),
    ("{{ '%1000000000s' | format('a') }}", "in 'format'"),
    ("{{ ('a ' * 100000) | wordwrap(1, wrapstring='x' * 1000) }}", "from 'wordwrap'"),
    ("{{ ('a' * 100000) | replace('', 'x' * 1000) }}", "from 'replace'"),
    ("{{ (['x' * 10000] * 100000) | join }}", "from 'join'"),
    ("{{ ['x'] | join('y' * 10**6) ~ (['x'] * 100) | join('y' * 10**6) }}", "from 'join'"),
    ("{{ [1] | batch(10**9, 'x') | list }}", r"a sequence of 1000000000 items .* 'batch'"),
    ("{{ [1] | slice(10**9) | list }}", r"a sequence of 1000000000 items .* 'slice'"),
    ("{{ ('x' * 5000000) | list | length }}", "a sequence of 5000000 items .* 'list'"),
    ("{{ ('x' * 10**6) | truncate(10**9, end='y' * 9500000) }}", "from 'truncate'"),
    # a hundred nodes, not a thousand: walking a thousand under tracemalloc took 0.1 s of
    # the 0.2 s budget alone, and in a full run the CPU bound fired first
    ("{{ ([[[[[[[[[[1]]]]]]]]]] * 100) | tojson(indent=10**6) }}", "from 'tojson'"),
    ("{{ ['a'] | map('center', 10**9) | list }}", "in 'center'"),
    ("{% filter center(10**9) %}a{% endfilter %}", "in 'center'"),
])
def test_width_and_count_filters_are_checked_before_they_run(template, says):
    """Filters that take a width or a count (center, indent, format, wordwrap, replace, join,
    batch, slice, list, truncate, tojson's indent, also through map() and a filter block) are
    refused before they pad or repeat, naming the filter and the bound."""
    refused(template, says, budget=SIZE_BUDGET)


@pytest.mark.parametrize("template, says", [
    ("{{ 'a'.center(10**9) }}", "in 'center'"),
    ("{{ 'a'.ljust(10**9) }}", "in 'ljust'"),
    ("{{ 'a'.rjust(10**9, 'x') }}", "in 'rjust'"),
    ("{{ 'a'.zfill(10**9) }}", "in 'zfill'"),
    ("{{ ('\t' * 100000).expandtabs(100000) }}", "from 'expandtabs'"),
    ("{{ ('a' * 100000).replace('a', 'x' * 1000) }}", "from 'replace'"),
    # inside a loop, where jinja2 passes its loop variables to the call beside the arguments
    ("{% for m in messages %}{{ ('a' * 100000).replace('a', 'x' * 1000) }}{% endfor %}",
     "from 'replace'"),
    ("{{ ('x' * 10000).join(['a'] * 100000) }}", "from 'join'"),
    ("{{ ('a' * 100000).translate({97: 'x' * 100000}) }}", "from 'translate'"),
    ("{{ ('a ' * 4000000).split() | length }}", r"a sequence of 1000002 items .* 'split'"),
    ("{{ ('a\n' * 4000000).splitlines() | length }}", "items .* 'splitlines'"),
    ("{{ '{:>1000000000}'.format(1) }}", "a width of 1000000000 .* 'format'"),
    ("{{ '{:>{w}}'.format(1, w=10**9) }}", "a width of 1000000000 .* 'format'"),
    ("{{ '{0:>9000000}{0:>9000000}'.format(1) }}", "a string of 18000000 .* 'format'"),
    ("{{ '%*s' % (10**9, 'a') }}", r"in '%'"),
    ("{{ '%.1000000000f' % 1.5 }}", r"in '%'"),
    ("{{ strftime_now('%c' * 1000000) }}", "from 'strftime_now'"),
])
def test_width_and_count_methods_are_checked_before_they_run(template, says):
    """str methods and operators that pad, repeat or split (center, ljust, rjust, zfill,
    expandtabs, replace, join, translate, split, splitlines, format with literal or nested
    widths, % with widths, precisions or *, and strftime_now) are refused before they run."""
    refused(template, says, budget=SIZE_BUDGET)


@pytest.mark.parametrize("template, says", [
    ("{{ range(10**9) | length }}", r"a sequence of 1000000000 items \(bound 1000000\) from range"),
    ("{% for i in range(10**30) %}{% endfor %}", "items .* from range"),
    ("{{ lipsum(10**9) }}", r"lipsum of 1000000000 paragraphs \(bound 1000\)"),
    ("{{ lipsum(5, max=10**9) }}", "lipsum of 1000000000 words"),
    ("{{ dict.fromkeys('x' * 2000000) | length }}", "2000000 items .* 'dict.fromkeys'"),
    ("{{ ((10**64) ** 64) ** 64 }}", r"an integer of \d+ bits \(bound 65536\) from '\*\*'"),
    ("{% set ns = namespace(x=3) %}{% for i in range(64) %}{% set ns.x = ns.x * ns.x %}"
     "{% endfor %}", r"an integer of \d+ bits .* from '\*'"),
    ("{{ 2 ** 100000000 }}", r"the power 100000000 \(bound 64\)"),
])
def test_counts_and_integers_are_bounded(template, says):
    """A huge range, lipsum with a huge count, dict.fromkeys of too many keys, and integers
    grown by powers or squaring are refused before they are built."""
    refused(template, says, peak_mib=100, budget=SIZE_BUDGET)


@pytest.mark.parametrize("template", [
    "{% set ns = namespace(s='x' * 1000000, l=[]) %}{% for i in range(10000) %}"
    "{% set ns.l = ns.l + [ns.s ~ i] %}{% endfor %}",
    "{% set ns = namespace(s='x' * 1000000, l=[]) %}{% for i in range(10000) %}"
    "{% set ns.l = ns.l + [ns.s[i:]] %}{% endfor %}",
])
def test_many_distinct_values_stop_at_the_memory_bound(template):
    """A list of many distinct big strings, each one within the string bound (built with `~`
    or by slicing), stops once the process's memory has grown past max_bytes. (The bound is
    on resident memory: what the process freed earlier and reuses is not growth, so
    tracemalloc may count up to a few times max_bytes here.)"""
    refused(template, r"the template held \d+ MiB of values \(bound 48 MiB\)", peak_mib=200,
            budget=SIZE_BUDGET)


def test_memory_held_is_bounded_in_resident_memory():
    """Without tracemalloc, in a fresh process, the same attack under the default budget
    stops with the process's peak resident memory grown by under 128 MiB plus a window."""
    import subprocess
    import sys

    code = (
        "import resource\n"
        "from onebit.text.chat import render\n"
        "from onebit.text import ChatTemplateError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "t = \"{% set ns = namespace(s='x' * 1000000, l=[]) %}{% for i in range(10000) %}"
        "{% set ns.l = ns.l + [ns.s ~ i] %}{% endfor %}\"\n"
        "try:\n    render(t, [])\nexcept ChatTemplateError as e:\n    print(e)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert "the template held" in out[0] and "(bound 128 MiB)" in out[0], out
    assert int(out[1]) < 128 + 64, out


def test_real_templates_render_within_a_tight_budget():
    """Once compiled (a few ms, cached), the family templates render the same under a budget
    a hundred times below the default, with strings of 100 000 characters and lists of 1000
    items: the budget refuses attacks, not templates."""
    from test_chat_template import CONVERSATIONS, FAMILIES, TOOLS

    tight = RenderBudget(seconds=0.02, max_chars=100_000, max_items=1000, max_bytes=1 << 20)
    for name, template in FAMILIES.items():
        for conversation in ("one user turn", "multi-turn", "tools"):
            if name in ("mistral", "gemma") and conversation == "tools":
                continue  # they refuse a tool turn themselves
            messages = CONVERSATIONS[conversation]
            expected = render(template, messages, tools=TOOLS)
            assert render(template, messages, tools=TOOLS, budget=tight) == expected, \
                (name, conversation)


def test_the_module_default_budget_applies(monkeypatch):
    """`render` without a budget spends template_budget.DEFAULT_BUDGET, read at each call, so
    a caller can lower (or raise) it for every render."""
    monkeypatch.setattr(template_budget, "DEFAULT_BUDGET", RenderBudget(seconds=0.1))
    with pytest.raises(ChatTemplateError, match=r"ran past its 0\.1 s budget"):
        render("{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}",
               MESSAGES)
    assert template_budget.RenderBudget().seconds == 2.0


@pytest.mark.parametrize("field, value", [
    ("seconds", -1), ("seconds", 0), ("seconds", float("nan")), ("seconds", "2"),
    ("max_chars", 0), ("max_items", 1.5), ("max_int_bits", True), ("max_bytes", None),
])
def test_a_bad_budget_is_refused_naming_the_field(field, value):
    """A RenderBudget with a field that is not a positive number is a ValueError naming the
    field and the value, and `render(budget=...)` takes only a RenderBudget."""
    with pytest.raises(ValueError, match=rf"RenderBudget\.{field} must be a positive"):
        RenderBudget(**{field: value})
    with pytest.raises(TypeError, match="budget must be a RenderBudget, got float"):
        render(None, MESSAGES, budget=2.0)


def test_one_thread_past_its_budget_leaves_another_rendering():
    """The budget is the rendering thread's: a thread stuck in a hostile template is stopped
    without touching a thread rendering a real template at the same time."""
    results = {}

    def hostile():
        try:
            render("{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}"
                   "{% endfor %}", MESSAGES, budget=BUDGET)
        except ChatTemplateError as error:
            results["hostile"] = str(error)

    thread = threading.Thread(target=hostile)
    thread.start()
    outputs = {render(None, MESSAGES, budget=RenderBudget(seconds=0.05)) for _ in range(200)}
    thread.join()
    assert outputs == {"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}
    assert "budget" in results["hostile"]
