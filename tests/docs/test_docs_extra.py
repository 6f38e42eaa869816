"""The `docs` extra installs what `mkdocs build --strict` uses: with `separate_signature` on, mkdocstrings
formats each signature of the API reference with Ruff or Black, and says "Formatting signatures requires either
Black or Ruff" where neither is installed."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def extra(name: str) -> list[str]:
    """The requirements of pyproject.toml's optional dependency `name` (read as text: tomllib is 3.11+)."""
    section = (ROOT / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1].split("\n[")[0]
    body = re.search(rf"^{name} = \[(.*?)^\]", section, flags=re.M | re.S).group(1)
    return re.findall(r'^\s*"([^"]+)"', body, flags=re.M)


def test_the_docs_extra_has_the_signature_formatter_with_a_range():
    assert re.search(r"^\s*separate_signature: true", (ROOT / "mkdocs.yml").read_text(), flags=re.M)
    formatters = [r for r in extra("docs") if re.match(r"(ruff|black)\b", r)]
    assert len(formatters) == 1, extra("docs")
    assert ">=" in formatters[0] and "<" in formatters[0].replace("<=", "")  # a range, both ends
    assert set(extra("docs")) >= {"mkdocs>=1.6,<2", "mkdocstrings[python]>=0.28,<2"}  # the parser reads the extra
