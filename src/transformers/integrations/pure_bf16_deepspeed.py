# Copyright 2026 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
Pure-bf16 training (`bf16_full_train=True`) under DeepSpeed ZeRO stages 1, 2 and 3.

DeepSpeed's ZeRO optimizers keep fp32 master weights, fp32 gradients and fp32 optimizer state by default (16 bytes per
parameter before sharding). Its `bf16` section has two switches that keep them in bf16 instead:
`bf16_master_weights_and_grads` (the flat master partition and its gradient are bf16) and `bf16_optimizer_states` (the
moments too; without it DeepSpeed requires its own CPU-offloaded Adam). Neither compensates rounding: DeepSpeed's own
optimizers then lose every update smaller than 2^-8 of a weight, exactly as plain pure bf16 does.

`bf16_full_train=True` with a DeepSpeed config:

- sets both switches (and, at stage 3, `stage3_gather_16bit_weights_on_model_save`, so the final save is a normal
  checkpoint), and refuses a config that turns them off, names DeepSpeed's own optimizer, enables fp16, runs ZeRO
  stage 0 or offloads to the CPU, with the reason and what works instead ([`check_deepspeed_config_for_bf16_full_train`]);
- leaves the optimizer to the `Trainer`, which hands ZeRO optimi's AdamW with Kahan summation (and the compensated
  weight decay of `integrations.optimi`) as a client optimizer (`zero_allow_untested_optimizer`). ZeRO then steps
  it on each rank's flat bf16 partition: optimi's update is elementwise, so the bf16 moments and the bf16 Kahan buffer
  live on that partition, sharded like the weights (about 2 + 8/N bytes per parameter at stage 1-2 on each of N
  ranks, 10/N at stage 3, plus the bf16 gradients DeepSpeed keeps);
- casts every trainable parameter to bf16: ZeRO flattens each parameter group into one buffer of one dtype and
  DeepSpeed casts the module to bf16 itself, so the fp32 embeddings and norms of a single-process run are bf16 here.

A DeepSpeed config with `bf16_master_weights_and_grads` but without `bf16_full_train` trains uncompensated pure bf16:
the `Trainer` warns, as it does for bf16 weights under any uncompensated optimizer ([`warn_if_uncompensated_deepspeed`]).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..utils import logging


logger = logging.get_logger(__name__)

#: DeepSpeed's `bf16` keys that keep ZeRO's master weights, gradients and optimizer state in bf16.
BF16_MASTER_KEY = "bf16_master_weights_and_grads"
BF16_STATES_KEY = "bf16_optimizer_states"
#: The ZeRO-3 key that makes `save_model` gather the 16-bit weights into a normal checkpoint.
GATHER_16BIT_KEY = "stage3_gather_16bit_weights_on_model_save"

#: The DeepSpeed releases this integration is tested with (the `trained-precision-testing` extra pins the same range).
DEEPSPEED_TESTED_VERSIONS = ">=0.19.8,<0.20"

