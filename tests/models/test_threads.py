"""CPU threads: the free cores from /proc/stat (not the trailing load average), at least 1, and
OMP_NUM_THREADS kept when set."""

from __future__ import annotations

import pytest
import torch

from mars_eval.models import threads


def test_free_cpus_counts_out_what_other_work_keeps_busy(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(threads, "busy_cores", lambda window_s=0.2: 1.6)
    assert threads.free_cpus() == 2
    monkeypatch.setattr(threads, "busy_cores", lambda window_s=0.2: 7.0)
    assert threads.free_cpus() == 1  # a busy machine: one thread, never none
    monkeypatch.setattr(threads, "busy_cores", lambda window_s=0.2: 0.2)
    assert threads.free_cpus() == 4
    monkeypatch.setattr(threads, "busy_cores", lambda window_s=0.2: None)  # no /proc/stat
    assert threads.free_cpus() == 4


def test_busy_cores_reads_proc_stat_over_a_window(monkeypatch):
    samples = iter([(100, 1000), (250, 1200)])  # 150 of 200 jiffies busy
    monkeypatch.setattr(threads, "_cpu_times", lambda: next(samples))
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    assert threads.busy_cores(0.0) == pytest.approx(1.5)


def test_real_proc_stat_parses():
    monkey_free = threads.busy_cores(0.05)
    assert monkey_free is None or 0.0 <= monkey_free <= (threads.os.cpu_count() or 1) + 0.01


def test_omp_num_threads_is_kept(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        monkeypatch.setattr(
            threads, "free_cpus", lambda: pytest.fail("not asked when OMP_NUM_THREADS is set")
        )
        assert threads.fit_cpu_threads(torch) == before
        monkeypatch.delenv("OMP_NUM_THREADS")
        monkeypatch.setattr(threads, "free_cpus", lambda: 1)
        assert threads.fit_cpu_threads(torch) == 1
    finally:
        torch.set_num_threads(before)


def test_a_small_model_decodes_on_one_thread(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setattr(threads, "free_cpus", lambda: 2)
        assert threads.fit_cpu_threads(torch, params=135_000_000) == 1  # SmolLM2-135M
        assert threads.fit_cpu_threads(torch, params=4_000_000_000) == 2  # Qwen3-4B: the free cores
        assert threads.fit_cpu_threads(torch) == 2  # size unknown: the free cores
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        torch.set_num_threads(2)
        assert threads.fit_cpu_threads(torch, params=135_000_000) == 2  # the user's count is kept
    finally:
        torch.set_num_threads(before)
