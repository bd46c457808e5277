"""pacplan: vision-based planners over motion primitives with PAC-Bayes certificates."""

__version__ = "0.1.0"


def _register_gym_envs() -> None:
    """Register the worlds' Gymnasium environments by entry-point string (nothing heavy is
    imported); the world registry is the one list of them. Gymnasium 1.x loads no plugins, so
    `import pacplan` registers them, or `gym.make("pacplan:pacplan/UAVObstacleField-v0")`, whose
    "pacplan:" prefix makes Gymnasium import this package first."""
    try:
        import gymnasium
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return
    from pacplan.worlds.base import gym_specs

    for env_id, kwargs in gym_specs().items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, **kwargs)


_register_gym_envs()
