"""pacplan: vision-based planners over motion primitives with PAC-Bayes certificates."""

__version__ = "0.1.0"


def _register_gym_envs() -> None:
    """Register the Gymnasium environments by entry-point string (nothing heavy is imported)."""
    try:
        import gymnasium
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return
    for env_id, entry in {
        "pacplan/UAVObstacleField-v0": "pacplan.worlds.uav.gym_env:UAVObstacleFieldEnv",
        "pacplan/MinitaurTerrain-v0": "pacplan.worlds.quadruped.gym_env:MinitaurTerrainEnv",
    }.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry)


_register_gym_envs()
