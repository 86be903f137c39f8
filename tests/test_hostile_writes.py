"""Nothing a person owns is lost: writes are atomic, an existing file is replaced only with --force, a failed
write (a file-size limit standing in for a full disk) leaves the old file whole and still prints the report."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hostile import cli, fsize_limit, one_line

from rocmcheck.errors import BadInput
from rocmcheck.safe.files import check_target, write_atomic

QUICK_DOCTOR = ("doctor", "--no-gpu-probes", "--no-train", "--only", "host")


def test_write_atomic_refuses_to_clobber_and_keeps_the_mode_when_forced(tmp_path):
    path = tmp_path / "env.sh"
    write_atomic(path, "one\n")
    path.chmod(0o640)
    with pytest.raises(BadInput, match="add --force"):
        write_atomic(path, "two\n")
    assert path.read_text() == "one\n"
    write_atomic(path, "two\n", force=True)
    assert path.read_text() == "two\n" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["env.sh"]  # no temporary file left


def test_write_atomic_replaces_a_symlink_itself_never_its_target(tmp_path):
    real = tmp_path / "real.env"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "link.env"
    link.symlink_to(real)
    with pytest.raises(BadInput, match="is a symbolic link"):
        write_atomic(link, "new")
    write_atomic(link, "new", force=True)
    assert not link.is_symlink() and link.read_text() == "new" and real.read_text() == "old"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(link.stat().st_mode) == 0o666 & ~umask  # a new file's bits, not those of the link's target


@pytest.mark.parametrize("kind", ["dangling", "loop", "to a folder"])
def test_write_atomic_never_creates_a_file_where_a_link_points(tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    link = tmp_path / "out.json"
    link.symlink_to({"dangling": outside / "new.json", "loop": link, "to a folder": outside}[kind])
    with pytest.raises(BadInput, match="symbolic link") as info:
        write_atomic(link, "{}")
    assert "\n" not in str(info.value) and "--force" in str(info.value)
    assert check_target(link, force=True) == link  # --force: the link itself is what gets replaced
    write_atomic(link, "{}", force=True)
    assert not link.is_symlink() and link.read_text() == "{}" and os.listdir(outside) == []


def test_write_atomic_refuses_a_link_that_appears_after_the_check(tmp_path, monkeypatch):
    from rocmcheck.safe import files

    link, outside = tmp_path / "out.json", tmp_path / "planted.json"
    real_check = files.check_target

    def check_then_plant(path, **kw):
        target = real_check(path, **kw)
        link.symlink_to(outside)  # planted between the check and the write
        return target

    monkeypatch.setattr(files, "check_target", check_then_plant)
    with pytest.raises(BadInput, match="exists"):
        files.write_atomic(link, "{}")
    assert link.is_symlink() and not outside.exists() and sorted(os.listdir(tmp_path)) == ["out.json"]


def test_a_loop_above_the_target_is_one_line(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(BadInput, match="cannot write"):
        check_target(tmp_path / "loop" / "x.json", force=True)


def test_a_name_ending_in_a_slash_is_a_folder_not_a_file(tmp_path):
    with pytest.raises(BadInput, match="names a folder"):
        check_target(f"{tmp_path}/newdir/")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", [QUICK_DOCTOR + ("--out",), ("build-env", "--arch", "gfx942", "-o")])
def test_a_command_given_a_name_ending_in_a_slash_writes_nothing(tmp_path, command):
    """From the command line too: the option's type sees the slash before a Path drops it."""
    proc = cli(*command, "newdir/", cwd=tmp_path)
    assert "names a folder" in one_line(proc) and os.listdir(tmp_path) == []


@pytest.mark.parametrize("target, words", [("/dev/null", "character device"), ("dir", "directory"),
                                           ("missing/x", "is not a directory")])
def test_check_target_refuses_devices_folders_and_missing_parents(tmp_path, target, words):
    path = {"dir": tmp_path, "missing/x": tmp_path / "missing" / "x"}.get(target, target)
    with pytest.raises(BadInput, match=words):
        check_target(path, force=True)


def test_save_bundle_refuses_an_existing_file_before_the_run(tmp_path):
    bundle = tmp_path / "b.json"
    bundle.write_text("precious")
    line = one_line(cli(*QUICK_DOCTOR, "--save-bundle", str(bundle)))
    assert "not overwriting" in line and "--force" in line and bundle.read_text() == "precious"


def test_save_bundle_that_fails_to_write_keeps_the_old_file_and_prints_the_report(tmp_path):
    bundle = tmp_path / "b.json"
    bundle.write_text("precious")
    proc = cli(*QUICK_DOCTOR, "--save-bundle", str(bundle), "--force", preexec_fn=fsize_limit(2000))
    assert proc.returncode == 2 and "Verdict:" in proc.stdout, proc.stdout[-500:]
    assert "cannot write" in proc.stderr and "Traceback" not in proc.stderr
    assert bundle.read_text() == "precious" and sorted(os.listdir(tmp_path)) == ["b.json"]
    proc = cli(*QUICK_DOCTOR, "--save-bundle", str(bundle), "--force")
    assert proc.returncode in (0, 1) and json.loads(bundle.read_text())["rocmcheck_bundle"] == 1


