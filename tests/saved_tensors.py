"""What autograd saves in one forward: the bytes of the distinct storages it keeps for backward, parameters
excluded. The planner's activation terms are tested against this count on real transformers / peft models."""

from __future__ import annotations


def saved_bytes(torch, model, ids, autocast: bool) -> int:
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            model(input_ids=ids, labels=ids)
    return sum(seen.values())
