"""IREE in its own terms: its dispatches read from its own IR (which of the program's ops each computes, what
each stores), their stored values captured from IREE's own run, each dispatch run on its own captured inputs in
the formulations a compiler may choose, and IREE's own compile options searched as fixes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxparity
from jaxparity.case import load_case
from jaxparity.explain.mechanism.artifact.dispatches import dispatch_findings
from jaxparity.report.brief import _dispatch_lines
from jaxparity.localize.program import flatten
from jaxparity.paths import make_path
from jaxparity.paths.iree import IreePath
from jaxparity.report.terminal import render_text

needs_iree = pytest.mark.skipif(IreePath().unavailable_reason() is not None, reason="IREE is not installed")


def _program(case):
    args = jax.tree_util.tree_map(jnp.asarray, case.args)
    return flatten(case.fn, args), jax.tree_util.tree_leaves(args)


def _plain(case):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(IreePath().run(case.fn, case.args))]


@needs_iree
def test_dispatches_hold_the_ops_iree_fuses_and_store_what_others_read(examples):
    case = load_case(str(examples / "mlp_bf16.py"))
    program, flat = _program(case)
    dispatches = IreePath().dispatches(program, flat)
    owner = {i: d for d in dispatches for i in d.ops}
    assert set(owner) == set(range(len(program.ops)))  # every op in one dispatch (data movement with its input)
    prims = [op.info.primitive for op in program.ops]
    dots = [i for i, p in enumerate(prims) if p == "dot_general"]
    tanh = [i for i, p in enumerate(prims) if p == "tanh"]
    # gelu's tanh is computed in the dispatch of the matmul before it: IREE fuses the elementwise consumers
    assert [owner[t].name for t in tanh] == [owner[d].name for d in dots[:len(tanh)]]
    assert program.out_ids[0] in owner[dots[-1]].stores  # the last dispatch stores the output
    for d in dispatches:  # a stored value is read outside its dispatch, or is an output
        inside = {v for i in d.ops for v in program.ops[i].outputs}
        assert set(d.stores) <= inside


@needs_iree
def test_a_loop_whose_body_iree_runs_as_several_dispatches_is_one_unit():
    def fn(w, x):
        def body(h, _):
            h = jnp.tanh(h @ w) * jnp.bfloat16(1.5)
            return h, h.sum()
        return jax.lax.scan(body, x, None, length=3)

    w = jnp.full((8, 8), 0.125, jnp.bfloat16)
    x = jnp.linspace(-1, 1, 32, dtype=jnp.float32).reshape(4, 8).astype(jnp.bfloat16)
    program = flatten(fn, (w, x))
    (scan,) = [op.info.index for op in program.ops if op.info.primitive == "scan"]
    dispatches = IreePath().dispatches(program, [w, x])
    (unit,) = [d for d in dispatches if scan in d.ops]
    assert ".." in unit.name and unit.name.startswith("main_dispatch_"), unit  # the body's dispatches, together
    assert set(unit.stores) >= {v for v in program.ops[scan].outputs if v is not None}


@needs_iree
@pytest.mark.parametrize("example", ["mlp_bf16.py", "transformer_bf16.py", "conv_bf16.py"])
def test_each_dispatch_on_its_own_captured_inputs_is_reproduced_bit_for_bit(examples, example):
    """The capture leaves IREE's outputs as they are; every dispatch that stores other values than the declared ops
    give on its inputs is reproduced by a formulation that computes its bf16 ops in float32."""
    case = load_case(str(examples / example))
    program, flat = _program(case)
    found, how = dispatch_findings(IreePath(), program, flat, _plain(case))
    assert found, how
    differ = [f for f in found if f.differ]
    assert differ  # IREE keeps bf16 in float32 inside its dispatches: some store other values
    assert all(f.reproduced_by not in (None, "declared") for f in differ), _dispatch_lines(found, [op.info for op in program.ops])
    assert all(f.reproduced_by == "declared" for f in found if not f.differ)
    lines = _dispatch_lines(found, [op.info for op in program.ops])
    assert lines[0].startswith("main_dispatch_") and "stored elements differ" in lines[0]


@needs_iree
def test_a_capture_that_changes_the_outputs_gives_no_view(examples):
    case = load_case(str(examples / "mlp_bf16.py"))
    program, flat = _program(case)
    plain = _plain(case)
    moved = [plain[0] + np.asarray(1, plain[0].dtype)]  # as if returning the stores had moved IREE's outputs
    found, why = dispatch_findings(IreePath(), program, flat, moved)
    assert found == [] and "changes 1 of its outputs" in why


@needs_iree
@pytest.mark.slow
def test_explain_without_an_op_level_view_reads_the_dispatches(examples):
    case = load_case(str(examples / "mlp_bf16.py"))
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "iree"]).explain()
    e = next(x for x in result.explanations if x.path == "iree")
    cause = next(c for c in e.causes if c.cause == "narrow-rounding-skipped")
    assert cause.status == "confirmed", cause.evidence
    assert "rounds only what it stores" in cause.evidence and "main_dispatch_" in cause.evidence
    text = " ".join(render_text(result, width=400, verbose=True).split())
    assert "per dispatch (iree's own units" in text
    assert e.dispatches and any(f.differ for f in e.dispatches)  # the findings travel on the explanation
    (v,) = [v for v in result.verdicts if v.kind == "divergence"]
    first = min((f for f in e.dispatches if f.differ), key=lambda f: f.ops[0])
    assert v.carriers and v.carriers[0].op.startswith("#") and "dispatch" in v.carriers[0].share, v.carriers
    assert int(v.carriers[0].op[1:].split()[0]) in first.ops, (v.carriers[0], first)


@needs_iree
def test_iree_alternatives_are_its_own_compile_options_and_each_runs():
    path = IreePath()
    alternatives = path.alternatives()
    specs = [str(p) for p, _ in alternatives]
    assert "iree:flags=--iree-opt-level=O0" in specs and "iree:target_cpu=generic" in specs
    assert all(words.startswith("compile ") for _, words in alternatives)
    assert not any("O0" in str(p) for p, _ in IreePath({"flags": "--iree-opt-level=O1"}).alternatives())  # its own
    x = jnp.linspace(-3, 3, 64, dtype=jnp.float32)
    for p, _ in alternatives:  # each is a setting IREE takes
        out = np.asarray(make_path(str(p)).run(jnp.tanh, (x,)))
        np.testing.assert_allclose(out, np.tanh(np.asarray(x)), rtol=1e-5, atol=1e-6)


@needs_iree
@pytest.mark.slow
def test_a_runtime_option_is_a_fix_only_where_the_triage_calls_what_is_left_noise(examples):
    """The search tries IREE's options first; one it calls a fix leaves the outputs within the model's own noise
    by the triage's judgement, as a compare of that setting says."""
    from jaxparity.explain.triage import within_own_noise

    case = load_case(str(examples / "cnn_bf16.py"))
    result = jaxparity.compare(case.fn, *case.args, paths=["eager", "iree"]).explain()
    e = next(x for x in result.explanations if x.path == "iree")
    options = [f for f in (*e.fixes, *e.searched) if f.kind == "runtime option"]
    assert options and all("iree:" in f.evidence for f in options)
    program, flat = _program(case)
    eager = [np.asarray(x) for x in jax.tree_util.tree_leaves(make_path("eager").run(case.fn, case.args))]
    for f in options:
        if f.verified:
            outs = [np.asarray(x) for x in jax.tree_util.tree_leaves(make_path(f.spec).run(case.fn, case.args))]
            assert within_own_noise(outs, eager, program, flat, case.fn, case.args), f.evidence


@needs_iree
def test_a_dispatch_whose_sums_iree_adds_in_its_own_order_is_reproduced_in_that_order():
    """A float32 row sum of 37 terms spanning 14 decades: IREE adds each row in order, XLA (the declared ops' replay)
    in lanes, so the dispatch stores other values than the declared ops give; the order read off IREE's own kernel
    (the summation-order probe) gives them bit for bit."""
    x = (np.random.default_rng(3).standard_normal((16, 37))
         * np.exp(np.random.default_rng(4).uniform(-16, 16, (16, 37)))).astype(np.float32)

    def fn(v):
        return jnp.sum(v, axis=-1)

    program, flat = flatten(fn, (jnp.asarray(x),)), [jnp.asarray(x)]
    plain = [np.asarray(v) for v in jax.tree_util.tree_leaves(IreePath().run(fn, (jnp.asarray(x),)))]
    found, how = dispatch_findings(IreePath(), program, flat, plain)
    differ = [f for f in found if f.differ]
    assert differ, (how, found)  # else the data no longer tell the two orders apart
    assert all(f.reproduced_by == "ordered:iree" for f in differ), found
    assert "its sums added in iree's own order" in _dispatch_lines(found, [op.info for op in program.ops])[0]
