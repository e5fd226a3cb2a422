"""The capture API: standard values from any forward pass of a covered model.

    with atlas.trace(model) as t:
        model(ids)
    t.layers[1].mlp.routed_output      # (batch, seq, hidden_size)
    t.logits

It never edits transformers' source. It uses three public mechanisms:
- forward hooks on the modules the resolver (``atlas.model.resolver``) places values at;
- an attention function registered under a name of its own in transformers' ``AttentionInterface``
  and, with the mask function of the model's own implementation, in ``AttentionMaskInterface`` (a
  name missing there makes the model build no causal mask at all). The function hands every call on
  to the model's own implementation and keeps its arguments and results; under eager attention it
  also keeps the input of the softmax (the masked scores);
- an experts function registered in ``ExpertsInterface`` that hands every call on to the model's own
  experts implementation; under eager experts it also runs transformers' batched experts code one
  routing slot at a time to keep each slot's weighted output.

Values a run cannot see (the scores under sdpa, a mixture value on a dense block) are not guessed:
asking for one raises ``MissingValue`` with the reason.
"""

from __future__ import annotations

import inspect
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from atlas import errors
from atlas.model.introspect import num_blocks
from atlas.model.kept_calls import inline_score_hooks, sigmoid_hooks, softmax_inputs
from atlas.model.reads import DELTA_RULE_ARGS, Read
from atlas.model.resolver import Placement, Resolution, mark_parallel, resolve
from atlas.model.vocabulary import ALIASES, BY_NAME

TRACE_NAME = "atlas_trace"  # the implementation name registered while a trace is active


class MissingValue(AttributeError):
    """A standard value this run did not capture, with the reason."""


class Host:
    """The values of one host (the model, a block, its attention or its MLP) as attributes."""

    def __init__(self, trace: "Trace", host: str, index: int | None):
        self._trace, self._host, self._index = trace, host, index

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        name = ALIASES.get(name, name)
        if name not in BY_NAME or BY_NAME[name].host != self._host:
            raise AttributeError(f"{self._label()} has no standard value {name!r}")
        return self._trace.value(name, self._index)

    def _label(self) -> str:
        return self._host.replace("[i]", f"[{self._index}]") if self._index is not None else self._host


class Block(Host):
    def __init__(self, trace: "Trace", index: int):
        super().__init__(trace, "layers[i]", index)
        self.self_attn = Host(trace, "layers[i].self_attn", index)
        self.mlp = Host(trace, "layers[i].mlp", index)
        self.ssm = Host(trace, "layers[i].ssm", index)


class Trace(Host):
    """What one traced forward pass captured, by standard name."""

    def __init__(self, resolution: Resolution, implementations: dict[str, str | None]):
        super().__init__(self, "model", None)
        self.resolution = resolution
        self.implementations = implementations  # {"attention": "sdpa", "experts": "grouped_mm"}
        self.captured: dict[tuple[str, int | None], Any] = {}
        self.layers = [Block(self, i) for i in range(len(resolution.blocks))]
        self.parallel: list[int] = []  # blocks measured parallel on this run (see settle_parallel)

    def value(self, name: str, index: int | None = None):
        placement = self.resolution.at(name, index)
        where = f"layers[{index}]" if index is not None else "model"
        if placement.read is None:
            raise MissingValue(f"{where} has no {name}: {placement.missing}")
        if (name, index) not in self.captured:
            raise MissingValue(f"{where}.{name} was not captured on this run{self.missing_reason(placement)}")
        return self.captured[(name, index)]

    def missing_reason(self, placement: Placement) -> str:
        knob = placement.needs_eager
        if knob and self.implementations.get(knob) != "eager":
            setting = {"attention": "attn_implementation", "experts": "experts_implementation"}[knob]
            return f": it needs {setting}=\"eager\" (this run used {self.implementations.get(knob)!r})"
        return ""

    def has(self, name: str, index: int | None = None) -> bool:
        return (ALIASES.get(name, name), index) in self.captured


# --- the mechanisms ---------------------------------------------------------------------------------


def call_argument(module, args: tuple, kwargs: dict, position: int):
    """The ``position``-th argument of a call, whether it was passed by position or by name."""
    if position < len(args):
        return args[position]
    names = [n for n in inspect.signature(module.forward).parameters if n != "self"]
    return kwargs.get(names[position]) if position < len(names) else None


