"""Precision and thread count for the CPU at hand, chosen by timing, never assumed.

bf16 autocast halves a warm-up step on CPUs with bf16 instructions (AMD Zen 4 and later, recent
Xeons) and made it 13x slower on an AVX2-only AMD EPYC, which emulates it. A second thread speeds up
a 16 x 384-token training step, and slowed the tiny policy's one-token decoding steps on a busy
machine. So a job times one small representative call under each candidate setting at start-up
and keeps the fastest.
"""

from __future__ import annotations

import contextlib
import logging
import math
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setting:
    bf16: bool = False
    """bfloat16 autocast of the forward pass (the weights and the optimizer stay fp32)"""
    threads: int = 1
    """torch intra-op threads"""
    device: str = "cpu"
    """where the model computes: "cpu", or "cuda"/"cuda:N", never timed (the warm-up's build takes bf16
    autocast there: every CUDA GPU since Ampere has bf16 tensor cores; the learner keeps fp32)"""

    def autocast(self) -> torch.autocast:
        """The forward pass's context: bf16 autocast on the device, or a disabled one."""
        import torch

        return torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.bf16)

    def __str__(self) -> str:
        import torch

        where = f"{self.threads} thread{'s' * (self.threads > 1)}" if self.device == "cpu" else (
            f"{self.device}, {torch.cuda.get_device_name(self.device)}" if self.device.startswith("cuda")
            else self.device)
        return f"{'bf16' if self.bf16 else 'fp32'}, {where}"


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count inside the block, put back after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cpu_name() -> str:
    """The processor (Linux: model name, family, model and its vector/bf16 extensions), for build
    records: speed and float results differ between processors of one name."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if ":" in line and not line.startswith("processor"))
    except OSError:
        return platform.processor() or platform.machine()
    info = {k.strip(): v.strip() for k, v in info.items()}
    flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in info.get("flags", "").split()]
    return f"{info.get('model name', '?')}, family {info.get('cpu family', '?')} model {info.get('model', '?')}, " \
           f"{' '.join(flags) or 'no avx2'}"


def bf16_emulated(size: int = 512, repeats: int = 10, clock: Callable[[], float] = time.perf_counter) -> bool:
    """Whether bf16 autocast matrix products run over 2x slower than fp32 ones on this CPU (it emulates
    bf16). Measured in well under a second, so that no model's step is timed in emulated bf16: a 135M
    model's probe step took minutes that way (docs/experiments/pretrained-model.md)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)

    def best(bf16: bool) -> float:  # one thread: a second one on a busy machine made its timings a lottery
        with num_threads(1), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            (a @ b).sum()  # untimed: lazy kernel set-up
            times = []
            for _ in range(repeats):
                start = clock()
                (a @ b).sum()
                times.append(clock() - start)
        return min(times)

    return best(True) > 2 * best(False)


def candidates(precision: str = "auto", threads: int = 0) -> list[Setting]:
    """The settings worth timing. ``precision``: "auto" (fp32, and bf16 unless ``bf16_emulated``),
    "fp32" or "bf16"; ``threads``: a fixed count, or 0 for 1 and every core this process may use."""
    if precision not in ("auto", "fp32", "bf16"):
        raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16', not {precision!r}")
    if threads < 0:
        raise ValueError(f"threads must be >= 0 (0: measured), not {threads}")
    import torch

    counts = [threads] if threads else sorted({1, torch.get_num_threads()})
    if precision == "auto" and bf16_emulated():
        log.info("compute: bf16 matrix products are emulated on this CPU (over 2x slower than fp32): fp32 only")
        precision = "fp32"
    precisions = {"auto": [False, True], "fp32": [False], "bf16": [True]}[precision]
    return [Setting(bf16, n) for bf16 in precisions for n in counts]


def fastest(run: Callable[[Setting], object], settings: Sequence[Setting], *, repeats: int = 2,
            clock: Callable[[], float] = time.perf_counter) -> tuple[Setting, dict[Setting, float]]:
    """The setting under which ``run(setting)`` took least time, and each timed setting's seconds.

    ``run`` is called under the setting's thread count and should use ``setting.autocast()`` for its
    forward pass. Each setting gets one untimed call (allocations, lazy kernels), then the best of
    ``repeats`` timed ones; a setting already 3x slower than the best after a timed call is not
    timed again (emulated bf16 costs seconds a call). A single candidate is returned untimed."""
    if len(settings) == 1:
        return settings[0], {}
    seconds: dict[Setting, float] = {}
    for setting in settings:
        with num_threads(setting.threads):
            run(setting)
            for _ in range(repeats):
                start = clock()
                run(setting)
                seconds[setting] = min(seconds.get(setting, math.inf), clock() - start)
                if seconds[setting] > 3 * min(seconds.values()):
                    break
    best = min(seconds, key=seconds.__getitem__)
    log.info("compute: %s (measured %s)", best, ", ".join(f"{s}: {t:.3g} s" for s, t in seconds.items()))
    return best, seconds
