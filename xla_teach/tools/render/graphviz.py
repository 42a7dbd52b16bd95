"""Running Graphviz's ``dot`` program: DOT text in, SVG or PNG out.

Only this file starts a process; :mod:`render` builds the DOT text in pure Python,
so ``.dot`` dumps work on machines without Graphviz.
"""

from __future__ import annotations

import shutil
import subprocess


class RenderError(ValueError):
    """The input cannot be drawn, or Graphviz rejected the DOT text."""


class GraphvizNotFound(RuntimeError):
    """Graphviz's ``dot`` program is not installed (DOT text still works without it)."""

    def __init__(self) -> None:
        super().__init__(
            "Graphviz's 'dot' program was not found on PATH, so the graph cannot be turned into SVG/PNG. "
            "Install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz; "
            "conda: conda install graphviz), or write DOT text with hlo_to_dot() instead.")


def have_dot() -> bool:
    """Whether Graphviz's ``dot`` program is installed."""
    return shutil.which("dot") is not None


def run_dot(dot_text: str, fmt: str, timeout: float = 120.0) -> bytes:
    """Lay out ``dot_text`` with Graphviz's ``dot`` and return the ``fmt`` output (svg, png, pdf...)."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizNotFound()
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise RenderError(f"Graphviz took longer than {timeout:.0f}s; draw less (max_nodes=..., "
                          "collapse_fusions=True)") from None
    if done.returncode != 0:
        raise RenderError(f"Graphviz rejected the graph: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def to_svg(dot_text: str) -> str:
    """SVG text for DOT text (needs Graphviz's ``dot``)."""
    return run_dot(dot_text, "svg").decode()


def to_png(dot_text: str) -> bytes:
    """PNG bytes for DOT text (needs Graphviz's ``dot``)."""
    return run_dot(dot_text, "png")


def svg_for_inline(svg: str) -> str:
    """SVG without its XML prolog and DOCTYPE, ready to paste inside HTML."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg
