"""`pacplan report` prints only what it checked: certificates verified, matrices hash-checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pacbayes.schema import certificate_content_sha256
from pacplan.pipeline.pipeline import run
from pacplan.report.document import write_report

CONFIG = {**SMALL_TOY_RUN, "name": "toy-report", "baselines": [{"name": "zeros"}]}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run") / "toy"
    run(parse_config(json.loads(json.dumps(CONFIG))), folder, progress=False)
    write_report(folder)
    return folder


@pytest.fixture
def rundir(finished_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished_run, tmp_path / "toy"))


def _edit_certificate(path: Path, rehash: bool, **changes: object) -> None:
    data = {**json.loads(path.read_text()), **changes}
    if rehash:
        data.pop("content_sha256")
        data["content_sha256"] = certificate_content_sha256(data)
    path.write_text(json.dumps(data, indent=2))


def _report_fails(rundir: Path, *words: str) -> None:
    before = (rundir / "report.md").read_text()
    with pytest.raises(PacplanError) as info:
        write_report(rundir)
    assert "\n" not in str(info.value)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert (rundir / "report.md").read_text() == before  # nothing unchecked was printed


def test_report_of_an_untouched_run(rundir: Path):
    text = write_report(rundir).read_text()
    assert "| 30 |" in text and "| 60 |" in text and "baseline: zeros" in text


@pytest.mark.parametrize("rehash", [False, True])
def test_report_refuses_an_edited_certificate(rundir: Path, rehash: bool):
    _edit_certificate(rundir / "certificates" / "N60.json", rehash, certified=0.0123)
    _report_fails(rundir, "N60.json", "certified")


def test_report_refuses_a_certificate_under_the_wrong_name(rundir: Path):
    shutil.copy(rundir / "certificates" / "N60.json", rundir / "certificates" / "N30.json")
    _report_fails(rundir, "N30.json", "60")


def test_report_refuses_a_changed_baseline(rundir: Path):
    path = rundir / "costs" / "baseline-zeros.npy"
    costs = np.load(path)
    costs[:] = 0.0
    np.save(path, costs)
    _report_fails(rundir, "baseline-zeros.npy", "changed")


def test_report_refuses_an_unrecorded_baseline(rundir: Path):
    manifest = json.loads((rundir / "manifest.json").read_text())
    del manifest["costs/baseline-zeros.npy"]
    (rundir / "manifest.json").write_text(json.dumps(manifest))
    _report_fails(rundir, "baseline-zeros.npy", "manifest.json")


def test_report_refuses_a_changed_test_matrix(rundir: Path):
    path = rundir / "costs" / "test.npy"
    costs = np.load(path)
    costs[0, 0] = 1.0 - costs[0, 0]
    np.save(path, costs)
    _report_fails(rundir, "test")


# ----------------------------------------------------------------- a report to share
def _md_html(rundir: Path) -> tuple[str, str]:
    md = write_report(rundir).read_text()
    return md, (rundir / "report.html").read_text()


def test_html_is_self_contained_and_holds_the_same_numbers(rundir: Path):
    import base64
    import re

    md, page = _md_html(rundir)
    assert "http://" not in page and "https://" not in page
    assert 'src="figures/' not in page and "href=" not in page
    sources = re.findall(r'<img [^>]*src="([^"]*)"', page)
    assert len(sources) == md.count("![") >= 4
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    first = re.search(r"!\[[^\]]*\]\(([^)]+)\)", md).group(1)
    assert base64.b64decode(sources[0].split(",", 1)[1]) == (rundir / first).read_bytes()
    numbers = re.findall(r"\d+\.\d+ %|\d+\.\d+ pts|\d\.\d{3}", md)
    assert numbers and all(n in page for n in numbers)
    table_rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert page.count("<tr>") == len(table_rows)  # every table row (headers included)


def test_markdown_to_html_constructs(tmp_path: Path):
    from pacplan.report.html import markdown_to_html

    (tmp_path / "f.png").write_bytes(b"\x89PNG fake")
    text = ("# T <1>\n\npara *em* and **b** `x<y`\ncontinued\n\n| a | b |\n|---|---:|\n"
            "| 1 | 2 % |\n\n- item `c`\n\n```\n<raw> & **not bold**\n```\n\n![cap](f.png)\n")
    page = markdown_to_html(text, tmp_path, "t")
    assert "<h1>T &lt;1&gt;</h1>" in page
    assert "<p>para <em>em</em> and <strong>b</strong> <code>x&lt;y</code>\ncontinued</p>" in page
    assert '<td style="text-align:right">2 %</td>' in page and "<th" in page
    assert "<li>item <code>c</code></li>" in page
    assert "<pre><code>&lt;raw&gt; &amp; **not bold**\n</code></pre>" in page
    assert ('<figure><img alt="cap" src="data:image/png;base64,iVBORyBmYWtl">'
            "<figcaption>cap</figcaption></figure>") in page and "<p><figure>" not in page
    # CommonMark where a hand-made converter slipped: raw HTML stays text, emphasis nests,
    # a backslash escapes, a table cell keeps an escaped pipe
    tricky = ("<script>x</script>\n\n***both*** and \\*not em\\*\n\n| a | b |\n|---|---|\n"
              "| 1 \\| 2 | 3 |\n")
    page = markdown_to_html(tricky, tmp_path, "t")
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "<em><strong>both</strong></em>" in page and "*not em*" in page
    assert "<td>1 | 2</td>" in page
    with pytest.raises(PacplanError, match="outside"):
        markdown_to_html("![x](../f.png)\n", tmp_path / "sub", "t")
    with pytest.raises(PacplanError, match="missing"):
        markdown_to_html("![x](g.png)\n", tmp_path, "t")


def _certificate(finished_run: Path, **changes: object):
    from dataclasses import replace

    from pacplan.pacbayes.record import Certificate

    c = Certificate.load(finished_run / "certificates" / "N60.json")
    return replace(c, **changes)


def test_paper_column_exactly_when_the_setting_matches(finished_run: Path):
    from pacplan.report.tables import paper_figures, table1

    setting = {"n": 1000, "m": 50, "delta": 0.01}
    paper = {n: _certificate(finished_run, **{**setting, "n": n}) for n in (1000, 1500, 4000)}
    figures = paper_figures("uav", paper)
    assert figures == {1000: "26.02 % (McAllester)", 4000: "21.55 % (quadratic); test 18.43 %"}
    for world, changes in (("toy", {}), ("uav", {"m": 49}),
                           ("uav", {"delta": 0.05}), ("uav", {"n": 2500})):
        c = _certificate(finished_run, **{**setting, **changes})
        assert paper_figures(world, {c.n: c}) == {}, (world, changes)
    # The quadruped's Table 1 (C_QPAC; true cost at every N) on the paper's robot only.
    assert paper_figures("quadruped", paper, {"robot": "derpy", "physics": "mujoco"}) == {
        1000: "23.87 % (quadratic); test 18.31 %", 4000: "20.73 % (quadratic); test 17.81 %"}
    assert paper_figures("quadruped", paper) == paper_figures("quadruped", paper,
                                                              {"robot": "derpy"})
    assert paper_figures("quadruped", paper, {"robot": "minitaur"}) == {}
    table = table1(paper, {"zeros": np.zeros((5, 1))}, figures).splitlines()
    assert "paper (its own world and prior)" in table[0]
    assert {line.count("|") for line in table} == {table[0].count("|")}
    assert "26.02 %" in table[2] and table[3].endswith("|  |") and "21.55 %" in table[4]
    assert "paper" not in table1(paper, {})


def test_paper_code_runs_say_only_the_prior_differs_from_the_paper():
    """A quadruped run in the paper-code variant is the paper's experiment: its note and column
    say the prior differs (or, when it is the paper's, the terrains and draws), and name the
    engine; every other run keeps the world's note."""
    from pacplan.report.tables import paper_column_head, paper_note
    from pacplan.worlds.quadruped.paper_table import NOTE as QUADRUPED_NOTE
    from pacplan.worlds.uav.paper_table import NOTE as UAV_NOTE

    bullet = {"variant": "paper-code", "physics": "bullet"}
    assert "PyBullet" in paper_note("quadruped", bullet)
    assert "not a like-for-like" not in paper_note("quadruped", bullet)
    assert "not calibrated" in paper_note("quadruped", {"variant": "paper-code"})  # MuJoCo
    assert paper_column_head("quadruped", bullet) == "paper (its code's experiment, its own prior)"
    assert "what still differs is the prior" in paper_note("quadruped", bullet)
    # the paper's own prior certified there: only the terrains and the draws differ
    own = paper_note("quadruped", bullet, papers_prior=True)
    assert "the prior is the paper's own" in own and "differs is the prior" not in own
    assert "its own terrains" in paper_column_head("quadruped", bullet, papers_prior=True)
    for world, options in (("quadruped", None), ("quadruped", {"variant": "text"}), ("uav", {})):
        for papers_prior in (False, True):
            assert paper_note(world, options, papers_prior) == \
                {"quadruped": QUADRUPED_NOTE, "uav": UAV_NOTE}[world]
            assert paper_column_head(world, options, papers_prior) == \
                "paper (its own world and prior)"


def test_report_of_a_non_paper_setting_has_no_paper_column(rundir: Path):
    md, page = _md_html(rundir)
    assert "paper (its own world" not in md and "paper" not in page.split("<h2>")[0].lower()


def test_choose_trajectories_takes_failures_and_a_success():
    from pacplan.report.document import choose_trajectories

    costs = np.array([0.0, 0.3, 0.0, 0.5, 0.2, 0.0])
    assert choose_trajectories(costs, 3) == [1, 3, 0]
    assert choose_trajectories(costs, 2) == [1, 0]
    assert choose_trajectories(costs, 1) == [1]
    assert choose_trajectories(costs, 5) == [1, 3, 4, 0, 2]
    assert choose_trajectories(np.zeros(4), 3) == [0, 1, 2]  # no failure: successes fill in
    assert choose_trajectories(np.full(4, 0.1), 3) == [0, 1, 2]  # no success: failures fill in
    assert choose_trajectories(costs, 10) == [1, 3, 4, 0, 2, 5]
    assert choose_trajectories(costs, 0) == []


def test_report_draws_failures_from_the_test_matrix(rundir: Path, monkeypatch):
    import yaml

    from pacplan.io.files import atomic_write_bytes
    from pacplan.report import document as report
    from pacplan.report.document import choose_trajectories

    drawn = []

    def fake_render(seed: int, out: str, theta_path: str, world_options: dict) -> str:
        drawn.append(seed)
        atomic_write_bytes(out, b"\x89PNG fake")
        return out

    monkeypatch.setattr(report, "world_renderer", lambda name: fake_render)
    cfg = yaml.safe_load((rundir / "config.yaml").read_text())
    cfg["report"]["trajectories"] = 3
    (rundir / "config.yaml").write_text(yaml.safe_dump(cfg))
    stale = rundir / "figures" / "trajectory_seed1.png"
    stale.write_bytes(b"old")
    test = np.load(rundir / "costs" / "test.npy")
    p = json.loads((rundir / "certificate.json").read_text())["p"]
    column = test[:, int(np.argmax(p))]
    expected = [20_000 + i for i in choose_trajectories(column, 3)]
    md, _ = _md_html(rundir)
    assert drawn == expected
    assert sum(column[i] > 0 for i in choose_trajectories(column, 3)) >= min(
        2, int((column > 0).sum()))
    for seed in expected:
        label = "failure" if column[seed - 20_000] > 0 else "success"
        assert f"### Test environment {seed}, policy {int(np.argmax(p))}: {label}" in md
        assert f"figures/trajectory_seed{seed}.png" in md
    assert not stale.exists()  # an earlier report's figure is not left behind


def test_timing_table_sums_invocations(rundir: Path):
    from pacplan.report.tables import timing_table

    history = [
        {"finished": "2026-01-01T00:00:00Z", "seconds": {"prior": 10.0, "cert costs": 20.5}},
        "not an entry",
        {"finished": "2026-01-02T00:00:00Z", "seconds": {"cert costs": 4.5, "test costs": 65.0,
                                                         "bad": "x"}},
    ]
    lines = timing_table(history)
    assert lines[:2] == ["| step | wall time (s) | share |", "|---|---:|---:|"]
    assert "| prior | 10.0 | 10.0 % |" in lines and "| cert costs | 25.0 | 25.0 % |" in lines
    assert "| test costs | 65.0 | 65.0 % |" in lines
    assert "| **total** | **100.0** (2 min) | 100 % |" in lines
    assert "2 invocations" in lines[-1] and "1 resume" in lines[-1]
    assert "2026-01-02T00:00:00Z" in lines[-1]
    (rundir / "timings.json").write_text(json.dumps(history))
    md, page = _md_html(rundir)
    assert "| **total** | **100.0** (2 min) | 100 % |" in md and "```json" not in md
    assert "<strong>100.0</strong>" in page
    sizes = sum(np.load(f).size for f in (rundir / "costs").glob("*.npy"))
    for computed, said in ((sizes - 7, f"computed {sizes - 7:,} of the {sizes:,} rollouts in"),
                           (sizes, None),
                           # a damaged count is not taken at its word
                           (1e308, f"computed 0 of the {sizes:,} rollouts in"),
                           (sizes - 6.5, f"computed 0 of the {sizes:,} rollouts in")):
        history[-1]["rollouts"] = {"cert costs": computed}  # carried rows: not computed here
        (rundir / "timings.json").write_text(json.dumps(history))
        md = write_report(rundir).read_text()
        assert (said in md) if said else "rollouts in the run's matrices" not in md
    # rollouts with their CPU time: per step, over the invocations that recorded it
    history[0]["rollouts"] = {"cert costs": 100}
    history[0]["cpu_seconds"] = {"cert costs": 30.0}
    history[-1]["rollouts"] = {"cert costs": 50, "test costs": 40}
    history[-1]["cpu_seconds"] = {"cert costs": 30.0}  # its test step's is not recorded
    lines = timing_table(history)
    assert lines[0] == "| step | wall time (s) | share | rollouts computed | CPU s a rollout |"
    assert "| cert costs | 25.0 | 25.0 % | 150 | 0.4 |" in lines
    assert "| test costs | 65.0 | 65.0 % | 40 | — |" in lines
    assert "| prior | 10.0 | 10.0 % | — | — |" in lines
    assert "| **total** | **100.0** (2 min) | 100 % | 190 | |" in lines
    assert "CPU s a rollout: the CPU time of the processes" in lines[-1]
    assert "| cert costs | 25.0 | 25.0 % | 0 | — |" in timing_table(history, most_rollouts=10)
    (rundir / "timings.json").write_text("{broken")
    assert "timings.json is unreadable" in write_report(rundir).read_text()


def test_prior_trained_in_the_run(rundir: Path):
    md, _ = _md_html(rundir)
    sha = json.loads((rundir / "manifest.json").read_text())["prior.safetensors"]["sha256"]
    assert "Trained in this run by Evolution Strategies" in md and sha in md
    assert "3 iterations × 4 environments × 2 antithetic pairs" in md
    assert "training seeds [0, 100)" in md
    assert "![ES training curve of the prior](figures/prior_training.png)" in md
    assert (rundir / "figures" / "prior_training.png").is_file()


def test_prior_given_as_a_file(finished_run: Path, tmp_path: Path):
    from pacplan.io.files import sha256_file

    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copy(finished_run / "prior.safetensors", shipped / "toy.safetensors")
    shutil.copy(finished_run / "metrics.jsonl", shipped / "toy-metrics.jsonl")
    (shipped / "toy-prior.yaml").write_text("name: toy\n")
    out = tmp_path / "given"
    run(parse_config(json.loads(json.dumps(CONFIG))), out, prior_file=shipped / "toy.safetensors",
        progress=False)
    md, _ = _md_html(out)
    assert "Given as a file" in md and sha256_file(shipped / "toy.safetensors") in md
    assert "training seeds [0, 100)" in md and "`toy-metrics.jsonl`" in md
    assert "`toy-prior.yaml`" in md and "3 iterations" in md
    assert "![ES training curve of the prior](figures/prior_training.png)" in md
    assert (out / "figures" / "prior_training.png").is_file()
    (shipped / "toy-metrics.jsonl").unlink()
    (shipped / "toy-training.png").write_bytes(b"\x89PNG curve")
    md, _ = _md_html(out)
    assert "`toy-training.png`" in md
    assert (out / "figures" / "prior_training.png").read_bytes() == b"\x89PNG curve"
    # a figure beside the prior need not be an ES curve (a taught net's rounds)
    assert "![The prior's training figure](figures/prior_training.png)" in md
    assert "no ES metrics record (none lies beside it)" in md
    (shipped / "toy-metrics.jsonl").write_text('{"round": -1, "eval_cost": 0.2}\n'
                                               '{"round": 0, "states": 9, "eval_cost": 0.1}\n')
    md, _ = _md_html(out)  # the student's record: its teaching rounds, which `distill` describes
    assert "no ES metrics record (toy-metrics.jsonl lists teaching rounds (below), no ES " \
           "iterations)" in md
    (shipped / "toy.safetensors").write_bytes(b"changed")
    md, _ = _md_html(out)
    assert "not found with this sha256" in md and "ES training curve" not in md


def test_gym_report_turns_costs_back_into_returns(tmp_path: Path):
    """results/gym-cartpole (return_bounds [0, 500]): every certificate's bound in returns is
    500 − 500·C, and the test mean return is recomputed from the test matrix itself."""
    from pacplan.pacbayes.record import load_record

    run_dir = Path(shutil.copytree(Path(__file__).resolve().parents[2] / "results" /
                                   "gym-cartpole", tmp_path / "run",
                                   ignore=shutil.ignore_patterns("figures", "report*")))
    text = write_report(run_dir).read_text()
    section = text.split("## In returns", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    test = np.load(run_dir / "costs" / "test.npy")
    certs = sorted((run_dir / "certificates").glob("*.json"))
    assert len(rows) == 1 + len(certs) >= 2
    for row in rows[1:]:
        cells = [c.strip(" *") for c in row.strip("|").split("|")]
        n = int(cells[0])
        cert = load_record(run_dir / "certificates" / f"N{n}.json").certificate
        assert float(cells[1]) == pytest.approx(500 - 500 * cert.certified, rel=1e-5)
        mean_return = float(np.mean((500 - 500 * test) @ np.asarray(cert.p)))
        assert float(cells[2].split(" [")[0]) == pytest.approx(mean_return, rel=1e-5)


def test_a_shipped_prior_is_named_not_shown_as_a_source_tree_path(
        finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """A prior from inside the package reads as the shipped prior, not `../../src/pacplan/…`;
    `pacplan report` names every file it writes."""
    import pacplan
    from helpers import cli

    package = tmp_path / "site" / "pacplan"
    (package / "presets" / "priors").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    prior = package / "presets" / "priors" / "toy.safetensors"
    shutil.copy(finished_run / "prior.safetensors", prior)
    out = tmp_path / "runs" / "given"
    run(parse_config(json.loads(json.dumps(CONFIG))), out, prior_file=prior, progress=False)
    recorded = json.loads((out / "manifest.json").read_text())
    assert "../" in json.dumps(recorded)  # the manifest keeps the relative path it copied from
    monkeypatch.setattr(pacplan, "__file__", str(package / "__init__.py"))
    code, said, _ = cli(["report", str(out)], capsys)
    assert code == 0
    md = (out / "report.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("Given as a file"))
    assert "the shipped prior `toy` (`pacplan/presets/priors/toy.safetensors` in the package)" \
        in line and "../" not in line
    flat = " ".join(said.split())
    assert all(name in flat for name in ("report.md", "report.html", "figures"))


# ------------------------------------------------- names from outside are shown, not obeyed
def _rendered(md: str) -> tuple[list[str], list[str]]:
    """What report.md turns into where Markdown is rendered with raw HTML on (GitHub): the
    visible text of each paragraph, heading and cell, and every link, HTML or image token
    whose target is not one of the report's own figures (what a name must never become)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(md)
    shown, bad = [], []
    for token in tokens:
        if token.type == "html_block":
            bad.append(token.content)
        for child in token.children or []:
            src = child.attrGet("src") if child.type == "image" else None
            if child.type in ("link_open", "html_inline") or (
                    src is not None and not str(src).startswith("figures/")):
                bad.append(f"{child.type} {child.content or src or child.attrs}")
        shown.append("".join(c.content for c in token.children or []
                             if c.type in ("text", "code_inline")))
    return shown, bad


HOSTILE_STEMS = ["z`[click me](mailto:a@b)`", "![i](x)", "**b**", "<script>x"]


@pytest.mark.parametrize("stem", HOSTILE_STEMS)
def test_a_prior_file_name_is_shown_verbatim(finished_run: Path, tmp_path: Path, stem: str):
    """A given prior's file name appears as its own characters wherever the report names it
    (the source, and the damaged training record beside it): never a link, image, emphasis
    or HTML, and the report step does not fail on it."""
    given = tmp_path / "given"
    given.mkdir()
    prior = given / f"{stem}.safetensors"
    shutil.copy(finished_run / "prior.safetensors", prior)
    (given / f"{stem}-metrics.jsonl").write_text("not json\n")
    out = tmp_path / "run"
    run(parse_config(json.loads(json.dumps(CONFIG))), out, prior_file=prior, progress=False)
    md, page = _md_html(out)
    shown, bad = _rendered(md)
    assert bad == []
    assert any(f"given/{stem}.safetensors" in line for line in shown)
    assert any(f"{stem}-metrics.jsonl is unreadable" in line for line in shown)
    assert "<a " not in page and "<script" not in page and "href=" not in page
    assert page.count("<img ") == md.count("](figures/")


def _crossval(rundir: Path, **changes: object) -> dict:
    """A crossval record made for the run's last certificate (as the benchmark writes one)."""
    from pacplan.pacbayes.record import Certificate

    c = Certificate.load(rundir / "certificate.json")
    record = {"benchmark": "quadruped_result_crossval", "run": str(rundir), "engine": "bullet",
              "run_engine": "mujoco", "terrains": [20_000, 20_010],
              "draws": "one per terrain from p", "replayed_mean_cost": 0.25,
              "stored_same_draws_mean_cost": 0.3, "paired_diff": -0.05,
              "paired_diff_ci99": [-0.1, 0.0], "run_test_cost": 0.28,
              "run_test_ci99": [0.2, 0.35], "within_test_ci": True, "certificate_n": c.n,
              "posterior_sha256": c.posterior_sha256(),
              "test_matrix_sha256": c.test_matrix.sha256, "wall_s": 1.0}
    return {**record, **changes}


def _crossval_section(rundir: Path) -> tuple[str, list[str], list[str]]:
    md = write_report(rundir).read_text()
    section = md.split("## The certificate in another engine", 1)[1].split("\n## ", 1)[0]
    shown, bad = _rendered(section)
    return section, shown, bad


def test_a_crossval_file_is_quoted_only_once_checked(rundir: Path):
    """crossval/*.json is not hash-checked: each field the report quotes is checked first
    (type and range); a file that fails is named, the field said, and none of it quoted, and
    the rest of the report is still written."""
    folder = rundir / "crossval"
    folder.mkdir()
    (folder / "bullet.json").write_text(json.dumps(_crossval(rundir)))
    section, shown, bad = _crossval_section(rundir)
    assert "replayed in **bullet** on the first 10 test environments" in section
    assert "mean cost **25.00 %**" in section and "lies inside it" in section and bad == []
    link = "[click me](mailto:a@b)"
    for field, value, said in (
            ("run_engine", link, "run_engine"), ("engine", f"x **{link}**", "engine"),
            ("replayed_mean_cost", link, "replayed_mean_cost"),
            ("paired_diff_ci99", [link, 0.1], "paired_diff_ci99"),
            ("run_test_ci99", [0.3, 0.2], "run_test_ci99"),
            ("stored_same_draws_mean_cost", float("nan"), "stored_same_draws_mean_cost"),
            ("terrains", [5, "6"], "terrains"), ("within_test_ci", "yes", "within_test_ci"),
            ("test_matrix_sha256", link, "test_matrix_sha256"),
            ("certificate_n", link, "certificate_n")):
        (folder / "bullet.json").write_text(json.dumps(_crossval(rundir, **{field: value})))
        section, shown, bad = _crossval_section(rundir)
        assert bad == [] and "click me" not in section, (field, section)
        assert "`crossval/bullet.json` is not quoted" in section and said in section, field
        assert "**bullet**" not in section
    (folder / "bullet.json").unlink()
    name = f"z`{link}`.json"
    (folder / name).write_text(json.dumps(_crossval(rundir)))
    section, shown, bad = _crossval_section(rundir)
    assert bad == [] and any(f"crossval/{name}" in line for line in shown)
    assert "replayed in **bullet**" in section


def test_table_cells_and_times_from_timings_json_are_text(rundir: Path):
    """timings.json is for people and unhashed: its step names and dates reach the table and
    its note as text, never as a link or an extra cell."""
    link = "[click me](mailto:a@b)"
    history = [{"finished": f"**{link}**", "seconds": {"a|b": 1.0, link: 2.0, "<b>c": 3.0}}]
    (rundir / "timings.json").write_text(json.dumps(history))
    md = write_report(rundir).read_text()
    shown, bad = _rendered(md)
    assert bad == []
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    section = md.split("## Wall time", 1)[1]
    table = [line for line in section.splitlines() if line.startswith("| ")]
    assert {line.count("|") - line.count("\\|") for line in table} == {4}
    assert rows and all(s in shown for s in ("a|b", link, "<b>c"))
    assert any(f"**{link}**" in line for line in shown)


def test_world_options_and_prior_metadata_are_text(finished_run: Path, tmp_path: Path):
    """Strings a config or a prior's metadata carries (world options, a teacher's name, the
    iteration count recorded in the prior) are shown as text; metadata of the wrong type is
    called unreadable, not a traceback."""
    from types import SimpleNamespace

    from pacplan.config import load_config
    from pacplan.pipeline.rundir import RunDir
    from pacplan.report.document import _header
    from pacplan.report.prior import _es_record_summary, _taught

    link = "[click me](mailto:a@b)"
    cfg = load_config(finished_run / "config.yaml")
    last = SimpleNamespace(provenance={"world": {"name": "w`x", "options": {"k": f"**{link}"}},
                                       "seeds": {"prior": [0, 1], "cert": [1, 2],
                                                 "test": [2, 3]}},
                           m=6, delta=0.05, solver="gibbs", bound="best", n=60)
    shown, bad = _rendered("\n".join(_header(cfg, last)))
    assert bad == [] and any(f'{{"k": "**{link}"}}' in line for line in shown)
    assert any("World w`x " in line for line in shown)
    records = [{"iteration": i, "cost": 0.5, "best": 0.5, "sigma_mean": 0.1, "utility": False}
               for i in range(3)]
    shown, bad = _rendered(_es_record_summary(records, {"iteration": f"<b>{link}"}))
    assert bad == [] and any(f"The prior records <b>{link} iterations" in s for s in shown)
    distill = {"teacher": f"![i](x) {link}", "seeds": [0, 10], "rounds": 2, "states": 100,
               "eval_cost": None}
    rd = RunDir(tmp_path)
    shown, bad = _rendered("\n".join(_taught({"distill": json.dumps(distill)}, None, rd)))
    assert bad == [] and any(f"{distill['teacher']} labelled" in s for s in shown)
    for broken in ({"states": "many"}, {"eval_cost": "low", "eval_envs": 3},
                   {"seeds": [0, link]}):
        said = _taught({"distill": json.dumps({**distill, **broken})}, None, rd)
        assert said == ["The prior's `distill` metadata is unreadable.", ""], broken


def test_a_fifo_for_metrics_or_a_crossval_file_is_named_not_waited_on(rundir: Path):
    """report read metrics.jsonl and crossval/*.json with read_text: a FIFO there blocked it
    forever. A writer that turns up after 20 s closes each FIFO a reader waits on, so the old
    behaviour fails this test instead of hanging it."""
    import contextlib
    import os
    import threading
    import time

    (rundir / "crossval").mkdir()
    fifos = [rundir / "metrics.jsonl", rundir / "crossval" / "bullet.json"]
    fifos[0].unlink()
    for fifo in fifos:
        os.mkfifo(fifo)
    done = threading.Event()

    def late_writer() -> None:
        if done.wait(20):
            return
        while not done.wait(0.2):
            for fifo in fifos:
                with contextlib.suppress(OSError):  # succeeds only if a reader waits on it
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    writer = threading.Thread(target=late_writer, daemon=True)
    writer.start()
    t0 = time.perf_counter()
    try:
        md = write_report(rundir).read_text()
    finally:
        done.set()
        writer.join()
    assert time.perf_counter() - t0 < 15
    assert "metrics.jsonl is unreadable" in md
    assert "`crossval/bullet.json` is unreadable" in md and "not a regular file" in md
    assert all(fifo.is_fifo() for fifo in fifos)


@pytest.mark.parametrize("into", ["planner", "other run", "elsewhere"])
def test_a_figures_link_out_of_the_run_is_refused_before_writing(rundir: Path, tmp_path: Path,
                                                                 into: str):
    """figures/ as a link into a planner directory: the report wrote its PNGs there (the
    planner no longer loaded: unlisted files), then failed embedding them; a link to any
    folder outside the run failed the same way, after writing."""
    target = tmp_path / "target"
    target.mkdir()
    if into == "planner":
        (target / "planner.json").write_text("{}\n")
        (target / "manifest.json").write_text("{}\n")
    elif into == "other run":
        (target / "config.yaml").write_text((rundir / "config.yaml").read_text())
        (target / "manifest.json").write_text("{}\n")
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    report_before = (rundir / "report.md").read_bytes()
    shutil.rmtree(rundir / "figures")
    (rundir / "figures").symlink_to(target, target_is_directory=True)
    words = ("link to" if into == "elsewhere" else
             f"link into the {'planner' if into == 'planner' else 'run'} directory")
    _report_fails(rundir, "figures", words)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert (rundir / "report.md").read_bytes() == report_before