def test_save_bundle_into_an_unwritable_place_fails_before_the_run(tmp_path):
    line = one_line(cli(*QUICK_DOCTOR, "--save-bundle", "/proc/b.json"))
    assert "cannot write" in line or "not writable" in line


def test_build_env_output_is_atomic_and_never_clobbers(tmp_path):
    out = tmp_path / "env.sh"
    out.write_text("mine")
    assert "not overwriting" in one_line(cli("build-env", "--arch", "gfx942", "-o", str(out)))
    proc = cli("build-env", "--arch", "gfx942", "-o", str(out), "--force", preexec_fn=fsize_limit(100))
    assert "cannot write" in one_line(proc) and out.read_text() == "mine" and os.listdir(tmp_path) == ["env.sh"]
    assert cli("build-env", "--arch", "gfx942", "-o", str(out), "--force").returncode == 0
    assert "PYTORCH_ROCM_ARCH" in out.read_text()


def test_recipes_write_under_a_size_limit_leaves_nothing_that_blocks_the_rerun(tmp_path):
    target = tmp_path / "cfg"
    proc = cli("recipes", "write", "llama2-7b-full-sft", str(target), preexec_fn=fsize_limit(200))
    assert "cannot write" in one_line(proc)
    assert [p for p in target.iterdir() if not p.name.startswith(".")] == []
    proc = cli("recipes", "write", "llama2-7b-full-sft", str(target))
    assert proc.returncode == 0, proc.stderr


def test_recipes_write_quotes_the_directory_in_yaml(tmp_path):
    import yaml

    target = tmp_path / "a #b: c"
    assert cli("recipes", "write", "llama2-7b-full-sft", str(target)).returncode == 0
    doc = yaml.safe_load((target / "llama2-7b-full-sft.yaml").read_text())
    assert doc["deepspeed"] == str((target / "zero2.json").resolve())


def test_smoke_train_refuses_a_non_empty_out_folder(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    line = one_line(cli("smoke-train", "--device", "cpu", "--out", str(out)))
    assert "not empty" in line and "--force" in line and (out / "notes.txt").read_text() == "keep"
    (tmp_path / "file").write_text("x")
    assert "not a directory" in one_line(cli("smoke-train", "--device", "cpu", "--out", str(tmp_path / "file")))


def test_a_checkpoint_is_published_without_touching_other_files(tmp_path):
    from rocmcheck.train.outputs import checkpoint_folder, publish_checkpoint

    out = tmp_path / "out"
    (out / "checkpoint").mkdir(parents=True)
    (out / "checkpoint" / "model-00001-of-00002.safetensors").write_text("old shard")
    (out / "notes.txt").write_text("keep")
    with checkpoint_folder(out) as save_dir:
        assert not save_dir.exists()  # save_pretrained gets a folder of its own: nothing of ours to delete
        save_dir.mkdir()
        (save_dir / "model.safetensors").write_text("new")
        publish_checkpoint(save_dir, out)
    assert sorted(os.listdir(out)) == ["checkpoint", "notes.txt"]
    assert os.listdir(out / "checkpoint") == ["model.safetensors"]  # no stale shard or index beside the new one


# --- every command that writes a file: a link at the output name is never written through -----------------

WRITERS = {
    "doctor --out": lambda out: (*QUICK_DOCTOR, "--out", str(out)),
    "build-env -o": lambda out: ("build-env", "--arch", "gfx942", "-o", str(out)),
    "recipes write": lambda out: ("recipes", "write", "zero2", str(out.parent)),
}


def _planted(tmp_path, command: str, kind: str) -> tuple[Path, Path]:
    """(the output name, a folder outside it that must stay empty) with a link planted at the output name."""
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / ("zero2.json" if command == "recipes write" else "out.json")
    out.symlink_to(out if kind == "loop" else outside / "new.json")
    return out, outside


@pytest.mark.parametrize("kind", ["dangling", "loop"])
@pytest.mark.parametrize("command", sorted(WRITERS))
def test_commands_refuse_a_link_at_the_output_name(tmp_path, command, kind):
    out, outside = _planted(tmp_path, command, kind)
    line = one_line(cli(*WRITERS[command](out)))
    assert "symbolic link" in line or "not overwriting" in line, line
    assert out.is_symlink() and os.listdir(outside) == []


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_commands_with_force_replace_the_link_not_its_target(tmp_path, command):
    out, outside = _planted(tmp_path, command, "dangling")
    target = tmp_path / "theirs.json"
    target.write_text("theirs")
    out.unlink()
    out.symlink_to(target)  # a link to somebody's file: --force replaces our name, never their file
    proc = cli(*WRITERS[command](out), "--force")
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not out.is_symlink() and out.stat().st_size > 0 and target.read_text() == "theirs"
    assert os.listdir(outside) == []


def test_recipes_write_into_a_dangling_folder_link_is_one_line(tmp_path):
    link = tmp_path / "cfg"
    link.symlink_to(tmp_path / "outside" / "cfg")
    line = one_line(cli("recipes", "write", "llama2-7b-full-sft", str(link)))
    assert "symbolic link" in line and not (tmp_path / "outside").exists()
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "cannot write" in one_line(cli("recipes", "write", "zero2", str(loop / "sub")))
