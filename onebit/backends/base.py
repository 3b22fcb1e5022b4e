"""The seam under the forward: `Y[r] = W @ X[r]` for a batch of rows, on some backend.

The forward hands every heavy product to a `Backend` by the weight's name. The backend
prepares each weight once (its device form: a kept array, a tensor on the GPU, a buffer on
the NPU) and keeps it; everything else in the forward stays on the host. Every backend
promises, and tests/backends proves per backend:

- batch invariance: row r's result is bit-identical whether it rides alone or with up to 15
  other rows, so a verify batch scores exactly what steps would;
- weights prepared once: `prepares` counts preparations, one per weight while `resident`.

`resident=False` prepares the weight again for every product (every token): the slow arm of
the weight-residency A/B, switched on with the weight store's ONEBIT_UNPACK_PER_TOKEN.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np

from onebit.backends.errors import BackendError


class Backend:
    """Base of the backends: the prepared-weight cache and its counters. A subclass says how
    a weight is prepared (`prepare`) and how rows meet a prepared weight (`product`)."""

    name = "backend"

    def __init__(self, *, resident: bool = True) -> None:
        self.resident = bool(resident)
        self.prepares = 0  # weights prepared (uploaded) so far
        self.products = 0  # product calls so far
        self._prepared: dict[str, object] = {}
        self._owner: weakref.ref | None = None

    def attach(self, owner: object) -> None:
        """Bind this backend to the one model it serves: prepared weights are kept by name, so
        a second model on the same backend would be handed the first one's weights."""
        current = self._owner() if self._owner is not None else None
        if current is not None and current is not owner:
            raise BackendError(
                f"this {self.name} backend already serves another model; make one per model"
            )
        self._owner = weakref.ref(owner)

    def linear(self, key: str, fetch: Callable[[str], np.ndarray], rows: np.ndarray, *,
               resident: bool | None = None) -> np.ndarray:
        """`[R, out]`: `rows` `[R, in]` times the weight `key` `[out, in]`, transposed. The
        weight is fetched and prepared on first use only (on every use when not resident;
        `resident` overrides the backend's setting for this one product)."""
        handle = self._handle(key, fetch, resident)
        rows = self._checked_rows(key, rows)
        self.products += 1
        return self.product(handle, rows)

    def linears(self, keys: tuple[str, ...], fetch: Callable[[str], np.ndarray],
                rows: np.ndarray) -> list[np.ndarray]:
        """`linear` of the same rows by each weight of `keys` (a layer's q / k / v, its gate and
        up), each result what `linear` gives; a backend may share the work the products have in
        common (`products`)."""
        handles = [self._handle(key, fetch, None) for key in keys]
        rows = self._checked_rows(keys[0], rows)
        self.products += len(keys)
        return self.products_of(handles, rows)

    def products_of(self, handles: list, rows: np.ndarray) -> list[np.ndarray]:
        """`product(handle, rows)` for each handle: one after another unless a backend shares
        their common work."""
        return [self.product(handle, rows) for handle in handles]

    def _handle(self, key: str, fetch: Callable[[str], np.ndarray], resident: bool | None):
        """The prepared weight `key`: kept from its first use (fetched and prepared again on
        every use when not resident)."""
        keep = self.resident if resident is None else resident
        handle = self._prepared.get(key) if keep else None
        if handle is None:
            weight = fetch(key)
            if not getattr(weight, "packed", False):  # a packed Q4NX weight goes as it is
                weight = np.asarray(weight)
                if weight.ndim != 2:
                    raise BackendError(
                        f"{self.name}: weight {key!r} has shape {weight.shape}, not 2-D"
                    )
                weight = np.ascontiguousarray(weight)
            handle = self.prepare(key, weight)
            self.prepares += 1
            if keep:
                self._prepared[key] = handle
        return handle

    def _checked_rows(self, key: str, rows: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(rows)
        if rows.ndim != 2 or rows.shape[0] < 1:
            raise BackendError(
                f"{self.name}: rows for {key!r} have shape {rows.shape}, not [R, in]"
            )
        return rows

    @property
    def prepared_weights(self) -> int:
        """How many weights are held in their device form now."""
        return len(self._prepared)

    def prepare(self, key: str, weight: np.ndarray) -> object:  # pragma: no cover - abstract
        raise NotImplementedError

    def product(self, handle: object, rows: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> str:
        return self.name
