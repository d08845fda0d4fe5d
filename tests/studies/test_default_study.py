"""The README's default study, end to end, with a reduced budget, and its stated conclusion.

Conclusion (studies/qwen3-8b-decode-chip.yaml): decode at small batch is
bandwidth-bound, so the fastest feasible designs are memory-bound and use the
most HBM stacks the die's shoreline allows (6 on a reticle-class die:
3 per 33 mm edge, technology.md).
"""

from pathlib import Path

import numpy as np
import pytest

from dse.cli import main
from dse.spec.study import load_study
from dse.study import run_study

STUDIES = Path(__file__).resolve().parents[2] / "studies"
DEFAULT = STUDIES / "qwen3-8b-decode-chip.yaml"


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("default")
    table = run_study(DEFAULT, trials=600, out=out)
    return out, table


def test_default_study_writes_every_file(default_run):
    out, table = default_run
    for name in ("trials.parquet", "trials.csv", "pareto.csv", "report.md", "report.html", "study.journal"):
        assert (out / name).exists(), name
    assert list((out / "plots").glob("*.png"))
    assert len(table) == 600


def test_fastest_designs_are_bandwidth_bound_with_max_stacks(default_run):
    _, table = default_run
    feas = table[table.feasible]
    assert len(feas) > 50
    fastest = feas.nsmallest(10, "obj.tpot")
    assert (fastest["m.bound"] == "memory").all()
    # the most stacks the shoreline allows on these dies
    assert (fastest["p.hbm.stacks"] == fastest["m.hbm_shoreline_stacks"]).all()
    assert fastest["p.hbm.stacks"].max() == 6


def test_constraints_hold_on_the_front(default_run):
    _, table = default_run
    front = table[table.pareto_rank == 0]
    assert len(front) > 0
    assert (front["m.die_area_mm2"] <= 858 + 1e-9).all()  # reticle, technology.md
    assert (front["p.hbm.stacks"] <= front["m.hbm_shoreline_stacks"]).all()
    assert (front["m.resident_bytes"] <= front["m.capacity_bytes"]).all()


def test_optuna_dashboard_sees_dse_front_names_and_units(default_run):
    """What optuna-dashboard reads, through plain Optuna (issue 19 item 1): the objectives' names, the same
    front as pareto.csv (dse's constraints where Optuna keeps them), and each trial's parameters with units
    (Optuna's own params are raw SI: a 1.4e9 clock)."""
    import optuna
    import pandas as pd
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    out, table = default_run
    storage = JournalStorage(JournalFileBackend(str(out / "study.journal")))
    study = optuna.load_study(study_name="qwen3-8b-decode-chip", storage=storage)
    assert study.metric_names == ["obj.tpot", "obj.energy_per_token", "obj.die_area"]
    best = {t.number: t.values for t in study.best_trials}
    front = pd.read_csv(out / "pareto.csv")
    assert len(front) > 0 and set(front["trial"]) <= set(best)
    # Optuna compares exactly; dse ties values equal to 40 bits (dse.pareto.TIE_BITS): a best trial of Optuna's
    # beyond dse's front is as good as a front design in every objective to 2^-40, relative
    values = front[[f"obj.{n}" for n in ("tpot", "energy_per_token", "die_area")]].to_numpy()
    for number in set(best) - set(front["trial"]):
        v = np.asarray(best[number])
        assert (values <= v * (1 + 2.0**-39)).all(axis=1).any(), (number, v)
    t = study.trials[0]
    text = t.user_attrs["dse:params"]
    assert text.startswith(f"units = {t.params['units']}, clock = ") and " GHz" in text, text
    assert ("KiB" in text or "MiB" in text) and " MB" in text, text  # local buffer binary, L2 (continuous) SI


def test_resume_reaches_budget_exactly(tmp_path):
    out = tmp_path / "r"
    run_study(DEFAULT, trials=200, out=out, write=False)
    table = run_study(DEFAULT, trials=300, out=out, write=False)
    assert len(table) == 300  # 200 loaded from the journal + 100 new


def test_second_run_on_same_folder_refused(tmp_path):
    from dse.errors import SpecError
    from dse.study import OutputLock

    with OutputLock(tmp_path):
        with pytest.raises(SpecError, match="another `dse run` is using this output folder"):
            run_study(DEFAULT, trials=10, out=tmp_path, write=False)


BROKEN = [
    ("typo in top key", "objectivs: [latency_per_token]\n", "did you mean 'objectives'"),
    ("unknown objective", None, "did you mean"),
    ("empty space", None, "no design space"),
    ("bad space unit", None, "frequency"),
]


