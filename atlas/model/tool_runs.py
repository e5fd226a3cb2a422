"""The tools' accesses checked on the preview run: facts["tools"].

The tiny preview model is copied once per library (TransformerLens switches a model to eager attention in
place, and no library may change the model the proof and the cost read), loaded through the library,
and run on the preview's prompt; every access (``atlas.model.tools``) is read at every block where the
atlas's own capture holds the value, and must give the same tensor: the same shape, and equal within a
float tolerance (integers exactly).

- An access that raises, or gives a tensor of another shape, does not reach the value: the facts keep
  the library's own message (or the two shapes), and the page says so.
- An nnsight access is derived from the atlas's own read of the value: one that gives a tensor of the
  right shape but other numbers is a wrong access (the next block's output, the input instead of the
  output), and the build stops, naming the family, the value and the library.
- nnterp's and TransformerLens's accesses are those libraries' own names for the value: where one gives
  other numbers on a family (its adapter reads another point of the model), it does not reach the
  value there, and the page says by how much they differ; but the residual stream and the logits
  (RESIDUAL_STREAM) mean the same in every library, so a wrong read of them stops the build too.
- A library that cannot load the family at all says so once, with its message.

The libraries are imported here, inside the functions that run them: they are slow to import and only
collect needs them.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import logging
import re
import warnings
from typing import Any

from atlas.errors import AtlasError
from atlas.model import tools
from atlas.model.preview import PreviewRun
from atlas.model.tools import Access, Seen

ATOL = 1e-4  # the libraries run the very model on the very prompt: only float rounding may differ
RTOL = 1e-4


class NotReached(Exception):
    """An access that does not reach the value: the library's message (``quoted``), or the atlas's words."""

    def __init__(self, text: str, quoted: bool = False):
        super().__init__(text)
        self.quoted = quoted


def tools_facts(run: PreviewRun, family_name: str) -> dict[str, Any]:
    """facts["tools"]: each library's version and whether it loads the family, and per value, the accesses
    that reach it (checked at every block the run captured it at) or why none does."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with _quiet():
            libraries: dict[str, dict[str, Any]] = {}
            values: dict[str, dict[str, Any]] = {}
            seen = seen_modules(copy.deepcopy(run.model), run)
            for library in tools.LIBRARIES:
                loaded, message = _load(library, run)
                libraries[library] = {"title": tools.TITLES[library], "version": _version(library),
                                      "loads": loaded is not None, "message": message}
                for name, entry in _check_library(library, loaded, message, run, family_name, seen).items():
                    values.setdefault(name, {})[library] = entry
    finally:
        torch.set_num_threads(threads)
    return {"libraries": libraries, "values": dict(sorted(values.items()))}


# --- what the run holds ----------------------------------------------------------------------------


def captured_values(run: PreviewRun) -> dict[str, list[int | None]]:
    """Every value the atlas's eager capture holds: name -> the blocks it holds it at (None: the model's)."""
    found: dict[str, list[int | None]] = {}
    for (name, index) in run.eager.captured:
        found.setdefault(name, []).append(index)
    return {name: sorted(indices, key=lambda i: -1 if i is None else i) for name, indices in found.items()}


