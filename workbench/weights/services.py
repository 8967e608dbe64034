"""Filing weights: an import of a file copied in by hand, the discovery of published files the
libraries' caches (or the store's folder) already hold, and a fetch through the library's own API
on a machine that is online. Nothing here runs on a worker's training path: a run reads the file
its `weights:<id>` reference was resolved to."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

from django.conf import settings

from trainer.config import ALL_NETWORKS
from trainer.weights_file import suffix_of
from workbench.weights.catalog import NOT_PUBLISHED, Published, published_for, published_named
from workbench.weights.files import WeightsError, file_sha256, resolves_inside
from workbench.weights.models import StoredWeights


def store_networks() -> list[str]:
    """The networks the store files weights for: every network the trainer builds (classification,
    detection, segmentation) but its own LeNet and the user-defined one (their shapes depend on
    the dataset)."""
    return [name for name in ALL_NETWORKS if name not in NOT_PUBLISHED]


def _check_known(network: str) -> None:
    if network not in store_networks():
        raise WeightsError(f"unknown network {network!r}; the store holds weights of: {', '.join(store_networks())}")


# What a name in the store's folder may hold: a network's name may not ("timm/regnetx_002").
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def store_file_name(*, network: str, tag: str, sha256: str, suffix: str) -> str:
    """The name an imported file is filed under: one plain name in the store's folder, never a
    path. The zoo's networks are named `timm/<architecture>`; the `/` would make a folder."""
    stem = _UNSAFE_IN_NAME.sub("-", f"{network}-{tag or 'local'}").strip("-.")
    return f"{stem}-{sha256[:8]}{suffix}"


