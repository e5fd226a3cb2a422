"""The vendor's own counts beside ours (checkpoint.json's ``published``): written at the vendor's digits,
agreeing or saying why not, on the fact sheet, in the parameters section and in the sizes table.

The expected figures are the vendors' own, typed here as their cards and names give them, and each exact
count is written at those digits by hand in the assertion; the facts only say which way it came out.
"""

from __future__ import annotations

import json
import re

import pytest

from atlas.check.claims import check_published
from atlas.errors import AtlasError
from atlas.facts.published import at_digits, comparison
from atlas.render.site import render_family
from tests.conftest import ROOT


def test_a_count_is_written_at_the_figures_digits():
    assert at_digits(8_804_241_408, "8B") == "9B"  # rounded, not cut
    assert at_digits(8_449_999_999, "8B") == "8B"
    assert at_digits(7_272_665_088, "7.27B") == "7.27B"
    assert at_digits(360_748_032, "0.36B") == "0.36B"
    assert at_digits(1_026_408_232_448, "1T") == "1T"
    assert at_digits(356_712_448, "350M") == "357M"
    assert at_digits(2_795_443_200, "2,795,443,200") == "2,795,443,200"
    assert at_digits(2_795_443_201, "2795443200") == "2,795,443,201"


def test_the_comparison_keeps_the_vendors_words_and_says_which_figures_agree():
    published = {"total": "4.0B", "active": "1B", "says": "4B total, 1B active", "source": "https://example.org/card"}
    got = comparison(published, {"total": 4_022_468_096, "active": 1_600_000_000})
    assert [(r["what"], r["ours"], r["agrees"]) for r in got["figures"]] == [("total", "4.0B", True), ("active", "2B", False)]
    assert got["says"] == "4B total, 1B active" and got["source"] == "https://example.org/card" and got["differs"] is None
    assert comparison({}, {"total": 1, "active": 1}) is None


def test_a_disagreement_needs_a_reason_and_a_reason_needs_a_disagreement():
    apart = comparison({"total": "70B", "says": "the name", "source": "https://example.org"}, {"total": 70_553_706_496, "active": 70_553_706_496})
    with pytest.raises(AtlasError) as e:
        check_published("meta-llama/Llama-3.1-70B", apart)
    assert str(e.value) == ("atlas/checkpoints/meta-llama/Llama-3.1-70B/checkpoint.json: published.total: says 70B, but the atlas "
                            "counts 70,553,706,496 parameters, 71B at those digits: give the reason they differ in published.differs")
    check_published("meta-llama/Llama-3.1-70B", {**apart, "differs": "the name cuts"})  # a reason: no error
    agrees = comparison({"total": "71B", "says": "x", "source": "https://example.org", "differs": "stale"}, {"total": 70_553_706_496, "active": 1})
    with pytest.raises(AtlasError) as e:
        check_published("meta-llama/Llama-3.1-70B", agrees)
    assert str(e.value).endswith("published.differs: gives a reason they differ, but every figure agrees with the atlas's count at its digits")


def published_of(repo: str) -> dict:
    return json.loads((ROOT / "atlas/checkpoints" / repo / "checkpoint.json").read_text(encoding="utf-8"))["published"]


def test_kimi_k2_total_agrees_and_its_active_count_is_set_beside_ours_with_the_reason(kimi):
    p = kimi["checkpoint"]["published"]
    # Moonshot's card: "32 billion activated parameters and 1 trillion total parameters"
    assert [(r["what"], r["figure"]) for r in p["figures"]] == [("total", "1T"), ("active", "32B")]
    total, active = kimi["accounting"]["model"]["total"], kimi["accounting"]["model"]["active"]
    assert 0.5e12 <= total < 1.5e12 and [r["agrees"] for r in p["figures"]] == [True, False]
    assert 32.5e9 <= active < 33.5e9 and p["figures"][1]["ours"] == "33B"
    # the reason's arithmetic: without the embedding table (vocabulary × width) the active count is 32B at those digits
    vocabulary, width = kimi["config"]["raw"]["vocab_size"], kimi["config"]["raw"]["hidden_size"]
    assert at_digits(active - vocabulary * width, "32B") == "32B"
    assert p["differs"] == published_of("moonshotai/Kimi-K2-Instruct")["differs"]


def test_the_page_shows_the_vendors_count_on_the_sheet_and_why_in_the_parameters_section(kimi):
    page = render_family(kimi)["kimi_k2/index.html"]
    sheet = page[page.index('<dl class="sheet'):page.index("</dl>", page.index('<dl class="sheet'))]
    cell = re.search(r"<dt>vendor's count</dt><dd>(.*?)</dd>", sheet).group(1)
    assert re.sub(r"<[^>]+>", "", cell) == "1T · 32B active; ours 1T · 33B active at those digits"
    # the site links nowhere off itself: the figure leads to the paragraph, which names the address as text
    assert 'href="#published"' in cell and "https://" not in cell
    why = re.search(r'<p id="published">(.*?)</p>', page).group(1)
    assert '<code class="url">https://huggingface.co/moonshotai/Kimi-K2-Instruct</code>' in why and "href=" not in why
    text = re.sub(r"<[^>]+>", "", why)
    assert "“32 billion activated parameters and 1 trillion total parameters” (at https://huggingface.co/moonshotai/Kimi-K2-Instruct)" in text
    assert "Its total of 1T agrees with ours: 1,026,408,232,448, which is 1T at those digits;" in text
    assert "its active count of 32B differs from ours: 32,861,500,928, which is 33B at those digits." in text
    assert "They differ because its active figure agrees with ours once the embedding table is left out" in text


def test_every_size_of_llama_3_1_and_qwen3_has_the_vendors_count(collected):
    llama = {r["repo"]: r["published"] for r in collected("llama").facts["sizes"]}
    # Meta names the sizes 8B, 70B and 405B: 8.03, 70.55 and 405.85 billion, so only the 8B's name is its rounding
    assert {repo: [f["agrees"] for f in p["figures"]] for repo, p in llama.items()} == {
        "meta-llama/Llama-3.1-8B": [True], "meta-llama/Llama-3.1-70B": [False], "meta-llama/Llama-3.1-405B": [False]}
    assert all(p["differs"] for repo, p in llama.items() if not repo.endswith("8B"))
    qwen3 = [r for r in collected("qwen3").facts["sizes"] if r["built_as"] is None]  # the dense sizes; the mixtures: test_sizes
    # Qwen's cards, "Number of Parameters": every one agrees at one decimal
    assert [r["published"]["figures"][0]["figure"] for r in qwen3] == ["0.6B", "1.7B", "4.0B", "8.2B", "14.8B", "32.8B"]
    assert all(r["published"]["figures"][0]["agrees"] and not r["published"]["differs"] for r in qwen3)
    page = render_family(collected("llama").facts)["llama/index.html"]
    sizes = page[page.index('<section id="sizes">'):page.index("</section>", page.index('<section id="sizes">'))]
    text = re.sub(r"<[^>]+>", "", sizes)
    assert "70B; ours 71B [1]" in text and "405B; ours 406B [1]" in text and "8B, as ours" in text
    assert "Where the vendor's count is not ours at its digits: the name cuts the count down to the whole billion rather than rounding it." in text
    assert "href=\"http" not in sizes
    assert "Where the vendors' counts are read: https://huggingface.co/meta-llama/Llama-3.1-8B; https://huggingface.co/meta-llama/Llama-3.1-70B;" in text
