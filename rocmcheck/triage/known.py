"""The pasted facts as the checks see them: a group (or a probe's answer) holds only what the paste showed, and a
read of anything else raises NotKnown, whichever way a check reads it; every read of a pasted fact is written in
a Ledger, so a verdict can quote the pasted lines it rests on.

CheckContext's accessors already ask `Facts.known` before they read a group (rocmcheck/facts/known.py); this is
the same rule one level down, for what `known` cannot say: a probe's answer that is itself partial (collect_env
shows torch's version and build but not its arch list, so `torch["arch_list"]` is not known, not empty), and a
check that reads a group's dict directly.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from rocmcheck.facts.known import ALL, NotKnown, describe


class Ledger:
    """The facts read since the last clear(), as "group/key" ("probes/torch.arch_list", "packages/*")."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def clear(self) -> None:
        self.reads = []

    def note(self, path: str) -> None:
        if len(self.reads) < 10_000 and (not self.reads or self.reads[-1] != path):
            self.reads.append(path)


class PartDict(dict):
    """A dict of pasted facts. `known` None: every key was looked at (a missing key is absent). Else only `known`
    keys are known: a missing known key is absent (get gives None), a key outside it raises NotKnown(what(key)),
    and so does looking at all of it (iterating, its length)."""

    def __init__(self, data: dict[str, Any], path: str, ledger: Ledger, *, known: Any = None,
                 whole: str = "", what: Callable[[Any], str] = str, lenient: Any = ()) -> None:
        super().__init__(data)
        self.known_keys = None if known is None else frozenset(known) | frozenset(data)
        self.lenient = frozenset(lenient)
        self.path, self.ledger, self.whole, self.what = path, ledger, whole, what

    def _key(self, key: Any) -> None:
        if self.known_keys is not None and key not in self.known_keys and key not in self.lenient:
            raise NotKnown(self.what(key))
        self.ledger.note(f"{self.path}{key}")

    def _all(self) -> None:
        if self.known_keys is not None:
            raise NotKnown(self.whole)
        self.ledger.note(f"{self.path}*")

    def get(self, key: Any, default: Any = None) -> Any:
        self._key(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._key(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self._key(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[Any]:
        self._all()
        return super().__iter__()

    def __len__(self) -> int:
        self._all()
        return super().__len__()

    def __bool__(self) -> bool:
        """`if not torch:` asks whether there is anything: a dict holding pasted facts is not empty."""
        if super().__len__():
            return True
        self._all()
        return False

    def keys(self):  # type: ignore[no-untyped-def]
        self._all()
        return super().keys()

    def items(self):  # type: ignore[no-untyped-def]
        self._all()
        return super().items()

    def values(self):  # type: ignore[no-untyped-def]
        self._all()
        return super().values()


class NotKnownList(list):
    """A list group the paste says nothing about (torch's requirements): any look at it raises NotKnown."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def __iter__(self) -> Iterator[Any]:
        raise NotKnown(self.what)

    def __len__(self) -> int:
        raise NotKnown(self.what)

    def __contains__(self, item: Any) -> bool:
        raise NotKnown(self.what)

    def __getitem__(self, index: Any) -> Any:
        raise NotKnown(self.what)


def group_dict(data: dict[str, Any], group: str, state: Any, ledger: Ledger) -> PartDict:
    """A group of Facts as a PartDict: known whole ("all"), in part (a list of keys) or not at all (absent)."""
    known = None if state == ALL else (state if isinstance(state, list) else ())
    return PartDict(data, f"{group}/", ledger, known=known, whole=describe(group),
                    what=lambda key: describe(group, str(key)))


# Keys of a probe's answer that the checks' views read only to add to what they know, never as the ground of a
# verdict (torch's device list: a GPU's compute capability when nvidia-smi is too old to print it, the source of a
# GPU target): not pasted, they read as absent.
ENRICHMENT_KEYS = {"torch": ("devices",)}


def probe_dict(data: dict[str, Any], probe: str, known: Any, ledger: Ledger) -> PartDict:
    """A probe's answer of which only the keys the paste showed are known."""
    whole = describe("probes", probe)
    return PartDict(data, f"probes/{probe}.", ledger, known=known, whole=whole,
                    what=lambda key: f"{whole}: {key}", lenient=ENRICHMENT_KEYS.get(probe, ()))


def inner_dict(data: dict[str, Any], path: str, known: Any, ledger: Ledger, words: str) -> PartDict:
    """A dict inside a fact (DeepSpeed's op table, a device node's record) of which only `known` is known."""
    return PartDict(data, f"{path}.", ledger, known=known, whole=words, what=lambda key: f"{words}: {key}")


def not_known_list(group: str) -> NotKnownList:
    return NotKnownList(describe(group))

