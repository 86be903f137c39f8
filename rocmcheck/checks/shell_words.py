"""A run of values (GPU ids, package names, paths) as the fields of one shell fix template.

`shell()` quotes every field; a fix that names as many values as the machine has (every slow GPU, every Triton
distribution installed) writes one field per value: `words("gpu", ["0", "1"])` gives the template text
`{gpu0} {gpu1}` and the values to pass, so no value is ever formatted into the template itself."""

from __future__ import annotations

from typing import Any, Iterable


def words(name: str, values: Iterable[Any], sep: str = " ") -> tuple[str, dict[str, Any]]:
    """("{name0} {name1}", {"name0": v0, "name1": v1}): the fields for shell(template, why, **values)."""
    found = {f"{name}{i}": value for i, value in enumerate(values)}
    return sep.join("{" + key + "}" for key in found), found
