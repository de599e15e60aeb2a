"""Checkpoints: one file, ``DIR/checkpoint.pt``, replaced atomically after every epoch (and at a
graceful stop mid-epoch), read back with ``torch.load(weights_only=True)`` (no pickle).

Contents (tensors, numbers, strings, lists and dicts only): ``format``, ``model`` and ``optimizer``
state dicts, ``best_model`` (the state at the best epoch, for ``--predict``), ``loader``
(``{"epoch", "next_batch"}``: where the next batch comes from), ``config`` (``TrainConfig``
fields), ``epochs`` (``EpochStats`` dicts so far), ``best`` (best epoch, its main-metric value and
test metrics), ``bad_epochs`` (early-stopping count), ``rng`` (torch's CPU generator, for dropout),
``partial`` (the running loss/accuracy sums of an interrupted epoch, else ``None``).
Optional: ``trainer`` (the tag of the task and kind of data that wrote it, e.g. ``"node"``,
``"link"``, ``"hetero"``, ``"hetero-link"``, ``"partitioned"``; absent: ``"node"``),
``rank_rng`` (every rank's CPU and, when used, CUDA generator, so that each DDP rank resumes
its own dropout masks; absent or from another rank count: every rank takes ``rng``) and
``dataset`` (``{"name", "path", "fingerprint"}`` of the data it trained on,
:func:`dataset_fingerprint`; a resume onto other data is refused; absent: not compared).

:class:`SaveFolder` holds the folder a run checkpoints into for the run's life (a lock: a second
run saving there is refused at once; a folder the run made is removed if it fails before its
first checkpoint).

:class:`RunState` holds this state during a run and takes the steps every trainer shares
(resume, begin and end an epoch, save on rank 0, stop gracefully on a signal).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path
from typing import Mapping, Optional

from .._checks import shown
from .._io import atomic_write
from ..errors import GraphfeedError

FORMAT = 1
FILENAME = "checkpoint.pt"
KEYS = ("format", "model", "optimizer", "best_model", "loader", "config", "epochs", "best",
        "bad_epochs", "rng", "partial")


def checkpoint_path(folder) -> Path:
    return Path(folder) / FILENAME


def save_checkpoint(folder, state: Mapping) -> Path:
    """Write ``state`` to ``folder/checkpoint.pt`` via a temporary file, fsync and rename: a kill
    at any moment leaves the previous checkpoint or the new one, never a torn file."""
    import torch

    missing = [k for k in KEYS if k not in state]
    assert not missing, f"checkpoint state lacks {missing}"
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GraphfeedError(f"cannot create checkpoint folder {folder}: {e.strerror or e}") from None
    if not folder.is_dir():
        raise GraphfeedError(f"checkpoint folder {folder} is not a folder")
    final = checkpoint_path(folder)
    try:
        atomic_write(final, lambda f: torch.save(dict(state), f))
    except OSError as e:
        raise GraphfeedError(f"cannot write checkpoint {final}: {e.strerror or e}") from None
    return final


class SaveFolder:
    """The folder a run checkpoints into (``--save``, else ``--resume``), held for the run.

    Checked before any data is read (``GraphfeedError`` when it is a file, or when it, or the
    nearest folder above it that exists, is not writable), without creating anything: a
    ``--dry-run``, or a run refused before it starts, leaves no folder behind. Entered for the
    run's life (rank 0): ``--save``'s folder is created if missing (remembering the first folder
    this made), then an exclusive ``flock`` on the folder itself, taken without waiting, so a
    second run saving there is refused at once in one line; the kernel drops it when the
    process ends however it ends (a SIGKILL leaves no stale lock), and no lock file is left in
    the folder beside the checkpoint. Left by an exception (a full disk, Ctrl-C before the
    first checkpoint), a folder this run made that holds no checkpoint is removed, with the
    folders made above it; a folder that existed before stays, and so does one holding a
    checkpoint (it is what ``--resume`` continues)."""

    def __init__(self, folder, flag: str = "--save", *, create: bool = True):
        self.folder, self.flag, self.create = Path(folder).absolute(), flag, create
        self.made = None  # the first folder on the way that __enter__ created
        self._held = None
        if create:
            there = next(p for p in (self.folder, *self.folder.parents) if p.exists())
            if not there.is_dir():
                raise GraphfeedError(f"{flag} {folder}: {there} is a file, not a folder")
            if not os.access(there, os.W_OK):
                what = "folder is" if there == self.folder else f"folder {there} is"
                raise GraphfeedError(f"{flag} {folder}: {what} not writable")

    def _make(self) -> None:
        missing = [p for p in (self.folder, *self.folder.parents) if not p.exists()]
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise GraphfeedError(f"{self.flag} {self.folder}: cannot create the folder "
                                 f"({e.strerror or e})") from None
        self.made = missing[-1] if missing else None

    def __enter__(self) -> "SaveFolder":
        import fcntl

        if self.create:
            self._make()
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            self._unmake()
            raise GraphfeedError(f"{self.flag} {self.folder}: cannot open the folder "
                                 f"({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # a folder removed (by a run that failed and cleaned up) between open and flock
            if os.stat(self.folder).st_ino != os.fstat(fd).st_ino:
                raise FileNotFoundError(self.folder)
        except BlockingIOError:
            os.close(fd)
            raise GraphfeedError(f"{self.flag} {self.folder}: another graphfeed train is saving "
                                 f"there right now; wait for it to end, or choose another "
                                 f"folder") from None
        except OSError as e:
            os.close(fd)
            self._unmake()
            raise GraphfeedError(f"{self.flag} {self.folder}: cannot lock the folder "
                                 f"({e.strerror or e})") from None
        self._held = fd
        return self

    def _unmake(self) -> None:
        if self.made is not None and not checkpoint_path(self.folder).exists():
            self._remove_made()

    def __exit__(self, exc_type, exc, tb) -> bool:
        fd, self._held = self._held, None
        try:
            if exc_type is not None:
                self._unmake()
        finally:
            if fd is not None:
                os.close(fd)  # releases the lock
        return False

    def _remove_made(self) -> None:
        """Remove a checkpoint's temporary files (``.checkpoint.pt.*``) and every folder from
        ``folder`` up to ``made`` that is then empty (``rmdir``: anything else a user put there
        stays, and so does its folder)."""
        for p in self.folder.glob(f".{FILENAME}.*"):
            with contextlib.suppress(OSError):
                p.unlink()
        d = self.folder
        while True:
            try:
                d.rmdir()
            except OSError:
                return
            if d == self.made:
                return
            d = d.parent


def load_checkpoint(folder) -> dict:
    """The state saved by :func:`save_checkpoint` (on CPU); errors name the file."""
    import pickle

    import torch

    path = checkpoint_path(folder)
    if not Path(folder).is_dir():
        raise GraphfeedError(f"checkpoint folder {folder} does not exist")
    if not path.is_file():
        raise GraphfeedError(f"{path}: no checkpoint there (written by 'graphfeed train --save')")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GraphfeedError(f"{path}: not a readable graphfeed checkpoint ({first})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        got = shown(state.get("format")) if isinstance(state, dict) else type(state).__name__
        raise GraphfeedError(f"{path}: checkpoint format {got}, expected {FORMAT}")
    missing = [k for k in KEYS if k not in state]
    if missing:
        raise GraphfeedError(f"{path}: checkpoint lacks {missing}")
    check_state(path, state)
    return state


# ---------------------------------------------------------------- checking what was read
def _is_int(v) -> bool:
    import numbers

    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v) -> bool:
    import numbers

    return isinstance(v, numbers.Real) and not isinstance(v, bool)


class _Bad(Exception):
    """A field of a checkpoint with a value of the wrong type or range: ``(field, message)``."""


def _need(ok: bool, field: str, v, expected: str) -> None:
    if not ok:
        raise _Bad(field, f"is {shown(v)}, expected {expected}")


def _check_metrics(field: str, v, optional: bool) -> None:
    if v is None and optional:
        return
    _need(isinstance(v, dict) and all(isinstance(k, str) and _is_num(x) for k, x in v.items()),
          field, v, "a dict of metric name -> number" + (" or None" if optional else ""))


def _check_rng(field: str, v) -> None:
    import torch

    want = torch.get_rng_state()
    _need(isinstance(v, torch.Tensor) and v.dtype == torch.uint8 and v.shape == want.shape,
          field, v, f"torch's CPU generator state (a uint8 tensor of {want.numel()} bytes)")


def _check_epoch_stats(i: int, e) -> None:
    import dataclasses

    from .result import EpochStats

    field = f"epochs[{i}]"
    _need(isinstance(e, dict), field, e, "a dict of epoch statistics")
    fields = {f.name: f for f in dataclasses.fields(EpochStats)}
    unknown = [k for k in e if k not in fields]
    if unknown:
        raise _Bad(field, f"has unknown keys {shown([str(k)[:40] for k in unknown[:5]])}")
    required = [n for n, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    lacking = [k for k in required if k not in e]
    if lacking:
        raise _Bad(field, f"lacks {lacking}")
    for k, v in e.items():
        sub = f"{field}.{k}"
        if k == "epoch":
            _need(_is_int(v) and v >= 0, sub, v, "an integer >= 0")
        elif k in ("valid", "test"):
            _check_metrics(sub, v, optional=True)
        elif k in ("peak_rss_bytes", "rss_bytes"):
            _need(_is_int(v) and v >= 0, sub, v, "an integer >= 0")
        elif k in ("peak_gpu_bytes", "peak_gpu_reserved_bytes"):
            _need(v is None or (_is_int(v) and v >= 0), sub, v, "an integer >= 0 or None")
        else:
            _need(_is_num(v), sub, v, "a number")


def _check_tensors(field: str, sd) -> None:
    import torch

    _need(isinstance(sd, dict), field, sd, "a state dict of tensors")
    for k, t in sd.items():
        _need(isinstance(k, str) and isinstance(t, torch.Tensor), f"{field}[{shown(k)}]", t,
              "a tensor under a parameter name")


def _check_optimizer(opt) -> None:
    """A torch optimizer's ``state_dict()``: ``state`` (parameter index -> name -> tensor or
    number) and ``param_groups`` (dicts of plain settings with ``params``: parameter indices).
    Whether it fits this run's model is :func:`_load_optimizer`'s."""
    import torch

    _need(isinstance(opt, dict) and {"state", "param_groups"} <= set(opt), "optimizer", opt,
          "a state dict {'state': {...}, 'param_groups': [...]}")
    st, groups = opt["state"], opt["param_groups"]
    _need(isinstance(st, dict), "optimizer.state", st, "a dict of parameter index -> state")
    _need(isinstance(groups, list) and groups, "optimizer.param_groups", groups,
          "a non-empty list of parameter groups")
    seen = set()
    for i, g in enumerate(groups):
        f = f"optimizer.param_groups[{i}]"
        _need(isinstance(g, dict) and isinstance(g.get("params"), list), f, g,
              "a dict of settings with 'params': a list of parameter indices")
        for k, v in g.items():
            if k == "params":
                for j, p in enumerate(v):
                    _need(_is_int(p) and p >= 0 and p not in seen, f"{f}.params[{j}]", p,
                          "a parameter index >= 0, once")
                    seen.add(p)
            else:
                plain = v is None or isinstance(v, (bool, str)) or _is_num(v) or (
                    isinstance(v, (list, tuple)) and len(v) <= 8 and all(map(_is_num, v)))
                _need(isinstance(k, str) and plain, f"{f}.{shown(k)}", v,
                      "a number, bool, string, None or a few numbers")
    for k, d in st.items():
        f = f"optimizer.state[{shown(k)}]"
        _need(_is_int(k) and k in seen, f, k, "the index of a parameter of param_groups")
        _need(isinstance(d, dict), f, d, "a dict of name -> tensor or number")
        for name, v in d.items():
            _need(isinstance(name, str) and (isinstance(v, torch.Tensor) or _is_num(v)),
                  f"{f}.{shown(name)}", v, "a tensor or a number")


def _check_fields(state: Mapping) -> None:
    import torch

    _check_tensors("model", state["model"])
    _check_optimizer(state["optimizer"])
    bm = state["best_model"]
    _need(bm is None or (isinstance(bm, dict) and all(isinstance(k, str) and
                                                      isinstance(t, torch.Tensor)
                                                      for k, t in bm.items())),
          "best_model", bm, "a state dict of tensors or None")
    _need(isinstance(state["config"], dict), "config", state["config"], "a dict")
    if "trainer" in state:
        _need(isinstance(state["trainer"], str) and _TAG.fullmatch(state["trainer"]) is not None,
              "trainer", state["trainer"], "a task tag such as 'node' or 'link'")
    ld = state["loader"]
    _need(isinstance(ld, dict), "loader", ld, "{'epoch': int, 'next_batch': int}")
    for k in ("epoch", "next_batch"):
        _need(_is_int(ld.get(k)) and ld[k] >= 0, f"loader.{k}", ld.get(k), "an integer >= 0")
    eps = state["epochs"]
    _need(isinstance(eps, list), "epochs", eps, "a list of epoch statistics")
    for i, e in enumerate(eps):
        _check_epoch_stats(i, e)
    best = state["best"]
    _need(isinstance(best, dict) and {"epoch", "value", "test"} <= set(best), "best", best,
          "{'epoch': int, 'value': number, 'test': {metric: number}}")
    _need(_is_int(best["epoch"]) and best["epoch"] >= -1, "best.epoch", best["epoch"],
          "an integer >= -1")
    _need(_is_num(best["value"]), "best.value", best["value"], "a number")
    _check_metrics("best.test", best["test"], optional=False)
    _need(_is_int(state["bad_epochs"]) and state["bad_epochs"] >= 0, "bad_epochs",
          state["bad_epochs"], "an integer >= 0")
    _check_rng("rng", state["rng"])
    part = state["partial"]
    if part is not None:
        _need(isinstance(part, dict) and {"sums", "seconds"} <= set(part), "partial", part,
              "None or {'sums': [3 numbers], 'seconds': number}")
        sums = part["sums"]
        _need(isinstance(sums, (list, tuple)) and len(sums) == 3 and all(map(_is_num, sums)),
              "partial.sums", sums, "a list of 3 numbers")
        _need(_is_num(part["seconds"]) and part["seconds"] >= 0, "partial.seconds",
              part["seconds"], "a number >= 0")
    sc = state.get("scaler")
    if sc is not None:  # fp16's GradScaler (checkpoints of other precisions hold None)
        _need(isinstance(sc, dict) and _is_num(sc.get("scale")) and sc["scale"] > 0
              and _is_int(sc.get("_growth_tracker")) and sc["_growth_tracker"] >= 0,
              "scaler", sc, "None or a GradScaler state {'scale': number > 0, "
              "'_growth_tracker': int >= 0, ...}")
    rr = state.get("rank_rng")
    if rr is not None:
        _need(isinstance(rr, list), "rank_rng", rr, "a list of per-rank generator states")
        for i, d in enumerate(rr):
            _need(isinstance(d, dict) and "cpu" in d, f"rank_rng[{i}]", d,
                  "{'cpu': tensor[, 'cuda': tensor]}")
            _check_rng(f"rank_rng[{i}].cpu", d["cpu"])
            if "cuda" in d:
                c = d["cuda"]
                _need(isinstance(c, torch.Tensor) and c.dtype == torch.uint8 and c.dim() == 1,
                      f"rank_rng[{i}].cuda", c, "a uint8 tensor")
    ds = state.get("dataset")
    if ds is not None:
        _need(isinstance(ds, dict) and all(isinstance(ds.get(k), str) and len(ds[k]) <= 4096
                                           for k in ("name", "path", "fingerprint")),
              "dataset", ds, "None or {'name': str, 'path': str, 'fingerprint': str}")


def check_state(path, state: Mapping) -> None:
    """Check the type and range of every field :meth:`RunState.resume` reads;
    ``GraphfeedError`` naming the checkpoint and the field."""
    try:
        _check_fields(state)
    except _Bad as e:
        field, msg = e.args
        raise GraphfeedError(f"{path}: checkpoint field {field} {msg}") from None


def check_compatible(path, saved: Mapping, current: Mapping, keys) -> None:
    """Refuse to continue a run with settings that change what it computes. A key the saved
    config lacks (a checkpoint older than the setting) is not compared."""
    for k in keys:
        if k not in saved:
            continue
        a, b = saved.get(k), current.get(k)
        if isinstance(a, (list, tuple)):
            a = list(a)
        if isinstance(b, (list, tuple)):
            b = list(b)
        if a != b:
            raise GraphfeedError(
                f"{checkpoint_path(path)} was written with {k}={shown(a)}, but this run has "
                f"{k}={shown(b)}; resume with the same {k}"
            )


#: which trainer wrote a checkpoint (``"trainer"``; checkpoints without it are the node trainer's)
#: a checkpoint's ``trainer`` tag (each task names its own, ``Task.trainer``)
_TAG = re.compile(r"[a-z][a-z0-9-]{0,39}")


class GracefulStop:
    """While active (main thread, one process). ``enabled`` (the training loop): the first
    SIGINT/SIGTERM asks the loop to stop after the current batch (it checkpoints when it has a
    folder, then raises KeyboardInterrupt between two batches, where nothing is half done, and
    ``fit`` reports the best epoch so far); a second SIGINT interrupts at once. Else (the
    baselines after the loop): a SIGTERM (a time limit's, a scheduler's) interrupts as Ctrl-C
    does, where its default action would kill the run before its summary. A handler the user
    installed for SIGTERM is left in place there."""

    def __init__(self, enabled: bool, say, *, one_process: bool = True, checkpoint: bool = False):
        import threading

        main = threading.current_thread() is threading.main_thread()
        self.enabled = enabled and main and one_process
        self.interrupt_on_term = main and one_process and not self.enabled
        self.checkpoint = checkpoint
        self.requested = False
        self._say = say
        self._old = {}

    def _handler(self, signum, frame):
        import signal

        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        then = "without a checkpoint" if self.checkpoint else "at once"
        self._say(f"graphfeed train: {signal.Signals(signum).name}: stopping after this batch "
                  f"(Ctrl-C again to abort {then})")

    def __enter__(self):
        import signal

        if self.enabled:
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handler)
        elif self.interrupt_on_term and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._old[signal.SIGTERM] = signal.signal(signal.SIGTERM, _interrupt)
        return self

    def __exit__(self, *exc):
        import signal

        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class RunState:
    """What a checkpoint carries of one run, and the steps every trainer takes with it: resume
    (:meth:`resume`), count an epoch's sums from where an interrupted one stopped
    (:meth:`begin_epoch`), keep the best model and the early-stopping count (:meth:`end_epoch`),
    write the checkpoint on rank 0 (:meth:`save`), stop gracefully mid-epoch
    (:meth:`stop_requested`/:meth:`stop_mid_epoch`).

    ``net`` is the plain module (not the DDP wrapper), ``result`` the run's ``TrainResult``
    (its ``epochs``, ``best_epoch``, ``best_valid`` and ``test`` are saved and restored),
    ``keys`` the ``TrainConfig`` fields a resumed run must share (``check_compatible``),
    ``trainer`` the task's tag (``Task.trainer``). An epoch's running sums are
    ``[loss sum, correct, seen]``."""

    def __init__(self, cfg, net, opt, result, *, trainer: str, keys, rank: int = 0,
                 world_size: int = 1, say=print, scaler=None, dataset=None):
        assert _TAG.fullmatch(trainer), trainer
        self.cfg, self.net, self.opt, self.result = cfg, net, opt, result
        self.scaler = scaler  # fp16's GradScaler: its scale goes on with the run
        self.trainer, self.keys, self.rank, self.say = trainer, tuple(keys), rank, say
        self.world_size = world_size
        self.save_dir = cfg.save or cfg.resume
        self.keep_best = bool(self.save_dir or cfg.predict)
        self.best_state = None  # the best epoch's weights (CPU), kept for --save/--predict
        self.bad_epochs = 0
        self.partial = None  # an interrupted epoch's sums, until begin_epoch takes them
        self.start_epoch = 0
        self.stop = GracefulStop(True, say, one_process=world_size == 1,
                                 checkpoint=self.save_dir is not None)
        # the data the run trains on, recorded in its checkpoints and compared on resume
        self.data_name, self.data_folder = _data_folder(cfg, dataset)
        self._data_record = None

    def data_record(self) -> Optional[dict]:
        """``{"name", "path", "fingerprint"}`` of the run's data (computed once), or ``None``
        where its folder is unknown (a dataset built in memory)."""
        if self._data_record is None and self.data_folder is not None:
            self._data_record = {"name": self.data_name, "path": str(self.data_folder),
                                 "fingerprint": dataset_fingerprint(self.data_folder)}
        return self._data_record

    def _check_same_data(self, path, saved) -> None:
        """Refuse to resume a checkpoint trained on other data than this run's (a re-prepared
        or edited dataset of the same name): its test figures and weights belong to that data.
        A checkpoint without the record (older), or a run whose data has no folder, passes."""
        mine = self.data_record() if saved is not None else None
        if mine is None or saved["fingerprint"] == mine["fingerprint"]:
            return
        raise GraphfeedError(
            f"{path} was trained on dataset {shown(saved['name'])} ({shown(saved['path'])}, "
            f"fingerprint {saved['fingerprint'][:12]}), but this run's dataset "
            f"{shown(mine['name'])} ({mine['path']}) holds other data (fingerprint "
            f"{mine['fingerprint'][:12]}); resume on the same data, or start a new run")

    # ------------------------------------------------------------------ resume
    def resume(self, loader) -> None:
        """With ``cfg.resume``: check the checkpoint against this run, then restore the model,
        optimizer, fp16's gradient scale, loader position, torch's CPU generator, the epochs so
        far, the best epoch and its weights, the early-stopping count and an interrupted epoch's
        sums."""
        from .result import EpochStats

        cfg = self.cfg
        if not cfg.resume:
            return
        state = load_checkpoint(cfg.resume)
        path = checkpoint_path(cfg.resume)
        written_by = state.get("trainer", "node")
        if written_by != self.trainer:
            raise GraphfeedError(
                f"{path} was written by the {_TRAINER_NAMES.get(written_by, written_by)} trainer; "
                f"this run is {_TRAINER_NAMES.get(self.trainer, self.trainer)}: resume with the same dataset and "
                f"--task")
        check_compatible(cfg.resume, state["config"], cfg.to_dict(), self.keys)
        self._check_same_data(path, state.get("dataset"))
        own = self.net.state_dict()
        _check_fits(path, "model", state["model"], own)
        if state["best_model"] is not None:
            _check_fits(path, "best_model", state["best_model"], own)
        try:
            self.net.load_state_dict(state["model"])
        except (RuntimeError, ValueError, KeyError, TypeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise GraphfeedError(f"{path}: its model does not fit this run (another dataset?): "
                                 f"{first[:200]}") from None
        _load_optimizer(path, self.opt, state["optimizer"])
        if self.scaler is not None and state.get("scaler") is not None:
            self.scaler.load_state_dict(state["scaler"])
        loader.load_state_dict(state["loader"])
        _set_rng(state, self.rank, self.world_size)
        r = self.result
        r.epochs = [EpochStats(**e) for e in state["epochs"]]
        best = state["best"]
        r.best_epoch, r.best_valid, r.test = best["epoch"], best["value"], dict(best["test"])
        self.best_state = state["best_model"]
        self.bad_epochs = int(state["bad_epochs"])
        self.partial = state["partial"]
        self.start_epoch = int(state["loader"]["epoch"])
        r.resumed_from_epoch = self.start_epoch
        self.say(f"graphfeed train: resumed from {path} at epoch {self.start_epoch}, batch "
                 f"{state['loader']['next_batch']}")
        if self.start_epoch >= cfg.epochs:
            self.say(f"graphfeed train: the checkpoint has {self.start_epoch} epochs done; "
                     f"--epochs {cfg.epochs} asks for no more")

    # ------------------------------------------------------------------ an epoch
    def epochs(self, loader):
        """The epochs left to run: :meth:`resume`, then ``(epoch, sums, seconds)`` for each
        (:meth:`begin_epoch`), with the graceful stop active until the loop ends (a ``break``
        or an exception closes the generator, which restores the signal handlers)."""
        self.resume(loader)
        with self.stop:
            for epoch in range(self.start_epoch, self.cfg.epochs):
                sums, seconds = self.begin_epoch(loader, epoch)
                yield epoch, sums, seconds

    def begin_epoch(self, loader, epoch: int):
        """``(sums, seconds)`` the epoch starts from: zeros after ``loader.set_epoch(epoch)``,
        or an interrupted epoch's (the loader already stands at its next batch)."""
        if self.partial is None:
            loader.set_epoch(epoch)
            return [0.0, 0.0, 0.0], 0.0
        part, self.partial = self.partial, None
        return [float(v) for v in part["sums"]], float(part["seconds"])

    def stop_requested(self) -> bool:
        return self.stop.requested

    def stop_mid_epoch(self, loader, sums, seconds: float):
        """Checkpoint the interrupted epoch (its sums and seconds so far) and raise
        ``KeyboardInterrupt``. After an epoch's last batch it returns: the epoch ends (its
        evaluation and checkpoint), then :meth:`stop_if_requested` stops."""
        if loader.state_dict()["next_batch"] == 0:
            return
        self.save(loader, {"sums": [float(v) for v in sums], "seconds": float(seconds)})
        if self.save_dir:
            self.say(f"graphfeed train: checkpoint {checkpoint_path(self.save_dir)} (epoch "
                     f"{loader.state_dict()['epoch']}, next batch "
                     f"{loader.state_dict()['next_batch']}); continue with --resume "
                     f"{self.save_dir}")
        raise KeyboardInterrupt

    def stop_if_requested(self, loader) -> None:
        """After an epoch's checkpoint: raise ``KeyboardInterrupt`` if a stop was asked for."""
        if not self.stop.requested:
            return
        if self.save_dir:
            self.say(f"graphfeed train: checkpoint {checkpoint_path(self.save_dir)} (epoch "
                     f"{loader.state_dict()['epoch'] - 1} done); continue with --resume "
                     f"{self.save_dir}")
        raise KeyboardInterrupt

    def end_epoch(self, stats, value: float) -> bool:
        """Record epoch ``stats`` (an ``EpochStats``) with main validation metric ``value``:
        the best epoch (its test metrics and, when kept, its weights) and the early-stopping
        count, which counts evaluations: an epoch without one (``stats.evaluated`` False,
        ``value`` ignored) changes neither. True when the epoch is the best so far."""
        from .metrics import is_better

        r = self.result
        r.epochs.append(stats)
        if not stats.evaluated:  # --eval-every skipped it: neither best nor a bad epoch
            return False
        if not is_better(value, r.best_valid):
            self.bad_epochs += 1
            return False
        r.best_epoch, r.best_valid, r.test = stats.epoch, value, dict(stats.test)
        self.bad_epochs = 0
        if self.keep_best:
            self.best_state = {k: v.detach().cpu().clone()
                               for k, v in self.net.state_dict().items()}
        return True

    def evaluates(self, epoch: int) -> bool:
        """Whether ``epoch`` is evaluated (``--eval-every``; the last epoch always is)."""
        from .evaluate import evaluates_epoch

        return evaluates_epoch(self.cfg, epoch)

    def patience_spent(self) -> bool:
        return bool(self.cfg.patience) and self.bad_epochs >= self.cfg.patience

    def finish_epoch(self, loader, stats, on_epoch=None) -> bool:
        """After an epoch was recorded (:meth:`end_epoch`) and printed: checkpoint it, call
        ``on_epoch(stats)``, stop on a pending signal; True when early stopping ends the run
        (``result.stopped_early`` set and announced)."""
        self.save(loader)
        if on_epoch is not None:
            on_epoch(stats)
        self.stop_if_requested(loader)
        if not self.patience_spent():
            return False
        r = self.result
        r.stopped_early = stats.epoch < self.cfg.epochs - 1
        if r.stopped_early:
            self.say(f"graphfeed train: early stop after epoch {stats.epoch}: valid "
                     f"{r.main_metric} has not improved for {self.bad_epochs} evaluations (best "
                     f"{r.best_valid:.4f} at epoch {r.best_epoch})")
        return True

    def load_best(self) -> None:
        """Put the best epoch's weights in the model (for ``--predict``)."""
        if self.best_state is not None:
            self.net.load_state_dict(self.best_state)

    # ------------------------------------------------------------------ writing
    def save(self, loader, partial=None) -> None:
        """The checkpoint at ``loader``'s position (rank 0 only; nothing without a folder)."""
        import dataclasses

        import torch

        if not self.save_dir:
            return
        rank_rng = _rng_states(self.world_size)  # every rank's generators (a collective)
        if self.rank != 0:
            return
        r = self.result
        save_checkpoint(self.save_dir, {
            "format": FORMAT, "trainer": self.trainer, "model": self.net.state_dict(),
            "optimizer": self.opt.state_dict(), "best_model": self.best_state,
            "loader": loader.state_dict(), "config": self.cfg.to_dict(),
            "epochs": [dataclasses.asdict(e) for e in r.epochs],
            "best": {"epoch": r.best_epoch, "value": r.best_valid, "test": r.test},
            "bad_epochs": self.bad_epochs, "rng": torch.get_rng_state(), "partial": partial,
            "rank_rng": rank_rng,
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "dataset": self.data_record(),
        })

    @property
    def checkpoint(self):
        """The checkpoint file this rank wrote, else ``None`` (``TrainResult.checkpoint``)."""
        return str(checkpoint_path(self.save_dir)) if self.save_dir and self.rank == 0 else None


