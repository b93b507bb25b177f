"""Precision and threads chosen by measurement (algorithms/compute.py), and the learners that use it.
The timings here come from a fake clock, so the outcome cannot depend on the processor."""

import json

import pytest

torch = pytest.importorskip("torch")

import algorithms.compute
from algorithms.compute import Setting, bf16_emulated, candidates, fastest
from algorithms.sft import SFTConfig, ensure_warmup, recipe, warmup_dir


def fake_timing(seconds: dict[Setting, float]):
    """A ``run`` and a clock under which a call of ``run(s)`` lasts ``seconds[s]``."""
    now, calls = [0.0], []

    def run(setting: Setting) -> None:
        assert torch.get_num_threads() == setting.threads  # run under the setting's thread count
        calls.append(setting)
        now[0] += seconds[setting]

    return run, (lambda: now[0]), calls


def test_fastest_keeps_the_fastest_setting_and_restores_threads() -> None:
    fp32, bf16 = Setting(False, 1), Setting(True, 1)
    threads = torch.get_num_threads()
    for emulated in (False, True):  # bf16 with and without bf16 instructions
        times = {fp32: 1.0, bf16: 14.0 if emulated else 0.5}
        run, clock, calls = fake_timing(times)
        best, measured = fastest(run, [fp32, bf16], clock=clock)
        assert best == (fp32 if emulated else bf16) and measured == times
        # an emulated bf16 is dropped after one timed call: 2 calls, not 3
        assert calls.count(bf16) == (2 if emulated else 3) and calls.count(fp32) == 3
        assert torch.get_num_threads() == threads


def test_a_single_candidate_is_not_timed() -> None:
    run, clock, calls = fake_timing({Setting(False, 2): 1.0})
    assert fastest(run, [Setting(False, 2)], clock=clock) == (Setting(False, 2), {}) and calls == []


@pytest.fixture
def bf16_native(monkeypatch):
    """The candidates of a CPU with bf16 instructions, whatever this one has."""
    monkeypatch.setattr(algorithms.compute, "bf16_emulated", lambda: False)


def test_candidates(bf16_native, monkeypatch) -> None:
    cores = torch.get_num_threads()
    assert candidates("fp32", 1) == [Setting(False, 1)]
    assert candidates("bf16", 3) == [Setting(True, 3)]
    assert set(candidates()) == {Setting(b, n) for b in (False, True) for n in {1, cores}}
    # where bf16 is emulated, "auto" times no model step in it; asked for by name, it is still given
    monkeypatch.setattr(algorithms.compute, "bf16_emulated", lambda: True)
    assert set(candidates()) == {Setting(False, n) for n in {1, cores}}
    assert candidates("bf16", 1) == [Setting(True, 1)]
    with pytest.raises(ValueError, match="precision"):
        candidates("fp16")
    with pytest.raises(ValueError, match="threads"):
        candidates("auto", -1)


@pytest.mark.parametrize("ratio, emulated", [(3.0, True), (1.5, False), (0.5, False)])
def test_bf16_emulated_compares_matrix_products(ratio: float, emulated: bool) -> None:
    """bf16 is timed first (10 products), then fp32: a clock under which each bf16 product lasts ``ratio``."""
    now, calls = [0.0], [0]

    def clock() -> float:
        calls[0] += 1
        now[0] += (ratio if calls[0] <= 20 else 1.0) * (calls[0] % 2 == 0)  # every second reading ends a call
        return now[0]

    assert bf16_emulated(size=8, clock=clock) is emulated


def test_the_warmup_records_how_it_was_built(tmp_path, bf16_native) -> None:
    cfg = SFTConfig(cache_dir=str(tmp_path), episodes=4, worlds=2, steps=1, batch_size=2, threads=1)
    out = ensure_warmup(cfg)
    build = json.loads((out / "build.json").read_text())
    assert build["compute"] in ("fp32, 1 thread", "bf16, 1 thread") and build["cpu"]
    assert set(build["measured_s_per_step"]) == {"fp32, 1 thread", "bf16, 1 thread"}
    # precision and threads change how fast a warm-up is built, not what it learns: one cache entry
    fixed = SFTConfig(cache_dir=str(tmp_path), episodes=4, worlds=2, steps=1, batch_size=2, precision="fp32")
    assert recipe(fixed) == recipe(cfg) and warmup_dir(fixed) == out == ensure_warmup(fixed)
