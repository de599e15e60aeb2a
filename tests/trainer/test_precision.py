"""``train --precision 32|bf16-mixed|fp16-mixed``: the forward pass and the loss (and sampled
evaluation) run under autocast in the chosen dtype, weights stay float32, fp16 scales its
gradients, layer-wise evaluation stays float32, and the result records the precision."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from graphfeed.cli.main import main
from graphfeed.errors import GraphfeedError
from graphfeed.models import build_model
from graphfeed.training import TrainConfig, train

KW = dict(dataset="tiny", epochs=1, fanouts=(5, 5), batch_size=256, progress=False,
          mlp_baseline=False, num_threads=1, device="cpu")


class Spy(nn.Module):
    """A GraphSAGE that records the dtype its first linear layer computes in, per mode."""

    def __init__(self, in_dim, num_classes):
        super().__init__()
        self.net = build_model("sage", in_dim, 32, num_classes, 2, dropout=0.0)
        self.seen = {"train": set(), "eval": set()}

    def forward(self, x, blocks):
        probe = nn.functional.linear(x[:1], torch.ones(2, x.shape[1]))
        self.seen["train" if self.training else "eval"].add(probe.dtype)
        return self.net(x, blocks)


def _spy_run(precision, **kw):
    made = []

    def factory(in_dim, num_classes):
        made.append(Spy(in_dim, num_classes))
        return made[0]

    r = train(TrainConfig(**{**KW, "precision": precision, "eval_method": "sampled", **kw}),
              model=factory)
    return r, made[0]


@pytest.mark.parametrize("precision, dtype", [("32", torch.float32),
                                              ("bf16-mixed", torch.bfloat16),
                                              ("fp16-mixed", torch.float16)])
def test_autocast_covers_the_training_step_and_sampled_evaluation(precision, dtype):
    r, spy = _spy_run(precision)
    assert spy.seen == {"train": {dtype}, "eval": {dtype}}
    assert all(p.dtype == torch.float32 for p in spy.parameters())  # mixed: weights stay float32
    assert r.precision == precision and r.to_dict()["precision"] == precision
    assert r.epochs[0].loss == r.epochs[0].loss  # finite, not NaN
    assert r.test_acc > 0.3, r.test_acc


def test_layerwise_evaluation_stays_float32_under_bf16():
    """The built-in models evaluate layer-wise by default (float32 tables); training is mixed."""
    r = train(TrainConfig(**{**KW, "precision": "bf16-mixed", "epochs": 2}))
    assert r.eval_method == "layerwise" and r.precision == "bf16-mixed"
    ref = train(TrainConfig(**{**KW, "epochs": 2}))
    assert abs(r.test_acc - ref.test_acc) < 0.1, (r.test_acc, ref.test_acc)


def test_fp16_scales_the_loss_on_the_cpu(monkeypatch):
    """fp16-mixed goes through a GradScaler (torch's CPU one here): its step is called."""
    steps = []
    real = torch.amp.GradScaler.step

    def counting(self, opt, *a, **kw):
        steps.append(self.get_scale())
        return real(self, opt, *a, **kw)

    monkeypatch.setattr(torch.amp.GradScaler, "step", counting)
    _spy_run("fp16-mixed")
    assert steps and steps[0] == 2.0**16


def test_bad_precision_is_refused():
    with pytest.raises(GraphfeedError, match="precision must be one of 32, bf16-mixed, fp16-mixed"):
        TrainConfig(precision="16").validate()


def test_cli_precision_in_the_json_and_the_final_line(capsys):
    assert main(["train", "--dataset", "tiny", "--epochs", "1", "--fanouts", "5,5", "--no-mlp",
                 "--no-progress", "--threads", "1", "--device", "cpu", "--precision",
                 "bf16-mixed", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["precision"] == "bf16-mixed"
    final = [ln for ln in err.splitlines() if "best valid" in ln][-1]
    assert final.endswith("; precision bf16-mixed")
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "tiny", "--precision", "bf16"])


def test_fp16_checkpoint_carries_the_gradient_scale_and_resume_keeps_it(tmp_path, monkeypatch):
    """The GradScaler's state goes into the checkpoint and comes back on resume (a resumed fp16
    run does not restart from 2**16 and re-learn its scale); another --precision is refused."""
    from graphfeed.trainer.checkpoint import load_checkpoint

    save = str(tmp_path / "run")
    train(TrainConfig(**{**KW, "precision": "fp16-mixed", "save": save}))
    state = load_checkpoint(save)
    assert state["scaler"] is not None and state["scaler"]["scale"] > 0
    # a scale no fresh scaler would have, to see it come back
    state["scaler"]["scale"] = 1234.0
    torch.save(state, tmp_path / "run" / "checkpoint.pt")
    seen = []
    real = torch.amp.GradScaler.step

    def spy(self, opt, *a, **kw):
        seen.append(self.get_scale())
        return real(self, opt, *a, **kw)

    monkeypatch.setattr(torch.amp.GradScaler, "step", spy)
    train(TrainConfig(**{**KW, "precision": "fp16-mixed", "epochs": 2, "resume": save}))
    assert seen and seen[0] == 1234.0
    with pytest.raises(GraphfeedError, match="precision"):
        train(TrainConfig(**{**KW, "precision": "32", "epochs": 3, "resume": save}))


def test_a_bad_scaler_state_in_a_checkpoint_is_named(tmp_path):
    from graphfeed.trainer.checkpoint import load_checkpoint

    save = str(tmp_path / "run")
    train(TrainConfig(**{**KW, "precision": "fp16-mixed", "save": save}))
    state = load_checkpoint(save)
    state["scaler"] = {"scale": -1.0, "_growth_tracker": 0}
    torch.save(state, tmp_path / "run" / "checkpoint.pt")
    with pytest.raises(GraphfeedError, match="field scaler"):
        load_checkpoint(save)
