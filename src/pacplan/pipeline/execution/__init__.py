"""Running a cost matrix's tasks: the `Executor` base (`executor`), what every executor shares
(`tasks`), the serial reference and `make_executor` (`executors`), the process pool
(`parallel`), Ray (`ray_executor`, `ray_address`), the chunk store finished pieces land in
(`chunks`) and the progress shown meanwhile (`progress`). The pipeline's stages and
certify-policy run their rollouts through it.
"""
