"""No page's visible text says None, undefined, NaN or null; code shown verbatim is exempt."""

from __future__ import annotations

import pytest

from atlas.render import pages
from atlas.check import visible_text
from atlas.errors import AtlasError
from tests.conftest import run_build


def words(html: str) -> list[str]:
    return [word for word, _ in visible_text.unsaid_words(html)]


@pytest.mark.parametrize("html, found", [
    ("<p>read at None</p>", ["None"]),
    ("<dd><code>[batch, seq, None]</code></dd>", ["None"]),  # a shape is a claim, not code
    ('<span title="only when: null">⚠︎</span>', ["null"]),  # a tooltip is read
    ('<button aria-label="undefined">x</button>', ["undefined"]),
    ("<td>NaN</td><td>undefined</td>", ["NaN", "undefined"]),
    ('<pre class="output">None\n</pre>', ["None"]),  # what a notes block printed is the run's answer
    ("<p>Nonesuch nullable NaNs</p>", []),  # only whole words
    ('<pre class="code">if x is not None:</pre>', []),  # transformers' source
    ('<pre class="printout">(act): None</pre>', []),
    ('<td><code class="json">null</code></td>', []),  # config.json as released
    ('<pre><code class="language-python">print(None)</code></pre>', []),  # the notes' source
    ('<p>not reached: <code class="message">TypeError: got None</code></p>', []),  # a library's own message, quoted
    ('<p>not reached: <code>got None</code></p>', ["None"]),  # only the quoted message is exempt
    ("<script>var a = null;</script><style>.x{}</style>", []),
    ('<pre class="code">None<br>None</pre><p>then None</p>', ["None"]),  # a void element closes nothing
])
def test_visible_words(html, found):
    assert words(html) == found
    # The quick pass before parsing never hides what the parser finds.
    reader = visible_text._Reader()
    reader.feed(html)
    assert [w for w, _ in reader.found] == found


@pytest.mark.parametrize("html", ['<pre class="code x">None</pre>', '<div data-json="null">x</div>', "<p>&#78;one</p>"])
def test_other_spellings_go_to_the_parser(html):
    assert visible_text._may_say(html)
    assert words(html) == (["None"] if "&#78;" in html else [])


def test_an_offending_page_is_one_error_naming_the_page_and_the_text():
    with pytest.raises(AtlasError) as caught:
        visible_text.check_pages({"gpt2/facts.json": "None", "gpt2/c/x.html": "<dl><dt>read at</dt><dd>None</dd></dl>"})
    message = str(caught.value)
    assert message == 'page gpt2/c/x.html: the visible text says "None": "read at None"'


def test_a_build_whose_page_says_none_fails_naming_the_page(project_copy):
    family_page = project_copy / "templates" / "family.html"
    text = family_page.read_text(encoding="utf-8")
    marker = '<section id="header">'
    assert marker in text
    family_page.write_text(text.replace(marker, marker + "<p>Revision: {{ none }}</p>", 1), encoding="utf-8")
    out = project_copy / "out"
    result = run_build(project_copy, "--family", "gpt2", "--out", str(out))
    assert result.returncode == 1
    [message] = result.stderr.strip().splitlines()
    assert message.startswith('error: page gpt2/index.html: the visible text says "None": "')
    assert message.endswith(f'Revision: None"; the site in {out} was left as it was') and not out.exists()


def test_no_built_page_says_none(built_site):
    pages = sorted(built_site.rglob("*.html"))
    assert len(pages) > 1000
    for page in pages:
        assert visible_text.unsaid_words(page.read_text(encoding="utf-8")) == [], page


def test_values_a_dense_model_lacks_say_why_instead_of_none(collected):
    facts = collected("gpt2").facts
    values = {v["name"]: v for host in facts["support"]["hosts"] for v in host["values"]}
    # GPT-2 has no experts: the mixture's sizes stay named, and where it would be read says why not.
    assert values["router_logits"]["shape"] == ["batch", "seq", "num_experts"]
    assert values["expert_outputs"]["shape"] == ["batch", "seq", "top_k", facts["config"]["standardized"]["hidden_size"]]
    assert values["router_logits"]["read_at"].startswith("not read on this checkpoint: no block has it (block 0's MLP")
    assert all(None not in v["shape"] and v["read_at"] for v in values.values())


def test_a_sparse_moe_block_is_a_mixture_not_a_decoder_block(collected):
    # Mixtral's MLP class is MixtralSparseMoeBlock: its name ends in Block, but it is the block's MLP.
    view = pages.site(collected("mixtral").facts)
    mlp = next(n for nid, n in view["nodes"].items() if nid.endswith(".mlp"))
    assert mlp["title"] == "Mixture of experts"
    assert view["nodes"]["value.mlp_norm_output"]["consumers"] == ["mlp"]