def seen_modules(model, run: PreviewRun) -> dict[str, Seen]:
    """How each module the resolver reads at returned and was called, on one plain forward pass of ``model``."""
    import inspect

    import torch

    paths = {""} | {p.module for placements in [run.eager.resolution.model] + run.eager.resolution.blocks
                    for p in placements if p.read is not None and p.module is not None}
    seen: dict[str, Seen] = {}
    handles = []
    for path in sorted(paths):
        try:
            module = model.get_submodule(path)
        except AttributeError:
            continue
        parameters = tuple(n for n in inspect.signature(module.forward).parameters if n != "self")

        def hook(m, args, kwargs, output, path=path, parameters=parameters):
            if path in seen:
                seen[path] = dataclasses.replace(seen[path], calls=seen[path].calls + 1)
                return
            if isinstance(output, (tuple, list)):
                returns, elements = "tuple", list(output)
            elif hasattr(output, "to_tuple"):
                returns, elements = "output:" + next(iter(output.keys())), list(output.to_tuple())
            else:
                returns, elements = "tensor", [output]
            arguments = [(str(n), a) for n, a in enumerate(args)] + list(kwargs.items())
            moments.append(path)
            seen[path] = Seen(returns, len(args), parameters, tuple(flat(e) for e in elements),
                              tuple((key, flat(a)) for key, a in arguments), called_at=called.get(path, 0),
                              returned_at=len(moments))
            versions[path] = [(n, e, e._version) for n, e in enumerate(elements) if isinstance(e, torch.Tensor)]

        def before(m, args, path=path):
            if path not in called:
                moments.append(path)
                called[path] = len(moments)

        handles.append(module.register_forward_pre_hook(before))
        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    moments: list[str] = []  # every first call and first return, in the order they happened
    called: dict[str, int] = {}
    rows = int(run.ids.numel())
    flat = lambda t: isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] == rows and rows > 1  # noqa: E731
    versions: dict[str, list] = {}
    try:
        with torch.no_grad():
            model(run.ids, attention_mask=torch.ones_like(run.ids))
    finally:
        for handle in handles:
            handle.remove()
    for path, kept in versions.items():
        changed = tuple(n for n, tensor, version in kept if tensor._version != version)
        if changed:
            seen[path] = dataclasses.replace(seen[path], changed_outputs=changed)
    return seen


# --- loading ---------------------------------------------------------------------------------------


def _load(library: str, run: PreviewRun) -> tuple[Any, str | None]:
    """The library's own view of a copy of the tiny model, or None and the library's message."""
    model = copy.deepcopy(run.model)
    try:
        if library == "nnsight":
            from nnsight import NNsight

            return (NNsight(model), model), None
        with tiny_tokenizer(model.config.vocab_size) as tokenizer:
            if library == "nnterp":
                return _load_nnterp(run, tokenizer)
            from transformer_lens.model_bridge import TransformerBridge

            model.config.architectures = [type(model).__name__]  # the bridge picks its adapter by this name
            bridge = TransformerBridge.boot_transformers(run.family, hf_model=model, tokenizer=tokenizer, device="cpu")
            return (bridge, model), None
    except Exception as e:  # any failure of the library to load the model is its answer, shown as such
        return None, library_message(e)


def _load_nnterp(run: PreviewRun, tokenizer) -> tuple[Any, str | None]:
    """nnterp's StandardizedTransformer, with attention probabilities where it can give them."""
    from nnterp import StandardizedTransformer

    model = copy.deepcopy(run.model)
    try:
        return (StandardizedTransformer(model, tokenizer=tokenizer, enable_attention_probs=True), model), None
    except Exception as probabilities:
        # without its attention-probabilities hook, nnterp may still load the family (on a fresh copy: the
        # failed attempt may have changed the first): the other accessors are checked, and
        # attention_probabilities carries this message
        model = copy.deepcopy(run.model)
        standardized = StandardizedTransformer(model, tokenizer=tokenizer)
        return (standardized, model), "attention probabilities: " + library_message(probabilities)


@contextlib.contextmanager
def tiny_tokenizer(vocab_size: int):
    """A tokenizer of the tiny vocabulary (one word per token id), saved to a folder and loaded back from
    it, as TransformerLens needs; built offline, nothing downloaded. The runs pass token ids, never text."""
    import tempfile

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(vocab={f"<{i}>": i for i in range(vocab_size)}, unk_token="<0>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<0>", pad_token="<0>", bos_token="<1>", eos_token="<1>")
    with tempfile.TemporaryDirectory(prefix="atlas-tokenizer-") as folder:
        tokenizer.save_pretrained(folder)
        yield AutoTokenizer.from_pretrained(folder)


# --- checking --------------------------------------------------------------------------------------