def _study(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


BASE = """\
name: t
workloads: [{model: qwen3-8b, phase: decode, batch: 1, context: 1024}]
base: h100-sxm
space:
  hbm.stacks: {int: [1, 6]}
constraints: [reticle]
objectives: [latency_per_token, die_area]
solver: {method: nsga2, trials: 20, batch: 10}
"""


def test_broken_study_files_exit_2(tmp_path, capsys):
    cases = [
        (BASE + "objectivs: [x]\n", "did you mean 'objectives'"),
        (BASE.replace("latency_per_token", "latency_per_tokn"), "did you mean 'tpot'"),  # (the deprecated name's heir)
        (BASE.replace("hbm.stacks: {int: [1, 6]}", "clock: {float: [1 GB, 2 GHz]}"), "frequency"),
        (BASE.replace("hbm.stacks", "hbm.stakcs"), "did you mean 'hbm.stacks'"),
        (BASE.replace("trials: 20", "trials: -3"), "solver.trials"),
    ]
    for text, words in cases:
        p = _study(tmp_path, text)
        code = main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"])
        err = capsys.readouterr().err
        assert code == 2, (text, err)
        assert words in err and f"{p}:" in err, (words, err)
        assert "Traceback" not in err
        assert not (tmp_path / "o" / "trials.csv").exists()  # a spec error writes nothing


def test_a_workload_in_short_form_is_its_mapping(tmp_path, capsys):
    """`dse eval` and what-if files take `qwen3-8b:decode:batch=1:context=1024`; a study refused it ("expected a
    workload mapping"). It is the mapping now, and a mistake in it is located at its line."""
    base = BASE.replace("latency_per_token", "tpot")
    short = _study(tmp_path, base.replace("[{model: qwen3-8b, phase: decode, batch: 1, context: 1024}]",
                                          '["qwen3-8b:decode:batch=1:context=1024:weights=fp8_e4m3"]'))
    long = tmp_path / "long.yaml"
    long.write_text(base.replace("context: 1024}", "context: 1024, formats: {weights: fp8_e4m3}}"))
    assert load_study(short).workloads == load_study(long).workloads
    bad = _study(tmp_path, base.replace("[{model: qwen3-8b, phase: decode, batch: 1, context: 1024}]",
                                        '["qwen3-8b:decode:batch=1:contxt=1024"]'))
    assert main(["validate", str(bad)]) == 2
    assert f"{bad}:2:" in capsys.readouterr().err


def test_the_front_says_how_many_designs_tie_on_every_objective(tmp_path, capsys):
    """A parameter no objective sees (the published die area a chip file carries for reference) doubles every
    design: the four designs of the grid are two objective points, each twice."""
    p = _study(tmp_path, BASE.replace("  hbm.stacks: {int: [1, 6]}", "  hbm.stacks: {int: [4, 5]}\n"
                                      "  reference.die_area: {choice: [100 mm^2, 200 mm^2]}")
               .replace("constraints: [reticle]\n", "").replace("objectives: [latency_per_token, die_area]",
                                                                  "objectives: [tpot, chip_cost]")
               .replace("{method: nsga2, trials: 20, batch: 10}", "{method: grid}"))
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert "4 on the Pareto front (2 distinct in the objectives" in capsys.readouterr().out
    assert "The front holds 4 designs (2 distinct in the objectives" in (tmp_path / "o" / "report.md").read_text()


def test_the_folder_of_a_study_of_scenarios_names_its_scenarios(tmp_path, capsys):
    """`dse pareto` / `dse report` on a study of scenarios' output said only "not a dse results folder:
    meta.json is missing"; it holds one results folder per scenario, and the message names them."""
    p = _study(tmp_path, """\
name: sc
scenarios:
  - {name: chat, workloads: ["qwen3-8b:decode:batch=8:context=4096"], weight: 3}
  - {name: rag, workloads: ["qwen3-8b:prefill:tokens=2048"], weight: 1}
base: h100-sxm
space:
  hbm.stacks: {int: [4, 5]}
objectives: [tpot, chip_cost]
solver: {method: grid}
""")
    out = tmp_path / "o"
    assert main(["run", str(p), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    for cmd in ("pareto", "report"):
        assert main([cmd, str(out)]) == 2
        err = capsys.readouterr().err
        assert "holds a study's scenarios" in err and "chat, rag" in err and str(out / "chat") in err, err
    assert main(["pareto", str(out / "chat")]) == 0


def test_empty_space_exit_2(tmp_path, capsys):
    p = _study(tmp_path, BASE.replace("space:\n  hbm.stacks: {int: [1, 6]}\n", ""))
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "no design space" in capsys.readouterr().err


def test_no_feasible_point_names_the_constraint(tmp_path, capsys):
    p = _study(tmp_path, BASE.replace("constraints: [reticle]", "constraints: {reticle: {max: 10 mm^2}}"))
    code = main(["run", str(p), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "reticle" in err and "no feasible" in err
