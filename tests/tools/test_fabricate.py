"""`onebit fabricate`: random targets of any size, and drafts sized for them."""

import argparse
import json

import onebit
from onebit.commands import fabricate
from onebit.heads import load_dflash, load_mtp


def run(*argv):
    parser = argparse.ArgumentParser(prog="onebit")
    sub = parser.add_subparsers(dest="command", required=True)
    fabricate.add_parser(sub).set_defaults(_main=fabricate.main)
    args = parser.parse_args([str(a) for a in argv])
    return args._main(args)


def test_target_sizes_and_drafts(tmp_path, capsys):
    """A qwen3_5 with six layers repeats the family's layer pattern; the DFlash and MTP drafts
    written for it load against it and draft within its vocabulary."""
    target_dir, dflash_dir, mtp_dir = tmp_path / "t", tmp_path / "d", tmp_path / "m"
    assert run("fabricate", "qwen3_5", target_dir, "--layers", 6) == 0
    assert "6 layers, hidden 256, vocab 256" in capsys.readouterr().out
    config = json.loads((target_dir / "config.json").read_text())
    assert config["layer_types"] == ["linear_attention", "linear_attention",
                                     "full_attention"] * 2
    assert run("fabricate", "dflash", dflash_dir, "--target", target_dir,
               "--block-size", 6) == 0
    assert run("fabricate", "mtp", mtp_dir, "--target", target_dir) == 0
    model = onebit.load_model(target_dir)
    dflash = load_dflash(dflash_dir, model)
    assert dflash.draft.config.block_size == 6
    result = onebit.run(model, dflash, [1, 2, 3], max_tokens=8, k=5)
    assert result.tokens == onebit.greedy(model, [1, 2, 3], max_tokens=8).tokens
    mtp = load_mtp(mtp_dir, model)
    assert onebit.run(model, mtp, [1, 2, 3], max_tokens=8, k=3).tokens == result.tokens


def test_bad_requests_say_what_is_wrong(tmp_path, capsys):
    """A draft without its target, or a target whose heads do not divide, exits 2 with one
    line naming the problem."""
    assert run("fabricate", "mtp", tmp_path / "m") == 2
    assert "needs --target MODEL_DIR" in capsys.readouterr().err
    assert run("fabricate", "qwen3", tmp_path / "q", "--heads", 3) == 2
    assert "num_key_value_heads" in capsys.readouterr().err


def test_gguf_targets_load_back(tmp_path, capsys):
    """`--gguf` writes a tiny GGUF file of a family llama.cpp names alike (gemma2, phi3 here)
    that loads back through the reader's checks; a family with no GGUF form, or --float with
    it, exits 2 naming the problem."""
    for kind in ("gemma2", "phi3"):
        assert run("fabricate", kind, tmp_path / kind, "--gguf", "--layers", 2) == 0
        assert f"wrote {kind} to {tmp_path / kind / 'model.gguf'}" in capsys.readouterr().out
        model = onebit.load_model(tmp_path / kind / "model.gguf", kernel="numpy")
        assert model.config.num_hidden_layers == 2
    assert run("fabricate", "gemma4", tmp_path / "g4", "--gguf") == 2
    assert "--gguf writes one of" in capsys.readouterr().err
    assert run("fabricate", "phi3", tmp_path / "p", "--gguf", "--float") == 2
    assert "--float and --mtp do not apply" in capsys.readouterr().err
