"""pacplan: vision-based planners over motion primitives with PAC-Bayes certificates.

The front door (`pacplan.api`): `pacplan.certify(costs)` certifies any N × m array of costs,
`pacplan.verify(path)` checks a certificate file or planner directory, `pacplan.run(config)`
runs a preset, YAML file or dict, and `pacplan.certify_policy(env_id, policies, n=..., out=...)`
certifies policies trained elsewhere (SB3, ONNX, a callable). Each returns a certificate (or a
result holding one) and raises `pacplan.PacplanError`. They are imported on first use, so
`import pacplan` stays fast.
"""

__version__ = "0.2.0"

__all__ = ["Certificate", "NotCheckedWarning", "PacplanError", "SensorFaultWarning",
           "UnidentifiedInputWarning", "__version__", "certify", "certify_policy", "run", "verify"]

# name -> module that defines it (no package is named like a function here: the pipeline is
# `pacplan.pipeline`, certify-policy's machinery `pacplan.policy_certification`)
_LAZY = {"certify": "pacplan.api", "verify": "pacplan.api", "run": "pacplan.api",
         "certify_policy": "pacplan.policy_certification.certify",
         "Certificate": "pacplan.api", "PacplanError": "pacplan.errors",
         "UnidentifiedInputWarning": "pacplan.errors", "NotCheckedWarning": "pacplan.errors",
         "SensorFaultWarning": "pacplan.errors"}


def __getattr__(name: str) -> object:
    """Import the front door's names on first use (PEP 562)."""
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pacplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