def _copy_into_store(source: Path, name: str) -> Path:
    """`source` copied to WEIGHTS_DIR/name through a temp file in the same folder: never half there."""
    if Path(name).name != name or name.startswith("."):  # a published name is the library's; still one name
        raise WeightsError(f"{name!r} is not a file name the store can file under")
    folder = Path(settings.WEIGHTS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    tmp = folder / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _file(
    *,
    path: Path,
    network: str,
    sha256: str,
    published: Published | None,
    tag: str,
    tensor_count: int,
    created_by,
    verified: bool | None = None,
) -> StoredWeights:
    fields = {
        "network": network,
        "file_name": path.name,
        "sha256": sha256,
        "size_bytes": path.stat().st_size,
        "tensor_count": tensor_count,
        "created_by": created_by,
        "source": StoredWeights.Source.LOCAL,
        "tag": tag,
        "verified": False,
    }
    if published is not None:
        fields |= {
            "source": published.source,
            "tag": published.tag,
            "verified": bool(published.hash_prefix) if verified is None else verified,
            "licence": published.licence,
            "dataset": published.dataset,
            "accuracy": published.accuracy,
            "mean": list(published.mean) if published.mean else None,
            "std": list(published.std) if published.std else None,
            "resize": published.resize,
            "crop": published.crop,
        }
    return StoredWeights.objects.update_or_create(path=str(path), defaults=fields)[0]


def weights_import(*, source: Path, network: str, tag: str = "", created_by=None) -> tuple[StoredWeights, str]:
    """Checks `source` and files a copy of it for `network`; returns the row and one line saying
    what it was filed as. A file the library does not publish is filed as local, unverified."""
    _check_known(network)
    if not source.is_file():
        raise WeightsError(f"{source.name}: no such file")
    tag = _UNSAFE_IN_NAME.sub("-", tag).strip("-")[:100]
    from workbench.weights.checks import check_network  # torch: imported only when a file is checked

    tensor_count = check_network(source, network)
    sha256 = file_sha256(source)
    published = next((item for item in published_for(network) if item.matches(sha256)), None)
    existing = StoredWeights.objects.filter(network=network, sha256=sha256).first()
    if existing is not None and existing.present:
        return existing, f"already filed as {existing.reference} ({existing.label})"
    # The ending says what the content is (the reader goes by content; people and tools by name).
    name = (
        published.file_name
        if published
        else store_file_name(network=network, tag=tag, sha256=sha256, suffix=suffix_of(source))
    )
    row = _file(
        path=_copy_into_store(source, name),
        network=network,
        sha256=sha256,
        published=published,
        tag=tag,
        tensor_count=tensor_count,
        created_by=created_by,
    )
    if published:
        return row, f"filed as {row.reference}: {row.label}, verified against the published sha256"
    return (
        row,
        f"filed as {row.reference}: local weights of {network}, unverified (not a file {network}'s library publishes)",
    )


def _hub_files(published: Published) -> list[Path]:
    """A timm repository's weights in the Hugging Face cache: snapshots/<revision>/model.safetensors
    (or pytorch_model.bin), each a link to blobs/<its sha256>."""
    snapshots = Path(settings.HF_HUB_CACHE) / published.file_name / "snapshots"
    names = ("model.safetensors", "pytorch_model.bin")
    return [path for folder in sorted(snapshots.glob("*")) for name in names if (path := folder / name).is_file()]


def _file_found(*, path: Path, root: Path, network: str, published: Published, verified: bool) -> str | None:
    """Files a published file found in a cache, once it is really there (`path`, links followed,
    under `root`) and holds `network`'s weights; returns the line saying why not, or None.
    The lines name the file as the library publishes it, never where a link points."""
    shown = f"{published.file_name}/{path.name}" if published.source == "timm" else published.file_name
    if not resolves_inside(path, root):
        return f"{shown}: a link to a file outside the cache; not filed"
    from workbench.weights.checks import check_network  # torch: imported only when a file is checked

    try:
        tensor_count = check_network(path, network)
    except WeightsError as error:  # it names the file by its name; a hub file by its repository's too
        return f"{shown.removesuffix(path.name)}{error}; not filed"
    _file(path=path, network=network, sha256=file_sha256(path), published=published, tag="",
          tensor_count=tensor_count, created_by=None, verified=verified)  # fmt: skip
    return None


def _discover_hub(network: str, published: Published, filed: set[str]) -> list[str]:
    """The hub's files are filed unverified: a blob named by its own sha256 proves only that
    whoever wrote it could hash it (a text file passed). `weights fetch` verifies against the
    sha256 the hub records for the file."""
    skipped = []
    for path in _hub_files(published):
        if str(path) in filed:
            continue
        # A snapshot's link must land in its own repository's blobs/.
        blobs = Path(settings.HF_HUB_CACHE) / published.file_name / "blobs"
        line = _file_found(path=path, root=blobs, network=network, published=published, verified=False)
        skipped += [line] if line else []
        filed.add(str(path))
    return skipped


def cache_folders() -> list[Path]:
    """Where published files are looked for: the store's folder, then torchvision's cache."""
    return [Path(settings.WEIGHTS_DIR), Path(settings.TORCH_HUB_CHECKPOINTS)]


def weights_discover() -> list[str]:
    """Files every published file found in the folders (by its published name, the hash checked,
    the file load-checked against its network); returns a line for each one skipped."""
    filed = set(StoredWeights.objects.values_list("path", flat=True))
    skipped = []
    for network in store_networks():
        for published in published_for(network):
            if published.source == "timm":
                skipped += _discover_hub(network, published, filed)
                continue
            for folder in cache_folders():
                path = folder / published.file_name
                if str(path) in filed or not path.is_file():
                    continue
                filed.add(str(path))
                if not resolves_inside(path, folder):
                    skipped.append(f"{published.file_name}: a link to a file outside the cache; not filed")
                elif not published.matches(file_sha256(path)):
                    skipped.append(f"{published.file_name}: not the published file (its sha256 differs); not filed")
                else:
                    line = _file_found(path=path, root=folder, network=network, published=published, verified=True)
                    skipped += [line] if line else []
    return skipped


def weights_fetch(*, network: str, tag: str = "", progress: bool = True) -> StoredWeights:
    """Downloads `network`'s published weights through the library's own API into its cache, then
    files them. For a machine that is online; never called on a worker."""
    _check_known(network)
    published = published_named(network, tag)
    if published is None:
        known = ", ".join(item.tag for item in published_for(network)) or "none"
        raise WeightsError(f"{network} has no published weights {tag or 'DEFAULT'!r} (published: {known})")
    try:
        recorded = _download(published, progress=progress)
    except OSError as error:  # URLError, a refused connection, a name that does not resolve
        reason = getattr(error, "reason", None) or error.strerror or str(error) or type(error).__name__
        where = (
            "HF_HUB_CACHE (the cache folder)" if published.source == "timm"
            else "WORKBENCH_WEIGHTS_DIR or $TORCH_HOME/hub/checkpoints"
        )  # fmt: skip
        raise WeightsError(
            f"no network access: cannot download {published.file_name} from {published.url} ({reason}); "
            f"on a machine that is online run `manage.py weights fetch {network}`; or copy {published.file_name} "
            f"into {where} (found by the next `manage.py weights list`), "
            f"or file a copy anywhere with `manage.py weights import FILE --network {network}`"
        ) from None
    if recorded is not None:
        _file_as_recorded(published, recorded)
    weights_discover()
    row = StoredWeights.objects.filter(network=network, tag=published.tag).first()
    if row is None:
        raise WeightsError(f"{published.file_name} was downloaded but is not the published file; not filed")
    return row


def _file_as_recorded(published: Published, recorded: str) -> None:
    """Files the hub's file whose sha256 is the one the hub records for it, as verified."""
    for path in _hub_files(published):
        if file_sha256(path) == recorded:
            blobs = Path(settings.HF_HUB_CACHE) / published.file_name / "blobs"
            line = _file_found(path=path, root=blobs, network=published.network, published=published, verified=True)
            if line:
                raise WeightsError(line)
            return
    raise WeightsError(f"{published.file_name}: the file in the cache is not the one the hub records; not filed")


def _download(published: Published, *, progress: bool) -> str | None:
    """Downloads through the library; returns the sha256 the hub records for a timm file (None
    for torchvision's, whose name carries its hash's start)."""
    if published.source == "torchvision":
        # torchvision only here: the store's pages and lists never load it otherwise.
        from torchvision.models import get_model_weights  # torchvision: loaded only where this runs

        weights = get_model_weights(published.network)[published.tag]
        # Into the cache folder the store reads, the hash checked by torch.hub against the name.
        weights.get_state_dict(progress=progress, model_dir=str(settings.TORCH_HUB_CHECKPOINTS), check_hash=True)
        return None
    # huggingface_hub only here (timm's dependency): into the cache the store reads, with its bar.
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url  # huggingface_hub: here only

    repository = published.url.removeprefix("https://huggingface.co/")
    try:
        hf_hub_download(repository, "model.safetensors", cache_dir=str(settings.HF_HUB_CACHE))
        # The hub's record of the file: an LFS file's etag is its sha256.
        return get_hf_file_metadata(hf_hub_url(repository, "model.safetensors")).etag.strip('"')
    except OSError:
        raise
    except Exception as error:  # the hub client's own connection errors are not OSErrors
        raise OSError(type(error).__name__) from None
