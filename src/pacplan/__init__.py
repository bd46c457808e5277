"""pacplan: vision-based planners over motion primitives with PAC-Bayes certificates."""

__version__ = "0.1.0"


def _register_gym_envs() -> None:
    """Register the worlds' Gymnasium environments by entry-point string (nothing heavy is
    imported); the world registry is the one list of them."""
    try:
        import gymnasium
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return
    from pacplan.worlds.base import gym_environments

    for env_id, entry in gym_environments().items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry)


_register_gym_envs()