_FIX = (
    "Remove it: with `bf16_full_train=True` the `Trainer` sets it and hands ZeRO optimi's AdamW with Kahan "
    "summation, whose bf16 moments and compensation buffer are sharded like the weights."
)
DEEPSPEED_OPTIMIZER_REFUSAL = (
    "`bf16_full_train=True` cannot use the optimizer of the DeepSpeed config ({name!r}): DeepSpeed's optimizers do "
    "not compensate rounding, so with bf16 master weights every update smaller than 2^-8 of a weight is rounded away "
    "(and without them ZeRO keeps fp32 master weights, which is mixed precision, not pure bf16). Remove the "
    "`optimizer` section: the `Trainer` then hands ZeRO optimi's AdamW with Kahan summation (`optim='adamw_optimi'`, "
    "`learning_rate`, `weight_decay` and `adam_beta1`/`adam_beta2` from the training arguments; a `scheduler` section "
    "may stay). To keep DeepSpeed's own optimizer, drop `bf16_full_train` (fp32 master weights)."
)
DEEPSPEED_STAGE_REFUSAL = (
    "`bf16_full_train=True` with DeepSpeed needs ZeRO stage 1, 2 or 3 (`zero_optimization.stage`), got {stage}: "
    "without ZeRO, DeepSpeed's bf16 optimizer keeps fp32 master weights and gradients. Set the stage to 1, 2 or 3, or "
    "train without DeepSpeed (DDP: `torchrun ... --bf16_full_train`)."
)
DEEPSPEED_FP16_REFUSAL = (
    "`bf16_full_train=True` trains bf16 weights and cannot run a DeepSpeed config with `fp16.enabled` true. Set "
    '`fp16.enabled` to false (or "auto"); `bf16` is enabled for you.'
)
DEEPSPEED_BF16_OFF_REFUSAL = (
    "`bf16_full_train=True` needs DeepSpeed's bf16 mode, but the DeepSpeed config sets `bf16.enabled` to {value!r}. "
    'Set it to true or "auto".'
)
DEEPSPEED_MASTER_OFF_REFUSAL = (
    "`bf16_full_train=True` keeps ZeRO's master weights, gradients and optimizer state in bf16, but the DeepSpeed "
    "config sets `bf16.{key}` to {value!r}: ZeRO would keep fp32 {what} (or, for `bf16_optimizer_states`, require its "
    "own CPU-offloaded Adam). " + _FIX
)
DEEPSPEED_OFFLOAD_REFUSAL = (
    "`bf16_full_train=True` does not support `zero_optimization.{key}` (device {device!r}): with bf16 master weights, "
    "ZeRO-Offload runs the update in DeepSpeed's own CPU Adam (`DeepSpeedCPUAdam`, which has no Kahan compensation) and "
    'refuses a client optimizer, so the compensated optimizer would be lost. Set its `device` to "none" (sharding '
    "alone keeps about 10/N bytes per parameter on each of N ranks at stage 3), or drop `bf16_full_train` to offload "
    "DeepSpeed's uncompensated bf16 training."
)
UNCOMPENSATED_DEEPSPEED_WARNING = (
    "The DeepSpeed config sets `bf16.bf16_master_weights_and_grads`: ZeRO trains bf16 master weights, and {optimizer} "
    "does not compensate rounding: any update smaller than 2^-8 (~0.39%) of a weight is rounded away, so training "
    "stalls as the learning rate decays. Set `bf16_full_train=True` (and remove the config's `optimizer` section): "
    "ZeRO then steps optimi's AdamW with Kahan summation on its bf16 partitions (+2 bytes per parameter, sharded)."
)


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"))


