"""`onebit generate` and `onebit chat` as a user runs them, on a fabricated model."""

import pytest

import onebit
from onebit.commands.generate import default_kernel
from onebit.text.load import attach_tokenizer


def _model(tiny_dir, kernel=None):
    """The model as the commands load it: with --kernel, else their default kernel."""
    return attach_tokenizer(onebit.load_model(tiny_dir, kernel=kernel or default_kernel()),
                            tiny_dir)


@pytest.mark.slow  # the CLI streaming in a subprocess (9 s)
def test_generate_streams_the_text(tiny_dir, onebit_cli):
    """stdout is exactly the text `onebit.generate` gives (plus a newline), and stderr carries
    the speed, passes per token and, with a head (the default is the policy's), the
    acceptance; `--head none` decodes plain, with the same text and no acceptance."""
    expected = onebit.generate(_model(tiny_dir), "Once upon", max_tokens=12, head="none").text
    done = onebit_cli("generate", "--model", tiny_dir, "Once upon", "--max-tokens", 12)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected + "\n"
    assert "tokens/s" in done.stderr and "passes/token" in done.stderr
    assert "acceptance" in done.stderr
    plain = onebit_cli("generate", "--model", tiny_dir, "Once upon", "--max-tokens", 12,
                       "--head", "none")
    assert plain.stdout == done.stdout and "acceptance" not in plain.stderr
    spec = onebit_cli("generate", "--model", tiny_dir, "Once upon", "--max-tokens", 12,
                      "--head", "ngram", "--k", 3)
    assert spec.stdout == done.stdout and "acceptance" in spec.stderr
    auto = onebit_cli("generate", "--model", tiny_dir, "Once upon", "--max-tokens", 12,
                      "--head", "auto")
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout == done.stdout and "acceptance" in auto.stderr


@pytest.mark.slow  # the CLI's inputs, each in a subprocess (8 s)
def test_prompt_file_and_bad_input(tiny_dir, tmp_path, onebit_cli):
    """A UTF-8 prompt file gives the same text as the prompt on the command line; invalid
    UTF-8, a missing model or no prompt is one line on stderr and exit 2."""
    good = tmp_path / "p.txt"
    good.write_text("Once upon", encoding="utf-8")
    a = onebit_cli("generate", "--model", tiny_dir, "--prompt-file", good, "--max-tokens", 6)
    b = onebit_cli("generate", "--model", tiny_dir, "Once upon", "--max-tokens", 6)
    assert a.returncode == 0 and a.stdout == b.stdout
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xc3(")
    for argv, says in [
        (("--prompt-file", bad), "not valid UTF-8 (byte 3"),
        (("--model", tmp_path / "nowhere", "hi"), "nowhere"),
        ((), "give a prompt or --prompt-file"),
    ]:
        done = onebit_cli("generate", *(("--model", tiny_dir) if "--model" not in argv else ()),
                          *argv)
        assert done.returncode == 2, done.stderr
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_chat_through_a_pipe_keeps_history(tiny_dir, onebit_cli):
    """Two user lines on a pipe give two answers, and the second is the one generate gives
    with the first exchange in the history (the loop keeps the conversation)."""
    model = _model(tiny_dir)
    first = onebit.generate(model, [{"role": "user", "content": "Hi"}], max_tokens=6).text
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": first},
               {"role": "user", "content": "More"}]
    second = onebit.generate(model, history, max_tokens=6).text
    done = onebit_cli("chat", "--model", tiny_dir, "--max-tokens", 6, stdin="Hi\n\nMore\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{first}\n{second}\n"
    assert done.stderr.count("tokens/s") == 2


def test_kernel_option(tiny_dir, onebit_cli):
    """--kernel picks the products' kernel: with numpy (no compiler) the text is what
    `onebit.generate` gives on the model loaded with kernel="numpy", and an unknown name is
    refused by the parser (exit 2, naming the choices). (That the default is int8 and differs
    from the float reference: tests/text/test_smollm2_text.py.)"""
    assert default_kernel() == "int8"  # numba is in the dev extra
    expected = onebit.generate(_model(tiny_dir, "numpy"), "Once upon", max_tokens=12).text
    done = onebit_cli("generate", "--model", tiny_dir, "Once upon", "--max-tokens", 12,
                      "--kernel", "numpy")
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected + "\n"
    bad = onebit_cli("generate", "--model", tiny_dir, "hi", "--kernel", "fast")
    assert bad.returncode == 2 and "int8" in bad.stderr and "numpy" in bad.stderr


@pytest.mark.slow  # compiles a stack in a subprocess with an empty cache (8 s)
def test_a_compile_is_announced_once(tiny_dir, tmp_path, onebit_cli):
    """On an empty kernel cache the command says on stderr, before the first token, that it is
    compiling and where later runs will find the kernels, and its report gives the seconds
    spent; the next run loads them and says neither. stdout is the same text both times."""
    env = {"ONEBIT_KERNEL_CACHE": str(tmp_path / "kernels")}
    argv = ("generate", "--model", tiny_dir, "Once upon", "--max-tokens", 4,
            "--kernel", "numba-float")
    first, second = onebit_cli(*argv, env=env), onebit_cli(*argv, env=env)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    lines = first.stderr.splitlines()
    assert lines[0].startswith("[compiling the kernels for this CPU, once")
    assert str(tmp_path / "kernels") in lines[0]
    assert "s compiling kernels" in lines[-1] and "tokens/s" in lines[-1]
    assert "compiling" not in second.stderr and "tokens/s" in second.stderr
    assert first.stdout == second.stdout


def test_compile_watch_counts_the_outermost_compiles():
    """Nested compiles (a kernel compiling the ones it calls) are timed once, from the
    outermost start to its end; the notice is said once per watch; `take` empties the count."""
    import io

    from onebit.commands import compile_notice

    clock = iter([10.0, 13.5, 20.0, 21.0])
    stream = io.StringIO()
    watch = compile_notice.CompileWatch(stream, clock=lambda: next(clock))
    watch.started()   # 10.0
    watch.started()   # nested: no clock read
    watch.ended()
    watch.ended()     # 13.5
    assert watch.take() == 3.5 and watch.take() == 0.0
    watch.started()   # 20.0
    watch.ended()     # 21.0
    assert watch.take() == 1.0
    assert stream.getvalue().count("compiling the kernels") == 1