def _check_library(library: str, loaded, message: str | None, run: PreviewRun, family: str,
                   seen: dict[str, Seen]) -> dict[str, dict[str, Any]]:
    """Per captured value: {"accesses": [{"text", "blocks"}], "why"} for one library."""
    block_list = run.eager.resolution.roles.block_list
    cache = None
    if library == "transformer_lens" and loaded is not None:
        try:
            _, cache = loaded[0].run_with_cache(run.ids)
        except Exception as e:
            loaded, message = None, "run_with_cache: " + library_message(e)
    jobs: list[tuple[str, int | None, str, Access]] = []  # (value, block, the access's text, the access)
    why: dict[str, list[tuple[int | None, str]]] = {}
    for name, indices in captured_values(run).items():
        why[name] = []
        for index in indices:
            access = derive(library, name, run, index, seen, block_list)
            if access.steps is None:
                why[name].append((index, access.why, False))
            else:
                jobs.append((name, index, tools.access_text(library, access), access))
    if loaded is None:
        for name in {job[0] for job in jobs}:
            why[name] = [(None, f"{tools.TITLES[library]} does not load this family: {message}", True)]
        jobs = []
    tensors = _fetch(library, loaded, cache, jobs, run)
    reached: dict[str, dict[str, list[int | None]]] = {}
    for n, (name, index, text, access) in enumerate(jobs):
        problem, quoted = _problem(library, tensors[n], access, run, loaded[1], name, index, family, text)
        if problem is None:
            reached.setdefault(name, {}).setdefault(text, []).append(index)
        else:
            why[name].append((index, problem.removeprefix("shape: "), quoted))
    out = {}
    for name, reasons in why.items():
        accesses = [{"text": text, "blocks": None if blocks == [None] else blocks} for text, blocks in reached.get(name, {}).items()]
        if library == "nnterp" and name == "attention_probabilities" and message and not accesses and loaded is not None:
            reasons = [(None, message, True)]
        out[name] = {"accesses": accesses, **_first_reason(reasons, bool(accesses))}
    return out


def derive(library: str, name: str, run: PreviewRun, index: int | None, seen: dict[str, Seen], block_list: str) -> Access:
    """The library's access to value ``name`` at block ``index``."""
    placement = run.eager.resolution.at(name, index)
    if library == "nnsight":
        return tools.nnsight_access(placement, block_list, index, seen)
    if library == "nnterp":
        # the moment the atlas reads the value, to read nnterp's accessors in one trace in the forward's order
        return tools.nnterp_access(name, placement, tools.nnsight_access(placement, block_list, index, seen).when)
    return tools.transformer_lens_access(name, placement)


def _fetch(library: str, loaded, cache, jobs, run: PreviewRun) -> list[Any]:
    """Every job's tensor, or the exception its access raised. nnsight and nnterp: the accesses whose
    moment in the forward is known in one trace, in that order; the others (and all of them, if that
    trace fails) in one trace per value and access, block by block."""
    if library == "transformer_lens":
        found = []
        for name, index, text, access in jobs:
            hook = access.hook.replace("{i}", str(index))
            found.append(cache[hook] if hook in cache else NotReached(f"the bridge has no hook {hook} on this family"))
        return found
    if not jobs:
        return []
    wrapped = loaded[0]
    found: dict[int, Any] = {}
    timed = sorted((n for n, job in enumerate(jobs) if job[3].when is not None), key=lambda n: jobs[n][3].when)
    together = _traced(wrapped, [(jobs[n][1], jobs[n][3]) for n in timed], run) if timed else []
    if not isinstance(together, Exception):
        found.update(zip(timed, together))
    groups: dict[tuple[str, str], list[int]] = {}
    for n, (name, index, text, access) in enumerate(jobs):
        if n not in found:
            groups.setdefault((name, text), []).append(n)
    for members in groups.values():
        values = _traced(wrapped, [(jobs[n][1], jobs[n][3]) for n in members], run)
        found.update({n: values if isinstance(values, Exception) else value
                      for n, value in zip(members, values if not isinstance(values, Exception) else [values] * len(members))})
    return [found[n] for n in range(len(jobs))]


# The residual stream around each block and the logits are what every library defines the same way (nnterp's
# layers_input / layers_output, the bridge's hook_resid_pre / hook_resid_post): there a library's access that
# reads other numbers is a wrong access, not the library's own view of the model, and it stops the build as a
# wrong nnsight access does. Elsewhere an adapter may read another point of a family's model (TransformerLens's
# hook_embed after Granite's embedding multiplier), and the page says so instead.
RESIDUAL_STREAM = frozenset({"layer_input", "layer_output", "logits"})


