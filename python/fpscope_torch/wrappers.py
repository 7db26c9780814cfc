"""Modules that wrap others inside a model -- FSDP1's FullyShardedDataParallel units and activation
checkpointing's CheckpointWrapper -- and what they mean for the log: the names of the modules and
parameters they wrap, as the model itself names them, and how FSDP1 holds each parameter on a
rank. (A model compiled whole is recorded through its `_orig_mod`: recorder._unwrapped; a
submodule compiled inside it keeps torch's `_orig_mod` in its names, as its state_dict does.)

FSDP1 (FullyShardedDataParallel, not FSDP2's fully_shard) keeps each unit's parameters as one
flat tensor, sharded over the ranks. With use_orig_params=True each parameter is a view of this
rank's piece of it (possibly empty), between steps and in its gradient: the pieces' histograms
summed over the ranks are the whole tensor's. With use_orig_params=False the parameters are the
flat shards themselves, whose pieces this module cannot name without FSDP's private layout;
under hybrid sharding the pieces of one shard group would be summed with the other groups'
copies. Those are left out of the weights' records, and a warning says so."""

import sys
import warnings

import torch

# The attribute each wrapper holds its module in: left out of names, as the model names them.
_WRAPPED_AS = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module")


def fsdp1_type():
    """FullyShardedDataParallel, where the program imported it (a model can be wrapped by it only
    then), else None: importing torch.distributed.fsdp here would cost every user a third of a
    second."""
    fsdp = sys.modules.get("torch.distributed.fsdp")
    return getattr(fsdp, "FullyShardedDataParallel", None)


def is_fsdp1(module):
    cls = fsdp1_type()
    return cls is not None and isinstance(module, cls)


def model_name(name):
    """A module's or parameter's name as the model itself gives it: without the wrappers' own
    attributes ("blocks.0._fsdp_wrapped_module.fc.weight" -> "blocks.0.fc.weight")."""
    return ".".join(part for part in name.split(".") if part not in _WRAPPED_AS)


def is_wrapper(module):
    """Whether `module` only wraps another (named as that one): its outputs are the wrapped one's."""
    return any(isinstance(getattr(module, attribute, None), torch.nn.Module) for attribute in _WRAPPED_AS)


def fsdp1_holdings(model):
    """{id(parameter): "sharded"} for the parameters FSDP1 shards over all the ranks (their
    records are summed over the ranks), and {id(parameter): why} for those left out, each unit's
    innermost FSDP1 module deciding; a parameter FSDP1 flattened whose unit is not in `model` (the
    module inside the root FSDP given) is left out. Parameters outside FSDP1 are in neither."""
    if fsdp1_type() is None:
        return {}, {}
    from torch.distributed.fsdp import ShardingStrategy
    sharded, left_out, in_a_unit = {}, {}, set()
    for module in model.modules():  # outer units first: an inner one decides for its own
        if not is_fsdp1(module):
            continue
        strategy = module.sharding_strategy
        for parameter in module.parameters():
            key = id(parameter)
            in_a_unit.add(key)
            sharded.pop(key, None)
            left_out.pop(key, None)
            if getattr(parameter, "_is_flat_param", False):
                left_out[key] = "use_orig_params=False: FSDP holds them as flat shards (use_orig_params=True records each parameter)"
            elif strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP):
                sharded[key] = "sharded"
            elif strategy != ShardingStrategy.NO_SHARD:
                left_out[key] = f"{strategy.name}: a shard group's pieces would be summed with the other groups' copies"
    for parameter in model.parameters():  # FSDP1's, of a unit outside `model`: how it is held is not known here
        if getattr(parameter, "_fsdp_flattened", False) and id(parameter) not in in_a_unit:
            left_out[id(parameter)] = "its unit outside the model given (give the Recorder the FSDP-wrapped model)"
    return sharded, left_out


def warn_left_out(names_and_reasons):
    """One warning naming the parameters FSDP1 holds in a way their records cannot be whole."""
    by_reason = {}
    for name, why in names_and_reasons:
        by_reason.setdefault(why, []).append(name)
    for why, names in by_reason.items():
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        warnings.warn(f"fpscope_torch: the weights and weight gradients of {shown} are not recorded under FSDP with {why}",
                      RuntimeWarning, stacklevel=3)