def _falsy(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"))


def deepspeed_config_dict(ds_config: Any) -> dict[str, Any] | None:
    """
    The dict of a DeepSpeed config as `TrainingArguments.deepspeed`, accelerate's `DeepSpeedPlugin` or
    `HfDeepSpeedConfig` hold it: a dict (returned as it is, so changes reach DeepSpeed), the path of a JSON file (read),
    or an object with a `.config` dict. `None` when there is none.
    """
    if ds_config is None:
        return None
    if isinstance(ds_config, dict):
        return ds_config
    if isinstance(ds_config, (str, os.PathLike)):
        with open(ds_config, encoding="utf-8") as f:
            return json.load(f)
    config = getattr(ds_config, "config", None)
    return config if isinstance(config, dict) else None


def _bf16_section(config: dict[str, Any]) -> dict[str, Any] | None:
    for key in ("bf16", "bfloat16"):  # DeepSpeed accepts both names
        if isinstance(config.get(key), dict):
            return config[key]
    return None


def check_deepspeed_config_for_bf16_full_train(config: dict[str, Any]) -> None:
    """
    Refuses, with the reason and what works, a DeepSpeed config that `bf16_full_train=True` cannot run as pure bf16
    with a compensated optimizer: an `optimizer` section (DeepSpeed's own optimizers are uncompensated), `fp16`,
    `bf16.enabled` false, ZeRO stage 0, `bf16_master_weights_and_grads` or `bf16_optimizer_states` set to false, or
    an `offload_optimizer`/`offload_param` device (ZeRO-Offload steps DeepSpeed's CPU Adam). Changes nothing.

    Args:
        config (`dict`): The DeepSpeed config.

    Raises:
        `ValueError`: naming the key, why it cannot work and the alternative.
    """
    if "optimizer" in config:
        section = config["optimizer"]
        name = section.get("type", "?") if isinstance(section, dict) else section
        raise ValueError(DEEPSPEED_OPTIMIZER_REFUSAL.format(name=name))
    fp16 = config.get("fp16")
    if isinstance(fp16, dict) and _truthy(fp16.get("enabled", False)):
        raise ValueError(DEEPSPEED_FP16_REFUSAL)
    bf16 = _bf16_section(config) or {}
    if _falsy(bf16.get("enabled", "auto")):
        raise ValueError(DEEPSPEED_BF16_OFF_REFUSAL.format(value=bf16.get("enabled")))
    for key, what in ((BF16_MASTER_KEY, "master weights and gradients"), (BF16_STATES_KEY, "optimizer state")):
        if _falsy(bf16.get(key, "unset")):
            raise ValueError(DEEPSPEED_MASTER_OFF_REFUSAL.format(key=key, value=bf16[key], what=what))
    zero = config.get("zero_optimization") or {}
    stage = zero.get("stage", 0)
    if str(stage) not in ("1", "2", "3"):
        raise ValueError(DEEPSPEED_STAGE_REFUSAL.format(stage=stage))
    for key in ("offload_optimizer", "offload_param"):
        section = zero.get(key)
        if isinstance(section, dict):
            device = str(section.get("device", "none")).lower()
            if device not in ("none", ""):
                raise ValueError(DEEPSPEED_OFFLOAD_REFUSAL.format(key=key, device=device))


def resolve_deepspeed_config_for_bf16_full_train(config: dict[str, Any]) -> list[str]:
    """
    Checks ([`check_deepspeed_config_for_bf16_full_train`]) and completes, in place, a DeepSpeed config for
    `bf16_full_train=True`: `bf16.enabled`, `bf16.bf16_master_weights_and_grads` and `bf16.bf16_optimizer_states`
    set to true, and at stage 3 `stage3_gather_16bit_weights_on_model_save` set to true unless the config says
    otherwise (the final `save_model` then gathers the bf16 weights into a normal checkpoint). The `Trainer` adds
    `zero_allow_untested_optimizer` itself when it hands ZeRO its optimizer.

    Args:
        config (`dict`): The DeepSpeed config, changed in place.

    Returns:
        `list[str]`: What was set, as `key=value` (empty when the config already said it all).
    """
    check_deepspeed_config_for_bf16_full_train(config)
    changes = []
    bf16 = _bf16_section(config)
    if bf16 is None:
        bf16 = config["bf16"] = {}
    for key in ("enabled", BF16_MASTER_KEY, BF16_STATES_KEY):
        if bf16.get(key) is not True:
            bf16[key] = True
            changes.append(f"bf16.{key}=true")
    zero = config["zero_optimization"]
    if str(zero.get("stage")) == "3" and zero.get(GATHER_16BIT_KEY, "auto") in ("auto", None):
        zero[GATHER_16BIT_KEY] = True
        changes.append(f"zero_optimization.{GATHER_16BIT_KEY}=true")
    return changes


def check_bf16_full_train_deepspeed_args(args: Any) -> None:
    """
    `TrainingArguments.__post_init__`: refuses a `deepspeed` config (a dict or a JSON path) that `bf16_full_train`
    cannot run, before DeepSpeed is set up. A config from `accelerate launch` is checked on the accelerate state
    ([`prepare_deepspeed_for_bf16_full_train`]).
    """
    config = deepspeed_config_dict(getattr(args, "deepspeed", None))
    if config is not None:
        check_deepspeed_config_for_bf16_full_train(config)


def deepspeed_plugin_of(accelerator: Any) -> Any:
    """The accelerate DeepSpeed plugin of a resolved accelerator state, or `None`."""
    return getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)


