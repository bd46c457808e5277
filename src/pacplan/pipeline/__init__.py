"""The pipeline behind `pacplan run` and the front door's `pacplan.run(config, out)`
(`pacplan.api.run`): prior, policies, cost matrices, certificates, report.

Grouped by job: the pipeline itself here (`start`, `pipeline`, `stages`, the run directory
`rundir` and `lock`, `rows`, `provenance`, `fresh`, `compare`, `plan`); running a cost
matrix's tasks on an executor in `execution`; where the prior comes from (ES training,
distillation, the paper's prior) in `prior`.

It is named `pipeline`, not `run`, so that no package shares a front-door function's name:
importing a package `pacplan.run` would set the attribute `pacplan.run` to the package. Until
0.2 it was `pacplan.run`; an import path recorded under that name still resolves
(`pacplan.io.renamed`).
"""
