"""Everything that turns a finished run directory into report.md, report.html and figures/.

A consumer of runs, not a stage of running them: it reads what `pacplan.pipeline` wrote
(through `pacplan.pipeline.rundir` and `pacplan.pipeline.provenance`) and never writes anything
a run reads back.
`write_report` (`pacplan.report.document`) is the entry point; `tables`, `prior`, `crossval`,
`figures`, `html` and `markdown` are its parts.
"""