_TRAINER_NAMES = {"node": "node-classification", "link": "link-prediction",
                  "hetero": "heterogeneous node-classification",
                  "hetero-link": "typed link-prediction",
                  "partitioned": "partitioned node-classification"}


def _check_fits(path, field: str, sd: Mapping, own: Mapping) -> None:
    """Refuse a state dict whose names or shapes differ from this run's model, before it is
    loaded (``best_model`` is loaded only at the end, for ``--predict``)."""
    missing = [k for k in own if k not in sd]
    extra = [k for k in sd if k not in own]
    if missing or extra:
        which = f"lacks {shown(missing[:3])}" if missing else f"has unknown {shown(extra[:3])}"
        raise GraphfeedError(f"{path}: checkpoint field {field} {which}: its model does not fit "
                             f"this run (another dataset or --model?)")
    for k, t in own.items():
        if tuple(sd[k].shape) != tuple(t.shape):
            raise GraphfeedError(f"{path}: checkpoint field {field}[{shown(k)}] has shape "
                                 f"{tuple(sd[k].shape)}, this run's model {tuple(t.shape)} "
                                 f"(another dataset or --hidden?)")


def _load_optimizer(path, opt, saved: Mapping) -> None:
    """Load the optimizer state (its structure checked by :func:`check_state`), then refuse one
    that does not fit the model: ``load_state_dict`` accepts a moment tensor of another shape or
    dtype, which fails later, in the first step."""
    import torch

    try:
        opt.load_state_dict(saved)
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GraphfeedError(f"{path}: checkpoint field optimizer does not fit this run's model "
                             f"({first[:200]})") from None
    index = 0
    for g in opt.param_groups:
        for p in g["params"]:
            for name, v in opt.state.get(p, {}).items():
                f = f"optimizer.state[{index}].{shown(name)}"
                if name == "step":
                    ok = (not isinstance(v, torch.Tensor) or v.numel() == 1) and float(v) >= 0
                    want = "a count >= 0"
                else:
                    ok = not isinstance(v, torch.Tensor) or (
                        v.is_floating_point() and tuple(v.shape) == tuple(p.shape))
                    want = f"a float tensor of its parameter's shape {tuple(p.shape)}"
                if not ok:
                    got = (f"a {v.dtype} tensor of shape {tuple(v.shape)}"
                           if isinstance(v, torch.Tensor) else shown(v))
                    raise GraphfeedError(f"{path}: checkpoint field {f} is {got}, expected "
                                         f"{want}")
            index += 1


