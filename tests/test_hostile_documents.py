"""Hostile input documents (issue 27): a `topology` field naming another file is never echoed,
and inputs that ask for huge work are refused in one line before it starts."""

import os
from pathlib import Path

import pytest

from topofinder.cli.main import main

HOSTILE = Path(__file__).parent / "data" / "hostile"


def _one_line_exit_2(argv, capsys) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return out + err


def _secrets() -> list[str]:
    """Strings of the files the hostile documents name, which must never be printed."""
    lines = [x for x in Path("/etc/passwd").read_text().splitlines() if x] \
        if Path("/etc/passwd").exists() else []
    env = [f"{k}={v}" for k, v in os.environ.items() if len(v) > 3]
    return lines[:5] + env[:20]


@pytest.mark.parametrize("argv", [
    ["check", str(HOSTILE / "plan_c6.csv"), str(HOSTILE / "schedule_passwd.json")],
    ["check", str(HOSTILE / "plan_c6.csv"), str(HOSTILE / "schedule_environ.json")],
    ["check", str(HOSTILE / "plan_c6.csv"), str(HOSTILE / "schedule_passwd.xml")],
    ["run", str(HOSTILE / "schedule_passwd.json")],
    ["run", str(HOSTILE / "schedule_environ.json")],
    ["export", str(HOSTILE / "search_passwd.json"), "--pick", "0"]])
def test_a_topology_field_naming_another_file_is_never_echoed(argv, capsys):
    text = _one_line_exit_2(argv, capsys)
    assert "not a readable topology file" in text
    for secret in _secrets():
        assert secret not in text