def _problem(library, got, access: Access, run: PreviewRun, model, name, index, family, text) -> tuple[str | None, bool]:
    """(None, _) where the tensor read is the atlas's value; (why not, whether it is the library's own
    message) where the access raised or gave another shape; a right shape with other numbers stops the
    build (nnsight) or is said (the others)."""
    if not isinstance(got, Exception):
        try:
            got = _post_steps(got, access, run, model)
        except Exception as e:
            got = NotReached(library_message(e), quoted=True)
    if isinstance(got, NotReached):
        return str(got), got.quoted
    if isinstance(got, Exception):
        return library_message(got), True
    problem = compare(got, run.eager.captured[(name, index)])
    if problem is not None and problem.startswith("values:"):
        other = which_value(got, run, index)
        found = f"{problem[8:]}; it is the atlas's {other}" if other else problem[8:]
        if library == "nnsight" or name in RESIDUAL_STREAM:  # an access that must be the value
            where = "on the model" if index is None else f"at block {index}"
            raise AtlasError(f"atlas/families/{family}.py", f"tools.{library}.{name}",
                             f"{text} {where} reads another tensor than the atlas's {name} ({found}): the access is wrong")
        # the library's own name for the value, which its adapter for this family points elsewhere
        problem = f"its tensor has the value's shape but other numbers ({found})"
    return problem, False


def which_value(got, run: PreviewRun, near: int | None = None) -> str | None:
    """The standard value the run captured that a tensor is (its name, and its block), where one is; those
    of block ``near`` first (block 0's input is the token embeddings too)."""
    for (name, index), value in sorted(run.eager.captured.items(), key=lambda item: item[0][1] != near):
        if hasattr(value, "shape") and compare(got, value) is None:
            return name if index is None else f"{name} at block {index}"
    return None


def _traced(wrapped, items: list[tuple[int | None, Access]], run: PreviewRun) -> list[Any] | Exception:
    """The accesses read in one trace, in the order given (the forward's order); a failure answers for all."""
    import torch

    reach = [(index, [s for s in access.steps if s[0] != "call" or s[1] in INSIDE]) for index, access in items]
    ids, mask = run.ids, torch.ones_like(run.ids)
    saved: list = []  # filled inside the trace: nnsight runs the with block's body as code of its own
    try:
        # nnsight reads the body of the with block from this file's source: each library gets a plain one
        with torch.no_grad():
            if hasattr(wrapped, "layers_output"):  # nnterp's wrapper takes the call's inputs as one dict
                with wrapped.trace({"input_ids": ids, "attention_mask": mask}):
                    for index, steps in reach:
                        saved.append(walk(wrapped, steps, index).save())
            else:
                with wrapped.trace(ids, attention_mask=mask):
                    for index, steps in reach:
                        saved.append(walk(wrapped, steps, index).save())
        return list(saved)
    except Exception as e:
        return e


def walk(root, steps: list[list[Any]], index: int | None):
    """Follow attribute, index and key steps from ``root`` (an envoy), the block's own number for "i"."""
    value = root
    for kind, *rest in steps:
        if kind == "attr":
            value = getattr(value, rest[0])
        elif kind == "index":
            value = value[index if rest[0] == "i" else rest[0]]
        elif kind == "key":
            value = value[rest[0]]
        elif kind == "call" and rest[0] in INSIDE:
            value = getattr(value, rest[0])()
    return value


INSIDE = ("clone",)  # calls made inside the trace, when the value is read (a copy before the caller changes it)


