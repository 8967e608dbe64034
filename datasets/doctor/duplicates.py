"""Exact and near duplicates among images (docs/design.md, "The data doctor", part 1).

Each image gets an exact digest of its pixels, imagehash's 64-bit pHash of its grey picture and
of its mirror image, and a small grey thumbnail. Equal digests are exact copies. A pair whose
pHash distance (to the other picture or to its mirror) is at most NEAR_BITS is a candidate; the
thumbnails' correlation, in the better orientation, confirms it. pHash alone cannot tell a copy
from a look-alike (two handwritten 1s are a few bits apart), which is what the second look is for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import imagehash
import numpy as np
from PIL import Image, ImageOps

NEAR_BITS = 20  # of pHash's 64: the widest distance still looked at twice
# Of the two thumbnails, for a candidate to count as a copy. Both thresholds were chosen on
# bench/bench_duplicates.py's seed 0 and checked on another seed (docs/benchmarks.md).
MIN_CORRELATION = 0.75
THUMB = 16
BLOCK = 512  # rows of the distance matrix at a time: 512 x n words, a few tens of MB for n = 10,000


@dataclass(frozen=True)
class Fingerprints:
    digests: list[bytes]
    phash: np.ndarray  # uint64 (n,)
    mirrored: np.ndarray  # uint64 (n,): of the mirror image
    thumbs: np.ndarray  # float32 (n, THUMB * THUMB), zero mean and unit length (zeros for a flat image)
    mirrored_thumbs: np.ndarray

    def __len__(self) -> int:
        return len(self.digests)


@dataclass(frozen=True)
class Pair:
    first: int
    second: int  # first < second
    kind: str  # "exact" or "near"
    bits: int  # pHash distance, in the closer orientation
    correlation: float  # of the thumbnails, in the better orientation (1.0 for exact copies)


def _word(hashed: imagehash.ImageHash) -> int:
    return int.from_bytes(np.packbits(hashed.hash.ravel()).tobytes(), "big")


def _unit(picture: Image.Image) -> np.ndarray:
    thumb = np.asarray(picture.resize((THUMB, THUMB), Image.Resampling.BOX), dtype=np.float32).ravel()
    thumb = thumb - thumb.mean()
    norm = float(np.linalg.norm(thumb))
    return thumb / norm if norm > 1e-6 else np.zeros_like(thumb)


def fingerprint(images: Iterable[np.ndarray]) -> Fingerprints:
    """`images`: HxW or HxWxC uint8 arrays, as the dataset stores them."""
    digests, words, mirrored_words, thumbs, mirrored_thumbs = [], [], [], [], []
    for array in images:
        array = np.ascontiguousarray(array)
        digests.append(hashlib.blake2b(array.tobytes() + repr(array.shape).encode(), digest_size=16).digest())
        picture = Image.fromarray(array if array.ndim == 2 or array.shape[2] > 1 else array[:, :, 0])
        grey = picture.convert("L")
        mirror = ImageOps.mirror(grey)
        words.append(_word(imagehash.phash(grey)))
        mirrored_words.append(_word(imagehash.phash(mirror)))
        thumbs.append(_unit(grey))
        mirrored_thumbs.append(_unit(mirror))
    size = THUMB * THUMB
    return Fingerprints(
        digests=digests,
        phash=np.array(words, dtype=np.uint64),
        mirrored=np.array(mirrored_words, dtype=np.uint64),
        thumbs=np.array(thumbs, dtype=np.float32).reshape(-1, size),
        mirrored_thumbs=np.array(mirrored_thumbs, dtype=np.float32).reshape(-1, size),
    )


def find_pairs(
    prints: Fingerprints, *, near_bits: int = NEAR_BITS, min_correlation: float = MIN_CORRELATION
) -> list[Pair]:
    """Every pair of copies, exact ones first, then near ones by distance."""
    pairs: list[Pair] = []
    by_digest: dict[bytes, list[int]] = {}
    for index, digest in enumerate(prints.digests):
        by_digest.setdefault(digest, []).append(index)
    exact = set()
    for group in by_digest.values():
        for position, first in enumerate(group):
            for second in group[position + 1 :]:
                pairs.append(Pair(first, second, "exact", 0, 1.0))
                exact.add((first, second))
    near = []
    count = len(prints)
    for start in range(0, count, BLOCK):
        rows = prints.phash[start : start + BLOCK, None]
        distance = np.minimum(
            np.bitwise_count(rows ^ prints.phash[None, :]), np.bitwise_count(rows ^ prints.mirrored[None, :])
        )
        rows_at, seconds = np.nonzero(distance <= near_bits)
        firsts = rows_at + start
        later = seconds > firsts
        rows_at, firsts, seconds = rows_at[later], firsts[later], seconds[later]
        correlation = np.maximum(
            np.einsum("ij,ij->i", prints.thumbs[firsts], prints.thumbs[seconds]),
            np.einsum("ij,ij->i", prints.thumbs[firsts], prints.mirrored_thumbs[seconds]),
        )
        kept = correlation >= min_correlation
        for at, first, second, value in zip(rows_at[kept].tolist(), firsts[kept].tolist(), seconds[kept].tolist(),
                                            correlation[kept].tolist(), strict=True):  # fmt: skip
            if (first, second) not in exact:
                near.append(Pair(first, second, "near", int(distance[at, second]), round(value, 4)))
    near.sort(key=lambda pair: (pair.bits, -pair.correlation, pair.first, pair.second))
    return pairs + near
