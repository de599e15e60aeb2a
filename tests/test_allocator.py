"""graphfeed.cuda_alloc: the expandable_segments setting, checked in fresh subprocesses.

This machine has a CPU-only torch; the CUDA cases make the subprocess's torch look like a CUDA
build (torch.version.cuda, torch.cuda.is_available / is_initialized) and then check both the
environment and what PyTorch's allocator-settings API reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

from graphfeed import _cuda, cuda_alloc

ALLOC_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
              "GRAPHFEED_ALLOC_CONF")

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, warnings
    import torch

    FAKE_CUDA = {fake_cuda!r}
    INITIALISED = {initialised!r}
    PRESET = {preset!r}
    if FAKE_CUDA is False:
        torch.version.cuda = None  # a CPU-only build (what this machine has anyway)
    if FAKE_CUDA:
        torch.version.cuda = "12.4"
        import graphfeed._cuda
        graphfeed._cuda.device_count = lambda: 1
        torch.cuda.is_initialized = lambda: INITIALISED
    if PRESET:
        torch._C._accelerator_setAllocatorSettings(PRESET)
    before = dict(os.environ)
    from graphfeed.cuda_alloc import configure_cuda_allocator
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = configure_cuda_allocator()
        second = configure_cuda_allocator()
    changed = {{k: os.environ.get(k) for k in set(before) | set(os.environ)
               if before.get(k) != os.environ.get(k)}}
    print(json.dumps(dict(
        first=first, second=second, changed=changed,
        warnings=[str(w.message) for w in caught],
        categories=[w.category.__name__ for w in caught],
        torch_settings=torch._C._accelerator_getAllocatorSettings(),
    )))
    """
)


def run_case(env_overrides=None, *, fake_cuda=True, initialised=False, preset=""):
    env = {k: v for k, v in os.environ.items() if k not in ALLOC_VARS}
    env.update(env_overrides or {})
    code = SCRIPT.format(fake_cuda=fake_cuda, initialised=initialised, preset=preset)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["stderr"] = proc.stderr
    return out