def pick(value, element: int | None):
    if element is None:
        return value
    if isinstance(value, (tuple, list)) or hasattr(value, "to_tuple"):  # a shorter tuple than the place: not there
        return value[element] if not isinstance(value, (tuple, list)) or element < len(value) else None
    return value if element == 0 else None  # a block that returns a plain tensor: element 0 is it


def _keep(tensor):
    return tensor.detach().clone() if hasattr(tensor, "detach") else tensor


class _Capture:
    """The state hooks and registered functions write into while a trace is active."""

    def __init__(self, model, trace: Trace):
        self.model, self.trace = model, trace
        self.batch_seq: tuple[int, int] | None = None
        self.attention_index: dict[int, int] = {}  # id(attention module) -> block index
        self.experts_index: dict[int, int] = {}  # id(experts module) -> block index
        self.linear_index: dict[int, int] = {}  # id(linear-attention mixer) -> block index
        self.mixing: int | None = None  # the block whose linear-attention mixer is running now
        self.calls: dict[int, int] = {}  # id(module) -> its calls in the forward running now (a read of the first call)

    def store(self, name: str, index: int | None, tensor) -> None:
        if tensor is not None:
            self.trace.captured[(name, index)] = _keep(tensor)

    def shaped(self, read: Read, tensor, module=None):
        """The tensor in its layout: rows unflattened to (batch, seq), the last axis split by head."""
        if tensor is None or not hasattr(tensor, "shape"):
            return tensor
        if read.sum_experts and self.batch_seq and tensor.shape[0] % (self.batch_seq[0] * self.batch_seq[1]) == 0:
            tensor = tensor.unflatten(0, (-1, self.batch_seq[0] * self.batch_seq[1])).sum(0)
        if read.flatten_tokens and self.batch_seq and tensor.shape[0] == self.batch_seq[0] * self.batch_seq[1]:
            tensor = tensor.unflatten(0, self.batch_seq)
        if read.split_heads and module is not None:
            tensor = tensor.unflatten(-1, (num_heads(module), -1))
        return tensor

    # forward hooks ------------------------------------------------------------------------------

    def root_pre_hook(self, module, args, kwargs):
        ids = call_argument(module, args, kwargs, 0)
        embeds = kwargs.get("inputs_embeds")
        shape = tuple(ids.shape) if ids is not None else tuple(embeds.shape[:2])
        self.batch_seq = (int(shape[0]), int(shape[1]))
        self.store("input_ids", None, ids)
        self.store("attention_mask", None, kwargs.get("attention_mask", call_argument(module, args, kwargs, 1)))
        self.trace.captured[("input_size", None)] = self.batch_seq

    def module_hook(self, reads: list[tuple[str, int | None, Read, Any]]):
        def hook(module, args, kwargs, output):
            calls = self.calls[id(module)] = self.calls.get(id(module), 0) + 1
            for name, index, read, host_module in (r for r in reads if not (r[2].first_call and calls > 1)):
                if read.kind == "input":
                    tensor = call_argument(module, args, kwargs, read.element or 0)
                else:
                    tensor = pick(output, read.element)
                self.store(name, index, self.shaped(read, tensor, host_module))
            if module is self.model:
                self.calls.clear()  # the forward has ended: the next one's first calls are first again
                logits = self.trace.captured.get(("logits", None))
                if logits is not None:
                    import torch

                    self.store("next_token_probs", None, torch.softmax(logits[:, -1].float(), dim=-1))

        return hook

    def shared_module_hook(self, reads_by_call: list[list[tuple[str, int | None, Read, Any]]]):
        """The hook of one module object called at several paths, once each in a forward: each call's reads
        are its path's (the k-th call, the k-th path in block order)."""
        hooks = [self.module_hook(reads) for reads in reads_by_call]
        done = {"calls": 0}

        def hook(module, args, kwargs, output):
            call = done["calls"] % len(hooks)
            done["calls"] += 1
            self.calls[id(module)] = 0  # each path's read is of its own (first) call
            hooks[call](module, args, kwargs, output)

        return hook

    # the registered attention function -------------------------------------------------------

    def attention(self, original: str | None):
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        def traced_attention(module, query, key, value, attention_mask, *args, **kwargs):
            index = self.attention_index.get(id(module))
            eager = original in (None, "eager")
            implementation = (
                eager_attention_function(module) if eager else ALL_ATTENTION_FUNCTIONS.get_interface(original, None)
            )
            attention_mask = _selected_positions_mask(module, query, key, attention_mask, kwargs, original)
            if index is None:  # an attention the resolver did not place (a vision tower, say)
                return implementation(module, query, key, value, attention_mask, *args, **kwargs)
            self.store("attention_queries", index, query)
            self.store("attention_keys", index, key)
            self.store("attention_values", index, value)
            if eager:
                with softmax_inputs() as scores:
                    result = implementation(module, query, key, value, attention_mask, *args, **kwargs)
                self.store("attention_scores", index, _without_sink(module, key, scores[0]) if scores else None)
            else:
                result = implementation(module, query, key, value, attention_mask, *args, **kwargs)
            self.store("attention_head_outputs", index, result[0])
            self.store("attention_probabilities", index, result[1])
            return result

        return traced_attention

    # the delta-rule functions of linear-attention mixers -------------------------------------

    def mixer_pre_hook(self, module, args, kwargs):
        self.mixing = self.linear_index.get(id(module))

    def mixer_hook(self, module, args, kwargs, output):
        self.mixing = None

    def delta_rule(self, original):
        def traced_delta_rule(*args, **kwargs):
            result = original(*args, **kwargs)
            index = self.mixing
            if index is not None:
                for element, name in enumerate(DELTA_RULE_ARGS):
                    value = args[element] if element < len(args) else kwargs.get(name)
                    stored = LINEAR_ARGS[element]
                    if stored == "linear_attention_decay" and self.trace.resolution.roles.blocks[index].channel_decay:
                        stored = "linear_attention_channel_decay"
                    self.store(stored, index, value)
                self.store("linear_attention_head_outputs", index, result[0])
                self.store("linear_attention_state", index, result[1])
            return result

        traced_delta_rule.__wrapped__ = original
        return traced_delta_rule

    # the registered experts function -----------------------------------------------------------

    def experts(self, original: str | None):
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS, batched_mm_experts_forward

        def traced_experts(module, hidden_states, top_k_index, top_k_weights, *args, **kwargs):
            eager = original in (None, "eager")
            own = inspect.unwrap(type(module).forward)  # the class's own loop over experts
            implementation = own if eager else ALL_EXPERTS_FUNCTIONS.get_interface(original, own)
            result = implementation(module, hidden_states, top_k_index, top_k_weights, *args, **kwargs)
            index = self.experts_index.get(id(module))
            if eager and index is not None:
                import torch

                # transformers' batched experts code, one routing slot at a time: slot k's weighted output
                slots = [
                    batched_mm_experts_forward(module, hidden_states, top_k_index[:, k : k + 1], top_k_weights[:, k : k + 1])
                    for k in range(top_k_index.shape[-1])
                ]
                stacked = torch.stack(slots, dim=1)  # (tokens, top_k, hidden)
                self.store("expert_outputs", index, self.shaped(Read("expert_slots", flatten_tokens=True), stacked))
            return result

        return traced_experts

    def own_experts_hook(self, index: int):
        """For an experts module whose class runs its own loop, never dispatched through transformers'
        experts functions (LongCat-Flash's, with its zero-computation experts): each routing slot's
        weighted output, by calling the class's own forward with every other slot's weight set to zero."""

        def hook(module, args, kwargs, output):
            import torch

            hidden_states, top_k_index, top_k_weights = (list(args) + [kwargs.get(k) for k in ("hidden_states", "top_k_index", "top_k_weights")][len(args):])[:3]
            if top_k_index is None or top_k_weights is None:  # dense dispatch (Llama 4): every expert on every row, no slots
                return
            own = type(module).forward
            with torch.no_grad():
                # every slot's weight but slot k's set to zero: what is left is slot k's weighted output
                only = lambda k: torch.zeros_like(top_k_weights).index_copy(1, torch.tensor([k]), top_k_weights[:, k : k + 1])
                slots = [own(module, hidden_states, top_k_index, only(k)).reshape(-1, hidden_states.shape[-1]) for k in range(top_k_index.shape[-1])]
            self.store("expert_outputs", index, self.shaped(Read("expert_slots", flatten_tokens=True), torch.stack(slots, dim=1)))

        return hook


