"""The recorded threads most like a paste (rocmcheck/triage/similar.py): the shipped index is what the recorded
threads give, a thread is found again by its own paste and by a paste that only shares its words, never for a paste
of another platform, and its answer reaches the console, the reply and the JSON document as that thread's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from rocmcheck.package_data import read_json
from rocmcheck.triage import triage
from rocmcheck.triage.platform import PLATFORMS, foreign
from rocmcheck.triage.similar import MIN_SIMILARITY, SHOWN, Index, build, cause_families, index, terms

ROOT = Path(__file__).resolve().parent.parent
TUNE = ROOT / "tests" / "fixtures" / "triage_threads" / "tune"


def _record(name: str) -> dict:
    return json.loads((TUNE / name).read_text(encoding="utf-8"))


def test_the_shipped_index_is_what_the_recorded_threads_give():
    spec = importlib.util.spec_from_file_location("make_thread_index", ROOT / "scripts" / "make_thread_index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, "run python scripts/make_thread_index.py"
    data = read_json("rocmcheck.knowledge", "threads.json")
    assert len(data["threads"]) == len(list(TUNE.glob("*.json")))
    assert all(t["url"].startswith("https://github.com/") for t in data["threads"])


def test_terms_fold_versions_and_hex_and_split_names():
    got = terms("OSError: libcudart.so.12: cannot open shared object file at 0x7f3a")
    assert got["libcudart.so.0"] == 1 and got["libcudart"] == 1 and got["so"] == 1
    assert got["hex"] == 1 and got["cannot open"] == 1
    assert terms("libcudart.so.11.0") .keys() & terms("libcudart.so.12.1").keys() >= {"libcudart.so.0.0"}
    assert terms("") == {} and terms("\x00" * 10) == {}


def test_a_thread_is_found_by_its_own_paste_and_not_when_left_out():
    rec = _record("Dao-AILab-flash-attention-205.json")
    found = index().nearest(rec["paste"], None)
    assert found and found[0].thread.url == rec["url"] and found[0].similarity > 0.9
    without = Index.from_data(read_json("rocmcheck.knowledge", "threads.json"), [rec["url"]])
    assert rec["url"] not in {s.thread.url for s in without.nearest(rec["paste"], None)}


def test_an_index_without_threads_weighs_as_one_made_without_them():
    data = read_json("rocmcheck.knowledge", "threads.json")
    full = Index.from_data(data)
    for left in (data["threads"][3]["url"], data["threads"][400]["url"]):
        keep = [i for i, t in enumerate(data["threads"]) if t["url"] != left]
        renumber = {old: new for new, old in enumerate(keep)}
        made = Index.from_data({"threads": [data["threads"][i] for i in keep],
                                "terms": {t: kept for t, p in data["terms"].items()
                                          if (kept := [[renumber[d], n] for d, n in p if d in renumber])}})
        view = full.without([left])
        assert view.idf.keys() == made.idf.keys()
        assert all(abs(view.idf[t] - w) < 1e-9 for t, w in made.idf.items())
        assert all(abs(view.norms[old] - made.norms[new]) < 1e-9 for old, new in renumber.items())
        # The families' norms of a view keep the parent's weights: within a fraction of a percent of a rebuilt one.
        assert view.family_norms().keys() == made.family_norms().keys()
        assert all(abs(view.family_norms()[f] - x) <= 5e-3 * x for f, x in made.family_norms().items())
        paste = _record("Dao-AILab-flash-attention-205.json")["paste"]
        assert [(s.thread.url, round(s.similarity, 9)) for s in view.nearest(paste, None)] == \
            [(s.thread.url, round(s.similarity, 9)) for s in made.nearest(paste, None)]


def _thread(url: str, family: str, paste: str) -> dict:
    return {"url": url, "title": url, "platform": "unknown", "cause_family": family, "accepted_cause": "its cause",
            "accepted_fix": "its fix", "paste": paste}


def test_after_the_nearest_thread_a_family_read_together_outranks_one_closer_thread():
    # Family A's two threads each share half the paste; B's one thread shares more than either, but not the half
    # the other A thread holds. C's thread is the paste itself, Z's shares nothing.
    paste = "alpha beta gamma delta epsilon"
    made = Index.from_data(build([
        _thread("https://t/c", "C", paste), _thread("https://t/a1", "A", "alpha beta xa1 xa2 xa3"),
        _thread("https://t/a2", "A", "gamma delta ya1 ya2 ya3"),
        _thread("https://t/b", "B", "alpha beta gamma qb1 qb2 qb3 qb4 qb5 qb6"),
        _thread("https://t/z", "Z", "unrelated words only here")], "test"))
    found = made.nearest(paste, None)
    assert [s.thread.family for s in found] == ["C", "A", "B"]
    assert found[2].similarity > found[1].similarity  # B's thread alone is the closer one
    # A family the causes shown already name is never shown again: the next family takes its place.
    assert [s.thread.family for s in made.nearest(paste, None, {"C"})] == ["A", "B"]
    assert [s.thread.family for s in made.nearest(paste, None, {"A"})] == ["C", "B"]


def test_triage_shows_no_thread_of_a_family_its_causes_name():
    rec = _record("Dao-AILab-flash-attention-205.json")
    t = triage([("stdin", rec["paste"])])
    named = {cause_families().get(f.id) for f in t.findings[:SHOWN]} - {None}
    assert named, "the paste names a cause of a known family"
    assert not named & {s.thread.family for s in t.similar}
    assert named & {s.thread.family for s in index().nearest(rec["paste"], t.scene.platform.name)}


def test_one_thread_per_family_at_most_three_each_above_the_floor():
    for name in sorted(p.name for p in TUNE.glob("*.json"))[::25]:
        found = index().nearest(_record(name)["paste"], None)
        assert len(found) <= SHOWN
        assert len({s.thread.family for s in found}) == len(found)
        assert all(s.similarity >= MIN_SIMILARITY and s.shared for s in found)


def test_no_thread_of_another_platform_and_no_fix_for_one():
    data = read_json("rocmcheck.knowledge", "threads.json")
    for platform in PLATFORMS:
        for rec in list(TUNE.glob("*.json"))[::7]:
            for s in index().nearest(_record(rec.name)["paste"], platform):
                assert s.thread.platform in ("unknown", platform)
                assert not foreign(s.thread.fix, platform)
    # Where the paste does not show its platform, only a fix that holds on every platform is offered.
    for rec in list(TUNE.glob("*.json"))[::7]:
        for s in index().nearest(_record(rec.name)["paste"], None):
            assert not any(foreign(s.thread.fix, p) for p in PLATFORMS)
    assert any(foreign(t["fix"], "cuda-linux") for t in data["threads"])  # the filter has something to keep out


def test_the_answer_is_the_threads_own_in_every_output():
    paste = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
             "    import bitsandbytes\nOSError: libcudart.so.11.0: cannot open shared object file: "
             "No such file or directory\n")
    t = triage([("stdin", paste)])
    assert t.similar and all(s.thread.cause and s.thread.fix for s in t.similar)
    from rocmcheck.triage.answer import SIMILAR_HEAD, markdown, text_lines

    console = "\n".join(text_lines(t))
    assert SIMILAR_HEAD in console and t.similar[0].thread.url in console and "cause there:" in console
    assert t.similar[0].thread.url in markdown(t)
    out = subprocess.run([sys.executable, "-m", "rocmcheck", "triage", "--json", "-"], input=paste,
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    assert [s["url"] for s in doc["similar"]] == [s.thread.url for s in t.similar]
    assert all(0 < s["similarity"] <= 1 and s["shared"] for s in doc["similar"])


def test_a_paste_that_shares_no_term_names_no_thread():
    assert index().nearest("zzqv xqjw", "cuda-linux") == []
    assert triage([("stdin", "zzqv xqjw\n")]).similar == []