def _plugin_configs(plugin: Any) -> list[dict[str, Any]]:
    """The config dicts DeepSpeed will read: the plugin's and its `HfDeepSpeedConfig`'s (usually one object)."""
    configs = []
    for candidate in (getattr(plugin, "deepspeed_config", None), getattr(plugin, "hf_ds_config", None)):
        config = deepspeed_config_dict(candidate) if not isinstance(candidate, (str, os.PathLike)) else None
        if config is not None and all(config is not seen for seen in configs):
            configs.append(config)
    return configs


def prepare_deepspeed_for_bf16_full_train(accelerator: Any) -> list[str]:
    """
    The `Trainer`'s DeepSpeed step of `bf16_full_train`, on the resolved accelerate state (which also knows `accelerate
    launch` configs): checks the DeepSpeed config and completes it in place
    ([`resolve_deepspeed_config_for_bf16_full_train`]) before DeepSpeed reads it, logging what was set.

    Returns:
        `list[str]`: What was set (empty without a DeepSpeed plugin).
    """
    plugin = deepspeed_plugin_of(accelerator)
    if plugin is None:
        return []
    changes: list[str] = []
    for config in _plugin_configs(plugin):
        changes = resolve_deepspeed_config_for_bf16_full_train(config) or changes
    if changes and getattr(accelerator, "is_main_process", True):
        logger.info(
            f"bf16_full_train with DeepSpeed: set {', '.join(changes)} (bf16 master weights, gradients and optimizer "
            "state, sharded by ZeRO; the Trainer's optimi AdamW with Kahan summation steps them)."
        )
    return changes


def warn_if_uncompensated_deepspeed(args: Any, accelerator: Any, compensated: bool = False) -> str | None:
    """
    Warns once, on the main process, when a DeepSpeed config trains bf16 master weights
    (`bf16.bf16_master_weights_and_grads`) without `bf16_full_train`: no optimizer DeepSpeed runs there compensates
    rounding. The warning gives the fix (`bf16_full_train=True`).

    Args:
        args (`TrainingArguments`): the run's arguments.
        accelerator (`Accelerator`): the run's accelerator, whose DeepSpeed plugin holds the resolved config.
        compensated (`bool`, *optional*, defaults to `False`): whether the Trainer's own optimizer compensates rounding
            (the optimi optimizers, which step bf16 partitions with Kahan summation).

    Returns:
        `str` or `None`: The message (also on the other ranks, which do not log it).
    """
    if getattr(args, "bf16_full_train", False):
        return None
    plugin = deepspeed_plugin_of(accelerator)
    configs = _plugin_configs(plugin) if plugin is not None else []
    if not configs:
        return None
    config = configs[0]
    bf16 = _bf16_section(config) or {}
    if not (_truthy(bf16.get("enabled", False)) and _truthy(bf16.get(BF16_MASTER_KEY, False))):
        return None
    section = config.get("optimizer")
    if isinstance(section, dict):
        optimizer = f"DeepSpeed's {section.get('type', 'optimizer')} (the config's `optimizer`)"
    else:
        optimizer = f"the Trainer's optimizer (`optim={getattr(args.optim, 'value', args.optim)!r}`)"
        if compensated:
            return None  # optimi compensates on bf16 partitions too
    message = UNCOMPENSATED_DEEPSPEED_WARNING.format(optimizer=optimizer)
    if getattr(accelerator, "is_main_process", True):
        logger.warning_once(message)
    return message
