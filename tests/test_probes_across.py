"""The cross-node stage's fixes (rocmcheck/probes/across.py): what cannot be one command is a note, never a line with
a placeholder that opens a quote when pasted; the network debug run is one real line naming the slow nodes in its
comment. The processes themselves are tested in tests/test_compare_launch.py."""

from rocmcheck.facts.launch import Launch
from rocmcheck.fixes import FixKind
from rocmcheck.probes.across import CHECK_ID, judge_cross_node, run_cross_node_stage


def _op(busbw: float, ok: bool = True) -> dict:
    return {"ok": ok, "bytes": 67108864, "ms": 1.0, "algbw_gbps": busbw / 1.5, "busbw_gbps": busbw}


def test_a_launch_that_does_not_add_up_gets_a_note_not_a_placeholder():
    launch = Launch("openmpi", "n1", node_rank=1, nnodes=2, problems=("NODE_RANK and NNODES disagree",))
    [r] = run_cross_node_stage(launch)
    assert r.id == CHECK_ID and r.status.value == "fail" and "disagree" in r.summary
    assert r.fix.kind is FixKind.NOTE and "NODE_RANK" in r.fix.text and "NNODES" in r.fix.text
    assert "<" not in r.fix.text


def test_no_master_address_is_a_note():
    [r] = run_cross_node_stage(Launch("slurm", "n0", node_rank=0, nnodes=2, master_addr=None))
    assert r.status.value == "fail" and r.fix.kind is FixKind.NOTE and "MASTER_ADDR" in r.fix.text


def test_a_slow_node_is_named_in_the_comment_of_one_real_line():
    good = _op(300.0)
    data = {"world": 24, "backend": "nccl", "hosts": ["a", "b", "c;rm -rf ~"], "procs": [8, 8, 8],
            "all_reduce": _op(35.0), "all_gather": _op(35.0),
            "nodes": {str(i): {"local": {"all_reduce": good}} for i in range(3)},
            "pairs": {"0-1": {"all_reduce": _op(45.0)}, "1-2": {"all_reduce": _op(11.0)},
                      "2-0": {"all_reduce": _op(10.5)}}}
    r = judge_cross_node(data, 0)
    assert r.status.value == "warn" and r.data["slow_nodes"] == ["c;rm -rf ~"]
    assert r.fix.kind is FixKind.SHELL
    assert r.fix.text == ("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET rocmcheck doctor --across-nodes "
                          "--bundle-dir rocmcheck-bundles")
    assert "c;rm -rf ~" in r.fix.why and r.fix.line().index("#") < r.fix.line().index("c;rm")  # only ever a comment
    data["pairs"]["0-1"]["all_reduce"]["ok"] = False
    wrong = judge_cross_node(data, 0)
    assert wrong.status.value == "fail" and "every node" in wrong.fix.why
