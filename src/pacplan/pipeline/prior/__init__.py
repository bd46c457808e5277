"""Where a run's prior comes from: the resumable ES loop (`training`, its figure `curve` and
TensorBoard scalars `tensorboard`), distillation from a privileged teacher before ES
(`distill`, `distill_quadruped`, `distill_store`), the paper's own Minitaur prior
(`paper_priors`), and where a prior was trained against where it is certified (`prior_world`).
"""