def _post_steps(tensor, access: Access, run: PreviewRun, model):
    """The call steps (unflatten, transpose) applied to the tensor read, their named sizes filled in."""
    from atlas.model.trace import num_heads

    batch, seq = run.ids.shape
    sizes = {"batch": int(batch), "seq": int(seq)}
    if "heads_of" in access.needs:
        sizes["num_heads"] = num_heads(model.get_submodule(access.needs["heads_of"]))
    fill = lambda a: [fill(x) for x in a] if isinstance(a, list) else sizes.get(a, a) if isinstance(a, str) else a  # noqa: E731
    for kind, *rest in access.steps:
        if kind == "call" and rest[0] not in INSIDE:
            arguments = [tuple(a) if isinstance(a, list) else a for a in fill(rest[1])]
            tensor = getattr(tensor, rest[0])(*arguments)
    return tensor


def compare(got, expected) -> str | None:
    """None where ``got`` is the atlas's value; "shape: ..." where it is not that value's shape (or not a
    tensor); "values: ..." where the shape is right and the numbers are not."""
    import torch

    if not hasattr(expected, "shape"):  # input_size: the call's (batch, seq)
        return None if tuple(got) == tuple(expected) else f"shape: it gives {tuple(got)}, the call was {tuple(expected)}"
    if not isinstance(got, torch.Tensor):
        return f"shape: it gives a {type(got).__name__}, not a tensor"
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape: it gives shape {tuple(got.shape)}, the atlas's value has {tuple(expected.shape)}"
    if not expected.is_floating_point():
        same = torch.equal(got.to(expected.dtype), expected)
        return None if same else "values: the integers differ"
    got, expected = got.float(), expected.float()
    # a masked entry is -inf or the dtype's lowest number, as implementations write it: the same mask either way
    masked = lambda t: t <= torch.finfo(torch.float32).min / 2  # noqa: E731
    if not torch.equal(masked(expected), masked(got)):
        return "values: its masked entries are elsewhere"
    finite = ~masked(expected)
    if torch.allclose(got[finite], expected[finite], rtol=RTOL, atol=ATOL):
        return None
    return f"values: they differ by up to {float((got[finite] - expected[finite]).abs().max()):.3g}"


# --- words -----------------------------------------------------------------------------------------

ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
LONG_LIST = re.compile(r"\[[^\[\]]{80,}(\]|$)")
TEMPORARY = re.compile(r"/\S*atlas-tokenizer-\S*")
# a message that prints the whole module tree ("Mamba2ForCausalLM(\n  (backbone): …\n) has no attribute layers")
MODULE_TREE = re.compile(r"^([A-Za-z_]\w*)\(\n.*\n\)", re.DOTALL)


def library_message(e: BaseException) -> str:
    """A library's message in one line, without what differs between runs (addresses, the temporary folder)."""
    lines = [line.strip() for line in MODULE_TREE.sub(r"\1(…)", str(e)).splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):  # nnsight hands on the traceback it caught: its last line is the error
        lines = lines[-1:]
    text = " ".join(" ".join(lines).split()) or type(e).__name__
    text = TEMPORARY.sub("<the tokenizer folder>", ADDRESS.sub("0x…", text))
    text = LONG_LIST.sub("[…]", text)  # a library's list of every name it knows
    text = text if len(text) <= 300 else text[:299] + "…"
    return f"{type(e).__name__}: {text}"


def _first_reason(reasons: list[tuple[int | None, str, bool]], reached: bool) -> dict[str, Any]:
    """{"why", "quoted"}: why (some) blocks are not reached, in one line (the reason alone where it holds
    for every block the value is at, else the first block's and how many other blocks fail), and whether
    it quotes the library's own message (the page shows that verbatim, as code)."""
    if not reasons:
        return {"why": None, "quoted": False}
    index, why, quoted = reasons[0]
    if not reached and len({r[1] for r in reasons}) == 1:
        return {"why": why, "quoted": quoted}
    more = len(reasons) - 1
    text = why if index is None else f"block {index}: {why}"
    return {"why": text + (f" (and {more} more block{'s' if more > 1 else ''})" if more else ""), "quoted": quoted}


def _version(library: str) -> str:
    from importlib.metadata import version

    return version({"transformer_lens": "transformer-lens"}.get(library, library))


@contextlib.contextmanager
def _quiet():
    """The libraries' own warnings and prints kept off the build's output (a build's stderr is its errors)."""
    sink = io.StringIO()
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)

