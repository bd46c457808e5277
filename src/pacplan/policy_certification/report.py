"""`pacplan report` on a certify-policy folder: report.md and report.html beside its
certificate.

What a run's report holds that a certify-policy folder has not (a prior, drawn policies, ES
curves, trajectories) is left out; what is printed is checked first: every certificate shown
is verified with the folder's own checks (every number recomputed from the ledgered matrices,
what it certifies against certify-policy.json), under the folder's lock, so no certify-policy
command changes the folder while the report reads it. Table 1 has a row for every N certified
with the main certificate's δ and test seeds (certificates/), and the run report's figures
(bounds vs N, the posterior, the cost distribution) are drawn into figures/. The folder gains
report.md, report.html and figures/ only: no run.lock.
"""

from __future__ import annotations

import json
from pathlib import Path

from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_text
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.record import Certificate
from pacplan.policy_certification.provenance import KEY, verify_saved_certificate
from pacplan.policy_certification.store import CERTIFICATE, CERTIFICATES, LOCK, MARK, policy_labels
from pacplan.report.figures import report_figures
from pacplan.report.html import markdown_to_html
from pacplan.report.markdown import code, text
from pacplan.report.tables import pct, table1

REPORT, REPORT_HTML, FIGURES = "report.md", "report.html", "figures"


def write_policy_report(folder: str | Path) -> Path:
    """Write report.md and report.html for a certify-policy folder; returns report.md's path.
    A folder without a certificate is refused before anything is written or locked."""
    folder = Path(folder)
    if not (folder / MARK).is_file():
        raise PacplanError(f"{folder} is not a certify-policy folder (no {MARK})")
    if not (folder / CERTIFICATE).is_file():
        raise PacplanError(f"{folder} has no {CERTIFICATE} yet; finish `pacplan "
                           "certify-policy` there first")
    from pacplan.pipeline.lock import hold

    with hold(folder, folder / LOCK):
        c = verify_saved_certificate(folder / CERTIFICATE)
        certs = _every_n(folder, c)
        lines = _lines(folder, c, certs)
        where = Path(c.cert_matrix.path)  # verified above, under the same lock
        where = where if where.is_absolute() else folder / where
        matrix = load_cost_matrix(where, name=str(where)).values
        for title, rel in report_figures(folder / FIGURES, certs, matrix):
            lines += [f"## {title}", "", f"![{title}]({rel})", ""]
        body = "\n".join(lines)
        title = f"pacplan certify-policy report: {folder.name}"
        atomic_write_text(folder / REPORT_HTML, markdown_to_html(body, folder, title))
        atomic_write_text(folder / REPORT, body)
    return folder / REPORT


def _every_n(folder: Path, c: Certificate) -> dict[int, Certificate]:
    """The main certificate and, by N, every other one of the folder with its δ and test
    seeds, each verified; in increasing N."""
    certs = {c.n: c}
    for path in sorted((folder / CERTIFICATES).glob("N*.json")):
        other = verify_saved_certificate(path)
        if other.delta == c.delta and other.test_n == c.test_n and other.n not in certs:
            certs[other.n] = other
    return dict(sorted(certs.items()))


def _lines(folder: Path, c: Certificate, certs: dict[int, Certificate]) -> list[str]:
    record = (c.provenance or {}).get(KEY)
    if not isinstance(record, dict):
        raise PacplanError(f"{folder / CERTIFICATE}: does not record what it certifies (no "
                           f"provenance.{KEY}); run the same certify-policy command again")
    env, seeds = record.get("env") or {}, record.get("seeds") or {}
    kwargs = json.dumps(env.get("kwargs") or {})
    lines = [
        f"# pacplan certify-policy report: {text(folder.name)}", "",
        f"Environment {code(str(env.get('id')))} with kwargs {code(kwargs)} (Gymnasium "
        f"{text(str(env.get('gymnasium')))}), horizon {text(str(record.get('horizon')))} steps; "
        f"cost rule {code(json.dumps(record.get('cost'), sort_keys=True))}"
        + ("; actions clipped into the action space" if "actions" in record else "") + ".", "",
        f"m = {c.m} {'policy' if c.m == 1 else 'policies'}; δ = {c.delta:g}; certification "
        f"seeds {text(str(seeds.get('cert')))}, test seeds "
        f"{text(str(seeds.get('test') or 'none'))} (half-open).", "",
        "With probability ≥ 1 − δ over the certification seeds, the expected cost on a fresh "
        "seed of a policy drawn from the posterior for each episode is at most the "
        "**certified** value. The certificate was verified (`pacplan verify`) before this "
        "report was written.", "",
        table1(certs, {}), "",
        "## The policies", "",
        "| policy | kind | sha256 | posterior p |",
        "|---|---|---|---:|",
    ]
    labels = policy_labels(folder, c.m)
    for j, policy in enumerate(record.get("policies") or []):
        p = c.p[j] if j < len(c.p) else 0.0
        lines.append(f"| {text(labels[j] if j < len(labels) else str(j))} | "
                     f"{text(str(policy.get('kind')))} | {code(str(policy.get('sha256'))[:16])}… "
                     f"| {p:.4f} |")
    lines += ["", f"Certified cost {pct(c.certified)} ({c.certified_by}, N = {c.n}). Deploy "
              "it with `pacplan export` (docs/certify-policy.md): only the policies with "
              "p > 0 are exported, one drawn per episode.", ""]
    return lines