def test_unset_enables_expandable_segments_and_warns_once():
    r = run_case()
    assert r["first"] == r["second"] == "expandable_segments:True"
    # torch 2.13 reads PYTORCH_ALLOC_CONF first; nothing else is touched
    assert r["changed"] == {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    # the running allocator got it too (torch parses the variable only once)
    assert r["torch_settings"] == "expandable_segments:True"
    assert len(r["warnings"]) == 1, r["warnings"]
    assert r["categories"] == ["GraphfeedAllocatorWarning"]
    msg = r["warnings"][0]
    assert "expandable_segments:True" in msg
    assert "GRAPHFEED_ALLOC_CONF=off" in msg
    assert "PYTORCH_ALLOC_CONF" in msg and "PYTORCH_CUDA_ALLOC_CONF" in msg


def test_user_setting_is_respected():
    r = run_case({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:256"})
    assert r["first"] is None and r["second"] is None
    assert r["changed"] == {}
    assert r["warnings"] == []
    assert r["torch_settings"] == "max_split_size_mb:256"  # PyTorch read the user's variable


def test_empty_variable_in_a_fresh_process():
    # an empty variable counts as unset (see test_empty_variable_counts_as_unset)
    r = run_case({"PYTORCH_CUDA_ALLOC_CONF": ""})
    assert r["first"] == "expandable_segments:True"
    assert r["changed"] == {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    assert r["torch_settings"] == "expandable_segments:True" and len(r["warnings"]) == 1


def test_opt_out_in_a_fresh_process():
    r = run_case({"GRAPHFEED_ALLOC_CONF": "off"})
    assert (r["first"], r["changed"], r["warnings"], r["torch_settings"]) == (None, {}, [], "")


def test_cpu_build_prints_and_sets_nothing():
    r = run_case(fake_cuda=False)
    assert (r["first"], r["changed"], r["warnings"]) == (None, {}, [])
    assert r["stderr"] == ""
    assert r["torch_settings"] == ""


def test_cuda_already_initialised_warns_that_it_cannot_take_effect():
    r = run_case(initialised=True)
    assert r["first"] is None and r["changed"] == {}
    assert len(r["warnings"]) == 1
    msg = r["warnings"][0]
    assert "cannot take effect" in msg
    assert "PYTORCH_ALLOC_CONF=expandable_segments:True" in msg
    assert r["torch_settings"] == ""


def test_settings_made_through_torch_api_are_respected():
    r = run_case(preset="max_split_size_mb:256")
    assert (r["first"], r["changed"], r["warnings"]) == (None, {}, [])
    assert r["torch_settings"] == "max_split_size_mb:256"


def test_warning_reaches_stderr_once_with_default_filters():
    code = (
        "import torch\n"
        "torch.version.cuda = '12.4'\n"
        "import graphfeed._cuda\n"
        "graphfeed._cuda.device_count = lambda: 1\n"
        "torch.cuda.is_initialized = lambda: False\n"
        "from graphfeed.cuda_alloc import configure_cuda_allocator\n"
        "for _ in range(3): configure_cuda_allocator()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ALLOC_VARS}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("GraphfeedAllocatorWarning") == 1, proc.stderr


# ---------------------------------------------------------------------- in-process variants
@pytest.fixture
def fake_cuda(monkeypatch):
    """This process's torch made to look like a CUDA build with an uninitialised device; the
    allocator API and os.environ replaced by recorders that the test inspects."""
    import torch

    env = {k: v for k, v in os.environ.items() if k not in ALLOC_VARS}
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(_cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    state = types.SimpleNamespace(env=env, settings="", calls=[])

    def set_settings(s):
        state.calls.append(s)
        state.settings = s

    monkeypatch.setattr(torch._C, "_accelerator_setAllocatorSettings", set_settings)
    monkeypatch.setattr(torch._C, "_accelerator_getAllocatorSettings", lambda: state.settings)
    monkeypatch.setattr(cuda_alloc, "_done", False)
    monkeypatch.setattr(cuda_alloc, "_result", None)
    yield state
    monkeypatch.setattr(cuda_alloc, "_done", False)
    monkeypatch.setattr(cuda_alloc, "_result", None)


def configure_recording(state, **env):
    import warnings

    state.env.update(env)
    before = dict(state.env)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cuda_alloc.configure_cuda_allocator()
    changed = {k: state.env.get(k) for k in set(before) | set(state.env)
               if before.get(k) != state.env.get(k)}
    return result, changed, [str(w.message) for w in caught]


@pytest.mark.parametrize("var", ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"])
@pytest.mark.parametrize("value", ["max_split_size_mb:256", "expandable_segments:False"])
def test_user_setting_is_respected_in_process(fake_cuda, var, value):
    assert configure_recording(fake_cuda, **{var: value}) == (None, {}, [])
    assert fake_cuda.calls == []


@pytest.mark.parametrize("var", ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"])
@pytest.mark.parametrize("value", ["", "   "])
def test_empty_variable_counts_as_unset(fake_cuda, var, value):
    # Documented choice: an empty variable carries no setting (PyTorch applies its defaults,
    # as when unset), so graphfeed enables expandable segments through PYTORCH_ALLOC_CONF,
    # which PyTorch reads first (and which therefore wins over an empty one).
    result, changed, warned = configure_recording(fake_cuda, **{var: value})
    assert result == "expandable_segments:True"
    assert changed == {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    assert len(warned) == 1
    assert fake_cuda.calls == ["expandable_segments:True"]


def test_empty_variable_does_not_hide_the_other_users_setting(fake_cuda):
    r = configure_recording(
        fake_cuda, PYTORCH_ALLOC_CONF="", PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128"
    )
    assert r == (None, {}, [])


@pytest.mark.parametrize("value", ["off", "OFF", "0", "false", " no "])
def test_opt_out(fake_cuda, value):
    assert configure_recording(fake_cuda, GRAPHFEED_ALLOC_CONF=value) == (None, {}, [])
    assert fake_cuda.calls == []


def test_opt_out_value_that_is_not_off_does_not_opt_out(fake_cuda):
    result, changed, warned = configure_recording(fake_cuda, GRAPHFEED_ALLOC_CONF="on")
    assert result == "expandable_segments:True" and len(warned) == 1


def test_decides_once_per_process(fake_cuda):
    first = configure_recording(fake_cuda)
    assert first[0] == "expandable_segments:True" and len(first[2]) == 1
    # later calls return the same answer without touching anything or warning again
    assert configure_recording(fake_cuda) == ("expandable_segments:True", {}, [])
    assert fake_cuda.calls == ["expandable_segments:True"]


def test_no_visible_device_is_silent(fake_cuda, monkeypatch):
    import torch

    monkeypatch.setattr(_cuda, "device_count", lambda: 0)
    assert configure_recording(fake_cuda) == (None, {}, [])


# ---------------------------------------------------------------------- helpers
@pytest.mark.cuda
def test_real_gpu_gets_expandable_segments():
    code = textwrap.dedent(
        """
        import json, warnings
        import torch
        from graphfeed.cuda_alloc import configure_cuda_allocator
        warnings.simplefilter("ignore")
        result = configure_cuda_allocator()
        x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        segs = torch.cuda.memory_snapshot()
        print(json.dumps([result, [s.get("is_expandable") for s in segs]]))
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ALLOC_VARS}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    result, flags = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == "expandable_segments:True"
    assert flags and all(flags), flags


def test_variable_name_follows_the_torch_version():
    def fake(version):
        return types.SimpleNamespace(__version__=version, _C=types.SimpleNamespace())

    assert cuda_alloc._torch_var_name(fake("2.13.0+cpu")) == "PYTORCH_ALLOC_CONF"
    assert cuda_alloc._torch_var_name(fake("2.9.1")) == "PYTORCH_ALLOC_CONF"
    assert cuda_alloc._torch_var_name(fake("2.8.0+cu128")) == "PYTORCH_CUDA_ALLOC_CONF"
    assert cuda_alloc._torch_var_name(fake("2.1.2")) == "PYTORCH_CUDA_ALLOC_CONF"


def test_platform_check():
    cuda = types.SimpleNamespace(version=types.SimpleNamespace(cuda="12.4"))
    rocm = types.SimpleNamespace(version=types.SimpleNamespace(cuda=None, hip="6.2"))
    assert cuda_alloc._platform_supports_expandable(cuda) == sys.platform.startswith("linux")
    assert not cuda_alloc._platform_supports_expandable(rocm)
