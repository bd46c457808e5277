"""What crosses between a policy and a Gymnasium environment, checked by type, never by
truthiness, so a certificate counts only what the episode really did.

A policy's action is checked before `env.step`: the right kind (an integer for `Discrete`, real
numbers for `Box`), the right shape, finite, and inside the action space. Many environments
clip or cast what they are given (MuJoCo's clip controls to their range, CartPole's `int(a)`),
so an action outside the space would otherwise be certified as if the policy had chosen the
clipped one. A user may ask for exactly that (`clip`): then the action is clipped here, counted,
and the certificate is for the clipped policy.

An environment's outputs are checked as they come: the reward a finite real number (not a
string, None, complex or an array of several), `terminated` and `truncated` booleans (not an
array, not 0/1), `info` a dict, observations without NaN; the success entry of `info` a boolean
or 0/1 (the string "False" is not a success), present where the cost asks for it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError, short


def _scalar(value: Any) -> Any:
    """A 0-d numpy array as its element; anything else unchanged."""
    if isinstance(value, np.ndarray) and value.shape == ():
        return value[()]
    return value


def checked_action(action: Any, space: spaces.Space, clip: bool = False) -> tuple[Any, bool]:
    """(the action to step with, whether it was clipped); a `PacplanError` saying what is
    wrong with it otherwise (the caller adds whose action, which seed and step)."""
    if isinstance(space, spaces.Discrete):
        value = _scalar(action)
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            raise PacplanError(f"action {short(action)} ({type(action).__name__}) is not an "
                               f"integer, as {space} needs")
        if not int(space.start) <= int(value) < int(space.start) + int(space.n):
            raise PacplanError(f"action {int(value)} is outside {space}")
        return action, False
    if isinstance(space, spaces.Box):
        return _box_action(action, space, clip)
    try:
        inside = bool(space.contains(action))
    except Exception:  # a space's own check that cannot read the value
        inside = False
    if not inside:
        raise PacplanError(f"action {short(action)} is not in the action space {space}")
    return action, False


def _box_action(action: Any, space: spaces.Box, clip: bool) -> tuple[Any, bool]:
    try:
        values = np.asarray(action)
    except Exception:  # a ragged list, an object numpy cannot read
        raise PacplanError(f"action {short(action)} is not an array of numbers") from None
    if values.dtype.kind not in "iuf":
        raise PacplanError(f"action {short(action)} has dtype {values.dtype}: {space} needs "
                           "real numbers")
    if values.shape != space.shape:
        raise PacplanError(f"action {short(action)} has shape {values.shape}; {space} needs "
                           f"{space.shape}")
    if np.issubdtype(space.dtype, np.integer) and values.dtype.kind == "f":
        raise PacplanError(f"action {short(action)} has dtype {values.dtype}: {space} needs "
                           "integers")
    as_float = values.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        in_dtype = values.astype(space.dtype) if space.dtype.kind == "f" else as_float
    if not (np.isfinite(as_float).all() and np.isfinite(in_dtype).all()):
        raise PacplanError(f"action {short(action)} is not finite (as {space.dtype})")
    low, high = space.low.astype(np.float64), space.high.astype(np.float64)
    if ((as_float >= low) & (as_float <= high)).all():
        return action, False
    if not clip:
        raise PacplanError(f"action {short(action)} is outside the action space {space} "
                           "(clip_actions=True, --clip-actions on the command line, clips it "
                           "into the space instead)")
    return np.clip(as_float, low, high).astype(space.dtype), True


def checked_step(env: Any, action: Any) -> tuple[Any, float, bool, bool, Mapping[str, Any]]:
    """`env.step(action)` with its outputs checked: any failure of the environment
    (`SystemExit` included) or output that is not Gymnasium's API is a `PacplanError` saying
    which (the caller adds whose environment, which seed and step)."""
    from pacplan.io.user_code import calling_user_code

    with calling_user_code(f"refused action {short(action)}"):
        step = env.step(action)
    if not isinstance(step, tuple) or len(step) != 5:
        raise PacplanError(f"step returned {short(step)}, not (observation, reward, "
                           "terminated, truncated, info)")
    obs, reward, terminated, truncated, info = step
    return (obs, checked_reward(reward), checked_flag(terminated, "terminated"),
            checked_flag(truncated, "truncated"), checked_info(info))


def checked_reward(reward: Any) -> float:
    """A step's reward as a float: a finite real number, never a string, None or complex."""
    value = _scalar(reward)
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real | np.integer
                                                             | np.floating):
        raise PacplanError(f"reward {short(reward)} ({type(reward).__name__}) is not a real "
                           "number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise PacplanError(f"reward {short(reward)} is not finite")
    return number


def checked_flag(value: Any, name: str) -> bool:
    """`terminated` or `truncated`: a boolean (numpy's included), never an array or 0/1."""
    scalar = _scalar(value)
    if not isinstance(scalar, bool | np.bool_):
        raise PacplanError(f"{name} {short(value)} ({type(value).__name__}) is not a bool")
    return bool(scalar)


def checked_info(info: Any) -> Mapping[str, Any]:
    """A step's `info`: a dict (Gymnasium's API)."""
    if not isinstance(info, Mapping):
        raise PacplanError(f"info {short(info)} ({type(info).__name__}) is not a dict")
    return info


def check_observation(obs: Any) -> None:
    """Refuse an observation with a NaN anywhere in it (a policy would act on garbage)."""
    if _has_nan(obs):
        raise PacplanError(f"observation {short(obs)} holds NaN")


def _has_nan(obs: Any) -> bool:
    if isinstance(obs, Mapping):
        return any(_has_nan(v) for v in obs.values())
    if isinstance(obs, tuple | list):
        return any(_has_nan(v) for v in obs)
    if isinstance(obs, float | np.floating):
        return bool(np.isnan(obs))
    if isinstance(obs, np.ndarray) and obs.dtype.kind in "fc":
        return bool(np.isnan(obs).any())
    return False


def success_value(info: Mapping[str, Any], key: str) -> bool:
    """Whether `info[key]` says success: True/False (numpy's too) or the numbers 1/0 (as
    Gymnasium-Robotics reports it); a missing key or any other value is an error."""
    if key not in info:
        keys = ", ".join(repr(k) for k in list(info)[:8]) or "none"
        raise PacplanError(f"the last step's info has no {key!r} entry (its keys: {keys}): "
                           "name the entry that says success with the success key")
    raw = info[key]
    value = _scalar(raw)
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, numbers.Real | np.integer | np.floating) and value in (0, 1):
        return bool(value == 1)
    raise PacplanError(f"info[{key!r}] is {short(raw)} ({type(raw).__name__}), not a success "
                       "flag (True/False or 1/0)")