# ---------------------------------------------------------------- the data a run trains on
#: a dataset's fingerprint reads each array file whole up to this size (labels and splits of
#: any ordinary dataset, which decide the test figures), else this many chunks of this size
#: spread over it: at most about 1 MiB a file, once per run
FINGERPRINT_WHOLE = 1 << 20
FINGERPRINT_CHUNKS = 64
FINGERPRINT_CHUNK = 16 << 10


def dataset_fingerprint(folder) -> str:
    """A hex digest of the data in dataset (or partitions) folder ``folder``: each ``.json``
    (the metadata) and ``.npy`` file's relative path and size, and its bytes (whole up to
    :data:`FINGERPRINT_WHOLE`, else :data:`FINGERPRINT_CHUNKS` evenly spread chunks and the
    last one). Content rather than modification times, so a copied or re-generated identical
    dataset keeps its fingerprint while a re-prepared or edited one (other sizes, metadata,
    labels or splits) does not; sampling keeps it cheap on a 28 GB feature file, at the price
    of missing an edit that changes no size and falls between the samples of a large file.
    Hidden entries (locks, temporary folders) and the LMDB copies that ``features=lmdb``
    builds beside the arrays are left out: they change without the data changing."""
    folder = Path(folder)
    h = hashlib.blake2b(digest_size=16)
    files = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.endswith(".lmdb"))
        files += [Path(root, n) for n in names
                  if not n.startswith(".") and n.endswith((".npy", ".json"))]
    for f in sorted(files):
        try:
            with open(f, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                h.update(f"{f.relative_to(folder).as_posix()}\0{size}\0".encode())
                if size <= FINGERPRINT_WHOLE:
                    h.update(fh.read())
                    continue
                last = size - FINGERPRINT_CHUNK
                for i in range(FINGERPRINT_CHUNKS + 1):
                    h.update(os.pread(fh.fileno(), FINGERPRINT_CHUNK,
                                      last * i // FINGERPRINT_CHUNKS))
        except OSError as e:
            raise GraphfeedError(f"cannot read {f} to fingerprint the dataset: "
                                 f"{e.strerror or e}") from None
    return h.hexdigest()


def _data_folder(cfg, dataset) -> tuple:
    """``(name, folder)`` of the data a run of ``cfg`` trains on: ``dataset``'s folder when the
    caller has it open, else ``--partitions``, else ``--dataset`` (a folder, or a built-in
    name's cache folder, without generating it); ``folder`` ``None`` where none exists."""
    if dataset is not None:  # a Dataset (datasets.format): opened from its folder
        return str(dataset.name), Path(dataset.path)
    if cfg.partitions:
        return str(cfg.partitions), Path(cfg.partitions)
    from ..datasets import synthetic

    spec = str(cfg.dataset)
    if spec in synthetic.SPECS and not Path(spec).is_dir():
        folder = synthetic.builtin_path(spec, Path(cfg.data_root) if cfg.data_root else None)
    else:
        folder = Path(spec)
    return spec, (folder if folder.is_dir() else None)


def _rng_states(world_size: int) -> list:
    """``[{"cpu": state, "cuda": state (when CUDA is in use)}]`` of every rank, in rank order
    (each rank draws its own dropout masks, so each continues from its own generators)."""
    import torch

    cuda = torch.cuda.is_initialized()
    mine = torch.get_rng_state()
    n_cpu = mine.numel()
    if cuda:
        mine = torch.cat([mine, torch.cuda.get_rng_state()])
    if world_size > 1:
        import torch.distributed as dist

        from ..distributed.sharing import collective_device

        local = mine.to(collective_device())
        every = [torch.empty_like(local) for _ in range(world_size)]
        dist.all_gather(every, local)
        every = [t.cpu() for t in every]
    else:
        every = [mine]
    out = []
    for t in every:
        d = {"cpu": t[:n_cpu].clone()}
        if cuda:
            d["cuda"] = t[n_cpu:].clone()
        out.append(d)
    return out


def _set_rng(state: Mapping, rank: int, world_size: int) -> None:
    """This rank's generators from a checkpoint: its own when the checkpoint has one per rank of
    as many ranks, else rank 0's CPU generator (``rng``)."""
    import torch

    per_rank = state.get("rank_rng")
    if per_rank and len(per_rank) == world_size:
        mine = per_rank[rank]
        torch.set_rng_state(mine["cpu"])
        if "cuda" in mine and torch.cuda.is_initialized():
            torch.cuda.set_rng_state(mine["cuda"])
    else:
        torch.set_rng_state(state["rng"])