def _selected_positions_mask(module, query, key, attention_mask, kwargs, original):
    """A sparse attention (DeepSeek Sparse Attention) hands a function it does not know as eager or sdpa
    the positions its indexer chose (``indices``, (batch, query, kept)) instead of folding them into the
    mask. Under eager or sdpa, transformers masks every other position itself; the traced function does
    the same, so the traced run computes what the untraced one does."""
    indices = kwargs.pop("indices", None)
    if indices is None or original not in (None, "eager", "sdpa") or attention_mask is None:
        return attention_mask
    import torch

    batch, positions = query.shape[0], query.shape[-2]
    dropped = torch.ones((batch, positions, key.shape[-2]), dtype=torch.bool, device=query.device)
    dropped = dropped.scatter(-1, indices.long(), False).unsqueeze(1)
    if attention_mask.dtype == torch.bool:
        return attention_mask & ~dropped
    return attention_mask.masked_fill(dropped, torch.finfo(query.dtype).min)


def _masked_scores_probe(mask, keep):
    """``mask`` as a tensor that reports what it is added to (or fills): an indexer adds the causal mask
    to its scores just before it ranks them, so the sum it reports is the scores the top-k reads."""
    import torch

    class Probe(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            with torch._C.DisableTorchFunctionSubclass():
                result = func(*args, **(kwargs or {}))
            if func in (torch.Tensor.__invert__, torch.Tensor.logical_not, torch.logical_not):
                return result.as_subclass(Probe)  # a boolean mask turned into what is filled
            if func in (torch.Tensor.__add__, torch.Tensor.__radd__, torch.Tensor.add, torch.add, torch.Tensor.masked_fill):
                keep(result)
            return result

    return mask.as_subclass(Probe)


def _indexer_score_hooks(capture: "_Capture", module, index: int) -> list:
    """A hook that hands the indexer its causal mask as a probe, so the masked scores it ranks are kept."""
    params = [p for p in inspect.signature(module.forward).parameters if p != "self"]
    at = params.index("attention_mask") if "attention_mask" in params else None

    def before(m, args, kwargs):
        keep = lambda scores: capture.store("indexer_scores", index, scores)  # noqa: E731
        if "attention_mask" in kwargs and kwargs["attention_mask"] is not None:
            return args, {**kwargs, "attention_mask": _masked_scores_probe(kwargs["attention_mask"], keep)}
        if at is not None and at < len(args) and args[at] is not None:
            return (*args[:at], _masked_scores_probe(args[at], keep), *args[at + 1:]), kwargs
        return None

    return [module.register_forward_pre_hook(before, with_kwargs=True)]


LINEAR_ARGS = ("linear_attention_queries", "linear_attention_keys", "linear_attention_values",
               "linear_attention_decay", "linear_attention_beta")


def delta_rule_functions(mixer) -> dict[str, Any]:
    """The functions of the mixer's own modeling file that take the delta rule's arguments (query,
    key, value, g, beta, in that order): those its forward hands the recurrence to, by signature."""
    found = {}
    for name, fn in vars(sys.modules[type(mixer).__module__]).items():
        if not callable(fn) or isinstance(fn, type):
            continue
        try:
            params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            continue
        if tuple(params[: len(DELTA_RULE_ARGS)]) == DELTA_RULE_ARGS:
            found[name] = fn
    return found


HEAD_COUNT_NAMES = ("num_heads", "num_attention_heads", "n_heads", "n_head")  # MPT's n_heads, GPT-1's n_head
CONFIG_HEAD_COUNT_NAMES = ("num_attention_heads", "n_heads", "n_head", "num_heads")  # own field first: LFM2 keeps a stray num_heads


def num_heads(attention) -> int:
    """The attention's query heads, as the module or its config names them (MiniMax's, MPT's, GPT-1's: no config)."""
    for holder, names in ((attention, HEAD_COUNT_NAMES), (getattr(attention, "config", None), CONFIG_HEAD_COUNT_NAMES)):
        for name in names:
            n = getattr(holder, name, None)
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                return n
    raise errors.AtlasError(f"transformers' {type(attention).__name__}", None,
                     f"holds its head count under none of {', '.join(HEAD_COUNT_NAMES)}, nor has a config that does: "
                     "add its name to HEAD_COUNT_NAMES in atlas/model/trace.py")


def eager_attention_function(attention):
    """The eager attention function of the attention's own modeling file (every family defines one)."""
    return sys.modules[type(attention).__module__].eager_attention_forward


def _without_sink(module, key, softmax_input):
    """The masked scores, where attention sinks (gpt-oss) join the softmax as one more column.

    There the softmax input is [scores, sink] minus each row's max m. The sink logit s is the module's
    own parameter, so m = s - last column, and the scores are the other columns plus m.
    """
    sinks = getattr(module, "sinks", None)
    if sinks is None or softmax_input.shape[-1] != key.shape[-2] + 1:
        return softmax_input
    row_max = sinks.reshape(1, -1, 1, 1).to(softmax_input.dtype) - softmax_input[..., -1:]  # (B, nh, T, 1)
    return softmax_input[..., :-1] + row_max


def family_overrides(model) -> Mapping[str, str]:
    """The overrides a covered family declares for this model's class (the first family, by name)."""
    from atlas import families

    for name in families.names():
        family = families.load(name)
        if family.model_class == type(model).__name__:
            return family.standard_overrides
    return {}


def settle_parallel(result: Trace) -> None:
    """Blocks whose MLP side read the block's input (its own norm's input is the block's input, or it
    reads the attention's normed input) run their sublayers side by side: measured on the run, the
    value read as layer_mid there is no stream between the sublayers, so it is dropped and marked missing."""
    import torch

    found = []
    for i in range(len(result.layers)):
        mid = result.captured.get(("layer_mid", i))
        if not hasattr(mid, "shape"):
            continue
        for other in ("layer_input", "attention_norm_output"):
            ref = result.captured.get((other, i))
            if hasattr(ref, "shape") and ref.shape == mid.shape and torch.equal(ref, mid):
                found.append(i)
                break
    for i in found:
        del result.captured[("layer_mid", i)]
    mark_parallel(result.resolution, found)
    result.parallel = found


_ACTIVE: list[Trace] = []


@contextmanager
def trace(model, overrides: Mapping[str, str] | None = None) -> Iterator[Trace]:
    """Capture every standard value of the forward pass run inside the block (the last one, if several).

    ``overrides`` replaces the family's declared overrides ({"routed_output": "shared_experts.output"});
    by default they come from the covered family whose model class this is.
    """
    from transformers import AttentionInterface
    from transformers.integrations.moe import ExpertsInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if _ACTIVE:
        raise RuntimeError("atlas.model.trace blocks do not nest")
    config = model.config
    layers = num_blocks(config.get_text_config())  # a wrapper (vision + text) counts its text blocks
    resolution = resolve(model, layers, family_overrides(model) if overrides is None else overrides)
    import torch

    has_experts = any(b.experts for b in resolution.roles.blocks) or any(  # experts beside the MLP (Gemma 4's 26B-A4B)
        isinstance(getattr(m, "gate_up_proj", None), torch.Tensor) and m.gate_up_proj.dim() == 3 for m in model.modules())
    implementations = {
        "attention": config._attn_implementation,
        "experts": getattr(config, "_experts_implementation", None) if has_experts else None,
    }
    result = Trace(resolution, implementations)
    capture = _Capture(model, result)

    reads: dict[str, list] = {}
    sigmoids: dict[str, list] = {}  # module path -> (name, block index, which sigmoid) kept inside its forward
    for index, placements in [(None, resolution.model)] + list(enumerate(resolution.blocks)):
        for p in placements:
            if p.read is not None and p.read.kind == "gate_sigmoids":
                sigmoids.setdefault(p.module, []).append((p.value.name, index, p.read.element))
            if p.read is None or p.read.kind not in ("input", "output"):
                continue
            host_module = model.get_submodule(p.module.rpartition(".")[0]) if p.read.split_heads else None
            reads.setdefault(p.module, []).append((p.value.name, index, p.read, host_module))
    inline_scores = []  # (attention module, block index) whose eager softmax input is kept by hooks
    for index, block in enumerate(resolution.roles.blocks):
        prefix = f"{resolution.roles.block_list}.{index}"
        if block.attention:
            capture.attention_index[id(model.get_submodule(f"{prefix}.{block.attention}"))] = index
            if block.attention_inline and implementations["attention"] == "eager":
                inline_scores.append((model.get_submodule(f"{prefix}.{block.attention}"), index))
        if block.linear_attention:
            capture.linear_index[id(model.get_submodule(f"{prefix}.{block.attention}"))] = index
        if block.experts:
            capture.experts_index[id(model.get_submodule(f"{prefix}.{block.mlp}.{block.experts}"))] = index

    handles = [model.register_forward_pre_hook(capture.root_pre_hook, with_kwargs=True)]
    for index, block in enumerate(resolution.roles.blocks):  # experts never dispatched through ExpertsInterface (DBRX's, LongCat-Flash's)
        experts = model.get_submodule(f"{resolution.roles.block_list}.{index}.{block.mlp}.{block.experts}") if block.experts else None
        if experts is not None and not hasattr(type(experts).forward, "__wrapped__"):
            handles.append(experts.register_forward_hook(capture.own_experts_hook(index), with_kwargs=True))
    for module, index in inline_scores:
        handles += inline_score_hooks(capture, module, index)
    for path in sorted(sigmoids):
        handles += sigmoid_hooks(capture, model.get_submodule(path), sigmoids[path])
    for index, block in enumerate(resolution.roles.blocks):
        if block.attention and block.indexer:
            indexer = model.get_submodule(f"{resolution.roles.block_list}.{index}.{block.attention}.{block.indexer}")
            handles += _indexer_score_hooks(capture, indexer, index)
    # one module object may stand at several paths (GPT-1's blocks share one GELU instance): its calls in a
    # forward are then the paths' calls in block order, so its k-th call is read for the k-th path
    at_paths: dict[int, tuple[Any, list[str]]] = {}
    for path in sorted(reads):
        module = model.get_submodule(path)
        at_paths.setdefault(id(module), (module, []))[1].append(path)
    for module, paths in at_paths.values():
        if len(paths) == 1:
            handles.append(module.register_forward_hook(capture.module_hook(reads[paths[0]]), with_kwargs=True))
        else:
            in_order = sorted(paths, key=lambda p: min((r[1] for r in reads[p] if r[1] is not None), default=-1))
            handles.append(module.register_forward_hook(capture.shared_module_hook([reads[p] for p in in_order]), with_kwargs=True))
    wrapped: list[tuple[Any, str, Any]] = []  # (modeling module, name, original function)
    for index in sorted(set(capture.linear_index.values())):
        mixer = model.get_submodule(f"{resolution.roles.block_list}.{index}.{resolution.roles.blocks[index].attention}")
        handles.append(mixer.register_forward_pre_hook(capture.mixer_pre_hook, with_kwargs=True))
        handles.append(mixer.register_forward_hook(capture.mixer_hook, with_kwargs=True))
        home = sys.modules[type(mixer).__module__]
        for name, fn in delta_rule_functions(mixer).items():
            if not any(h is home and n == name for h, n, _ in wrapped):
                wrapped.append((home, name, fn))
                setattr(home, name, capture.delta_rule(fn))
    AttentionInterface._global_mapping[TRACE_NAME] = capture.attention(implementations["attention"])
    mask = ALL_MASK_ATTENTION_FUNCTIONS._global_mapping.get(implementations["attention"] or "eager")
    if mask is not None:
        AttentionMaskInterface._global_mapping[TRACE_NAME] = mask
    ExpertsInterface._global_mapping[TRACE_NAME] = capture.experts(implementations["experts"])
    _ACTIVE.append(result)
    switchable = type(model)._can_set_attn_implementation()  # False where attention is computed inline (Falcon)
    try:
        if switchable:
            model.set_attn_implementation(TRACE_NAME)
        if has_experts:
            model.set_experts_implementation(TRACE_NAME)
        yield result
        settle_parallel(result)
    finally:
        if switchable:
            model.set_attn_implementation(implementations["attention"])
        if has_experts:
            model.set_experts_implementation(implementations["experts"])
        for handle in handles:
            handle.remove()
        for home, name, fn in wrapped:
            setattr(home, name, fn)
        for mapping in (AttentionInterface._global_mapping, AttentionMaskInterface._global_mapping, ExpertsInterface._global_mapping):
            mapping.pop(TRACE_NAME, None)
        _ACTIVE.clear()
