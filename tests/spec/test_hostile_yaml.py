"""Hostile YAML (issue 21 item 3): alias bombs, huge files, special files and huge messages are refused
with a located SpecError before anything expands or waits on them."""

from __future__ import annotations

import os

import pytest

from dse.cli import main
from dse.errors import MAX_PROBLEM_CHARS, SpecError
from dse.spec.yamlio import MAX_BYTES, MAX_NODES, load_yaml, load_yaml_text


def _bomb(levels: int) -> str:
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_with_its_location():
    text = _bomb(9)  # 10^9 strings once expanded, ~1 kB of text
    assert len(text) < 1500
    with pytest.raises(SpecError, match=r"bomb.yaml:1:1: the document expands to more than .* aliases"):
        load_yaml_text(text, "bomb.yaml")


def test_modest_aliases_still_work():
    data = load_yaml_text(_bomb(3), "ok.yaml")  # 10^3 leaves: an ordinary use of anchors
    assert len(data["l2"]) == 10 and data["l2"][0][0][0] == "x"
    assert 10 ** 3 < MAX_NODES


def test_big_file_is_refused_before_reading(tmp_path):
    p = tmp_path / "big.yaml"
    with open(p, "wb") as f:
        f.truncate(MAX_BYTES + 1)
    with pytest.raises(SpecError, match="bytes; dse reads YAML files up to"):
        load_yaml(p)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_fifo_and_devices_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "study.yaml"
    os.mkfifo(fifo)  # opening a FIFO for reading would block forever: stat says what it is first
    with pytest.raises(SpecError, match="not a regular file"):
        load_yaml(fifo)
    if os.path.exists("/dev/zero"):
        with pytest.raises(SpecError, match="not a regular file"):
            load_yaml("/dev/zero")


def test_cli_exit_2_and_messages_are_cut(tmp_path, capsys):
    p = tmp_path / "bomb.yaml"
    p.write_text(_bomb(9))
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "bomb.yaml:1:1" in err
    long = SpecError("x" * (10 * MAX_PROBLEM_CHARS))
    assert len(str(long)) < MAX_PROBLEM_CHARS + 100 and "more characters" in str(long)


@pytest.mark.parametrize("cell", ["1e308", "1e-320"])
def test_calibration_csv_extreme_cells_are_refused(tmp_path, capsys, cell):
    """issue 21: one 1e308 cell hung `dse calibrate` (400 s and counting), 1e-320 crashed it (LinAlgError)."""
    p = tmp_path / "m.csv"
    p.write_text("chip,workload,measured_time_s,source\n"
                 f"rtx-pro-6000,qwen3-8b:decode:batch=1:context=8192,{cell},test\n")
    assert main(["calibrate", str(p), "--chip", "rtx-pro-6000"]) == 2
    err = capsys.readouterr().err
    # line 2, column 51: the cell starts after "rtx-pro-6000," (13 characters) and the 37-character workload and
    # its comma (issue 21 item 6: every problem at file:line:col)
    assert "m.csv:2:51 column 'measured_time_s'" in err and "between 1 ns and 1 day" in err
    assert "Traceback" not in err


def test_recursive_alias_is_refused():
    # an anchor used inside itself: a cyclic document (it used to make the size check grow without bound)
    with pytest.raises(SpecError, match=r"r.yaml:1:\d+: a recursive alias"):
        load_yaml_text("a: &x [1, *x]\n", "r.yaml")
